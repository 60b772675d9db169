package test

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// ulidRE matches a generated id (a ULID: 26 Crockford base32 characters).
var ulidRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

// TestCLIBasics drives send, get, delete, reschedule, stats and dead list
// through the binary, directly against Redis, through Twemproxy and
// through Codis, and checks their outputs and exit statuses (0 ok, 1
// error, 2 usage).
func TestCLIBasics(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{})
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			cliBasics(t, tg.Addr, "cli."+tg.Name)
		})
	}
	if probs := env.ProxyLogProblems(); len(probs) > 0 {
		t.Errorf("nutcracker logged %d problems, first: %v", len(probs), probs[:min(5, len(probs))])
	}
	checkClientErr(t, env)
	t.Run("codis", func(t *testing.T) {
		c := testenv.StartCodis(t, testenv.CodisOptions{Groups: 2})
		cliBasics(t, c.Proxies[0], "cli.codis")
		checkCodis(t, c, []int{0}, false)
	})
}

func cliBasics(t *testing.T, addr, topic string) {
	base := []string{"--addr", addr, "--topic", topic}
	run := func(stdin string, args ...string) result {
		t.Helper()
		// The command word (and "list" of "dead list") go first.
		n := 1
		if args[0] == "dead" {
			n = 2
		}
		full := append(append(append([]string(nil), args[:n]...), base...), args[n:]...)
		return cli(t, stdin, full...)
	}
	must := func(stdin string, args ...string) result {
		t.Helper()
		r := run(stdin, args...)
		if r.code != 0 {
			t.Fatalf("want exit 0, got %s", r)
		}
		return r
	}
	get := func(id string) infoJSON {
		t.Helper()
		return decodeInfo(t, must("", "get", "--id", id).stdout)
	}

	// send with an id prints the id.
	before := time.Now()
	r := must("", "send", "--id", "a1", "--body", "hello wörld", "--delay", "1h")
	after := time.Now()
	if got := strings.TrimSpace(r.stdout); got != "a1" {
		t.Errorf("send --id a1 printed %q", got)
	}
	in := get("a1")
	due := mustTime(t, in.Due)
	if in.ID != "a1" || in.Topic != topic || in.State != "scheduled" || in.Attempts != 0 ||
		in.Body == nil || *in.Body != "hello wörld" || in.Partition < 0 || in.Partition >= 16 {
		t.Errorf("get a1: %+v", in)
	}
	if due.Before(before.Add(time.Hour-clockSlack)) || due.After(after.Add(time.Hour+clockSlack)) {
		t.Errorf("get a1: due %s, want about 1h after %s", in.Due, before.UTC().Format(time.RFC3339Nano))
	}
	if in.Created == "" || in.Updated == "" {
		t.Errorf("get a1: created %q updated %q, want both set", in.Created, in.Updated)
	}

	// send without an id prints a generated ULID; --at sets the due time.
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	r = must("", "send", "--at", at.Format(time.RFC3339), "--body", "")
	gen := strings.TrimSpace(r.stdout)
	if !ulidRE.MatchString(gen) {
		t.Errorf("send without --id printed %q, want a ULID", gen)
	} else if in := get(gen); !mustTime(t, in.Due).Equal(at) || in.Body == nil || *in.Body != "" {
		t.Errorf("get %s: due %s body %v, want due %s and an empty body", gen, in.Due, in.Body, at.Format(time.RFC3339))
	}

	// A body that is not UTF-8 comes back as body_base64.
	bin := []byte{0xff, 0x00, 0xfe, 'x', 0x80}
	r = must(string(bin), "send", "--id", "bin", "--body-file", "-", "--delay", "1h")
	if in := get("bin"); in.Body != nil || in.BodyBase64 != base64.StdEncoding.EncodeToString(bin) {
		t.Errorf("get bin: body %v body_base64 %q, want base64 of %x", in.Body, in.BodyBase64, bin)
	}

	// Duplicate, missing and invalid ids.
	wantExit(t, run("", "send", "--id", "a1", "--body", "again"), 1, "duplicate", "a1")
	if in := get("a1"); in.Body == nil || *in.Body != "hello wörld" {
		t.Errorf("a refused duplicate changed the message: %+v", in)
	}
	wantExit(t, run("", "get", "--id", "nope"), 1, "not found")
	wantExit(t, run("", "delete", "--id", "nope"), 1, "not found")
	wantExit(t, run("", "reschedule", "--id", "nope", "--delay", "1m"), 1, "not found")
	wantExit(t, run("", "send", "--id", "bad\nid"), 1)

	// reschedule prints the new due time, which get then shows.
	r = must("", "reschedule", "--id", "a1", "--delay", "2h")
	newDue := mustTime(t, strings.TrimSpace(r.stdout))
	if d := time.Until(newDue); d < 2*time.Hour-time.Minute || d > 2*time.Hour {
		t.Errorf("reschedule --delay 2h printed %s", newDue)
	}
	if in := get("a1"); !mustTime(t, in.Due).Equal(newDue) || in.State != "scheduled" {
		t.Errorf("after reschedule: due %s state %s, want %s scheduled", in.Due, in.State, newDue.Format(time.RFC3339Nano))
	}
	r = must("", "reschedule", "--id", "a1", "--at", "2031-02-03T04:05:06.789Z")
	if got := strings.TrimSpace(r.stdout); got != "2031-02-03T04:05:06.789Z" {
		t.Errorf("reschedule --at printed %q", got)
	}

	// stats: a table with a total line, and JSON.
	r = must("", "stats")
	tbl := lines(r.stdout)
	if len(tbl) != 20 || !strings.HasPrefix(tbl[0], "partition") || strings.Join(strings.Fields(tbl[17]), " ") != "total 3 0 0 0" ||
		tbl[18] != "lag 0s, consumers 0" || tbl[19] != "partitions 16" {
		t.Errorf("stats table: want a header, 16 partitions, \"total 3 0 0 0\", \"lag 0s, consumers 0\" and \"partitions 16\", got:\n%s", r.stdout)
	}
	ts := stats(t, addr, topic)
	if ts.Scheduled != 3 || ts.DueNow != 0 || ts.LagMS != 0 || ts.Consumers != 0 || ts.InFlight != 0 || ts.Dead != 0 || len(ts.Partitions) != 16 || ts.Topic != topic || ts.Count != 16 {
		t.Errorf("stats --json: %+v", ts)
	}
	for i, p := range ts.Partitions {
		if p.Partition != i || (p.Scheduled > 0) != (p.OldestDue != nil) {
			t.Errorf("stats --json partition %d: %+v", i, p)
		}
		if a1Due := time.Date(2031, 2, 3, 4, 5, 6, 789e6, time.UTC); p.Partition == in.Partition && (p.OldestDue == nil || p.OldestDue.After(a1Due)) {
			t.Errorf("stats --json: partition %d of a1 has oldest_due %v, want <= %s", p.Partition, p.OldestDue, a1Due)
		}
	}

	// delete prints "deleted ID"; the message is then gone.
	r = must("", "delete", "--id", "a1")
	if got := strings.TrimSpace(r.stdout); got != "deleted a1" {
		t.Errorf("delete printed %q", got)
	}
	wantExit(t, run("", "get", "--id", "a1"), 1, "not found")
	wantExit(t, run("", "delete", "--id", "a1"), 1, "not found")

	// dead list of a topic without dead messages: a header, or nothing.
	r = must("", "dead", "list")
	if tbl := lines(r.stdout); len(tbl) != 1 || strings.Join(strings.Fields(tbl[0]), " ") != "id partition attempts died_at last_error" {
		t.Errorf("dead list: %q", r.stdout)
	}
	if r = must("", "dead", "list", "--json"); r.stdout != "" {
		t.Errorf("dead list --json: %q, want nothing", r.stdout)
	}
	r = must("", "dead", "purge", "--all")
	if got := strings.TrimSpace(r.stdout); got != "purged 0" {
		t.Errorf("dead purge --all printed %q", got)
	}

	// send --stdin: good lines are enqueued and printed, bad ones reported
	// as "line N:" on stderr, and the exit status is 1.
	input := strings.Join([]string{
		`{"id":"s1","body":"one","delay_ms":3600000}`, // 1 ok
		`not json`,                             // 2
		`{"id":"s2","body":"x","delay_ms":-5}`, // 3 negative delay
		`{"id":"s3","body":"x","dealy_ms":5}`,  // 4 unknown field
		``,                                     // 5 blank: skipped
		`{"id":"s4","body_base64":"aGk=","at":"2031-01-01T00:00:00Z"}`,    // 6 ok
		`{"id":"s1","body":"dup","delay_ms":3600000}`,                     // 7 duplicate
		`{"id":"s5","body":"x","delay_ms":1,"at":"2031-01-01T00:00:00Z"}`, // 8 both
		`{"id":"s6","body_base64":"***"}`,                                 // 9 bad base64
		`{"id":"s7","body":"seven","delay_ms":3600000}`,                   // 10 ok
	}, "\n") + "\n"
	r = run(input, "send", "--stdin")
	if r.code != 1 {
		t.Errorf("send --stdin with bad lines: want exit 1, got %s", r)
	}
	if got := strings.Join(lines(r.stdout), ","); got != "s1,s4,s7" {
		t.Errorf("send --stdin printed ids %q, want s1,s4,s7", got)
	}
	for _, n := range []string{"line 2:", "line 3:", "line 4:", "line 7:", "line 8:", "line 9:"} {
		if !strings.Contains(r.stderr, n) {
			t.Errorf("send --stdin: stderr lacks %q:\n%s", n, r.stderr)
		}
	}
	for _, n := range []string{"line 1:", "line 5:", "line 6:", "line 10:"} {
		if strings.Contains(r.stderr, n) {
			t.Errorf("send --stdin: stderr reports good line %q:\n%s", n, r.stderr)
		}
	}
	if !strings.Contains(strings.ToLower(r.stderr), "duplicate") {
		t.Errorf("send --stdin: the duplicate on line 7 is not called one:\n%s", r.stderr)
	}
	if in := get("s4"); in.Body == nil || *in.Body != "hi" || !mustTime(t, in.Due).Equal(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("get s4: %+v", in)
	}
	for _, id := range []string{"s2", "s3", "s5", "s6"} {
		wantExit(t, run("", "get", "--id", id), 1, "not found")
	}
	if ts := stats(t, addr, topic); ts.Scheduled != 5 {
		t.Errorf("after send --stdin: %d scheduled, want 5", ts.Scheduled)
	}

	// The stored count is the truth: a topic created with 32 partitions is
	// read without --partitions, and a --partitions other than the stored
	// count is a warning naming both, never an error or a change.
	if r := cli(t, "", "send", "--addr", addr, "--topic", topic+"-32", "--partitions", "32", "--id", "p32", "--delay", "1h"); r.code != 0 {
		t.Fatalf("send to a new topic of 32 partitions: %s", r)
	}
	if r := cli(t, "", "get", "--addr", addr, "--topic", topic+"-32", "--id", "p32"); r.code != 0 || !strings.Contains(r.stdout, `"id": "p32"`) || r.stderr != "" {
		t.Errorf("get from the topic of 32 without --partitions: %s", r)
	}
	if r := cli(t, "", "partitions", "--addr", addr, "--topic", topic+"-32"); r.code != 0 || r.stdout != topic+"-32: 32 partitions\n" {
		t.Errorf("partitions of the topic of 32: %s", r)
	}
	for _, args := range [][]string{{"send", "--id", "p8", "--delay", "1h"}, {"stats"}, {"get", "--id", "s1"}} {
		r := run("", append(args, "--partitions", "8")...)
		if r.code != 0 || !strings.Contains(r.stderr, "stored=16") || !strings.Contains(r.stderr, "configured=8") {
			t.Errorf("%s --partitions 8 on a topic of 16: want success and a warning naming 16 and 8: %s", args[0], r)
		}
	}
	if r := run("", "partitions"); r.code != 0 || r.stdout != topic+": 16 partitions\n" {
		t.Errorf("partitions after commands with --partitions 8: %s", r)
	}
	// A topic nothing wrote to: every command but a write fails and
	// leaves it unknown (partitions, then stats, still say so).
	for _, args := range [][]string{{"partitions"}, {"stats"}, {"get", "--id", "x"}, {"dead", "list"}, {"partitions"}} {
		wantExit(t, cli(t, "", append(args, "--addr", addr, "--topic", "never-used")...), 1, `topic "never-used" does not exist`)
	}

	// Usage errors exit 2.
	wantExit(t, cli(t, "", "send", "--addr", addr, "--body", "x"), 2, "--topic")
	wantExit(t, cli(t, "", "frobnicate"), 2, "unknown command")
	wantExit(t, run("", "reschedule", "--id", "s1"), 2, "--delay")
	wantExit(t, run("", "send", "--delay", "1h", "--at", "2031-01-01T00:00:00Z"), 2, "mutually exclusive")
	wantExit(t, run("", "sub", "--concurrency", "-1"), 2, "negative")
	wantExit(t, run("", "dead", "purge"), 2)
	if r := cli(t, "", "help"); r.code != 0 || !strings.Contains(r.stdout, "reschedule") {
		t.Errorf("help: %s", r)
	}
	if r := cli(t, "", "send", "-h"); r.code != 0 || !strings.Contains(r.stdout, "--stdin") && !strings.Contains(r.stdout, "-stdin") {
		t.Errorf("send -h: %s", r)
	}

	// Nothing was delivered or moved by any of this.
	if ts := stats(t, addr, topic); ts.Scheduled != 6 || ts.InFlight != 0 || ts.Dead != 0 {
		t.Errorf("final stats: %+v", ts)
	}
}
