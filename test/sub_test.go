package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// TestSubCountAndRetry checks, through Twemproxy, that "sub --count N"
// stops after exactly N deliveries and leaves the rest scheduled, that a
// failed delivery is retried after the first backoff step, and that a
// message out of attempts goes to the dead set, from where "dead requeue"
// and "dead purge" take it.
func TestSubCountAndRetry(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	addr := env.Proxy
	t.Run("group", func(t *testing.T) {
		t.Run("count", func(t *testing.T) { t.Parallel(); subCount(t, addr, "sub.count") })
		t.Run("retry", func(t *testing.T) { t.Parallel(); subRetry(t, addr, "sub.retry") })
		t.Run("dead", func(t *testing.T) { t.Parallel(); subDead(t, addr, "sub.dead") })
	})
	if probs := env.ProxyLogProblems(); len(probs) > 0 {
		t.Errorf("nutcracker logged %d problems, first: %v", len(probs), probs[:min(5, len(probs))])
	}
	checkClientErr(t, env)
}

// subRun runs "sub" to completion (it must stop by itself) and returns the
// deliveries it printed.
func subRun(t *testing.T, addr, topic string, extra ...string) []delivery {
	t.Helper()
	args := append([]string{"sub", "--addr", addr, "--topic", topic, "--timeout", "25s"}, extra...)
	r := cli(t, "", args...)
	if r.code != 0 {
		t.Fatalf("want exit 0, got %s", r)
	}
	var out []delivery
	for _, ln := range lines(r.stdout) {
		d, err := parseDelivery([]byte(ln))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func subCount(t *testing.T, addr, topic string) {
	var in strings.Builder
	for i := range 8 {
		fmt.Fprintf(&in, `{"id":"c%d","body":"count %d"}`+"\n", i, i)
	}
	mustCLI(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)

	start := time.Now()
	first := subRun(t, addr, topic, "--count", "5")
	if len(first) != 5 {
		t.Fatalf("sub --count 5 printed %d deliveries, want 5: %+v", len(first), first)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("sub --count 5 took %v to stop: it ran into --timeout rather than stopping at the count", took)
	}
	// A clean stop returns what it held but did not start: nothing waits
	// for a visibility timeout.
	if ts := stats(t, addr, topic); ts.Scheduled != 3 || ts.InFlight != 0 || ts.Dead != 0 {
		t.Errorf("after sub --count 5: scheduled %d inflight %d dead %d, want 3 0 0", ts.Scheduled, ts.InFlight, ts.Dead)
	}
	second := subRun(t, addr, topic, "--count", "3")
	seen := map[string]int{}
	for _, d := range append(first, second...) {
		seen[d.ID]++
		if want := "count " + strings.TrimPrefix(d.ID, "c"); d.Body == nil || *d.Body != want {
			t.Errorf("delivery %s: body %v, want %q", d.ID, d.Body, want)
		}
		if d.at.Before(d.due) {
			t.Errorf("delivery %s early: at %s due %s", d.ID, d.DeliveredAt, d.Due)
		}
	}
	for i := range 8 {
		if id := fmt.Sprintf("c%d", i); seen[id] != 1 {
			t.Errorf("%s delivered %d times over both runs, want 1", id, seen[id])
		}
	}
	if ts := stats(t, addr, topic); ts.Scheduled != 0 || ts.InFlight != 0 || ts.Dead != 0 {
		t.Errorf("at the end: scheduled %d inflight %d dead %d, want 0 0 0", ts.Scheduled, ts.InFlight, ts.Dead)
	}
}

// subRetry: a delivery failed by --fail-attempts 1 comes back as attempt 2
// after the first step of the --backoff ladder.
func subRetry(t *testing.T, addr, topic string) {
	const firstBackoff = 2 * time.Second
	mustCLI(t, "", "send", "--addr", addr, "--topic", topic, "--id", "r1", "--body", "retry me")
	l := newLedger()
	s := startSub(t, l, 0, "--addr", addr, "--topic", topic, "--fail-attempts", "1", "--backoff", "2s,5s")
	waitFor(t, 10*time.Second, func() bool { return l.count() >= 1 || s.exited() }, "the first delivery of r1")

	// Between the attempts, get shows it scheduled with its error.
	var in infoJSON
	if !poll(firstBackoff, func() bool {
		in = decodeInfo(t, mustCLI(t, "", "get", "--addr", addr, "--topic", topic, "--id", "r1").stdout)
		return in.State == "scheduled"
	}) {
		t.Fatalf("r1 not scheduled again within the backoff after its failed attempt: %+v", in)
	}
	if in.Attempts != 1 || !strings.Contains(in.LastError, "failed on purpose") {
		t.Errorf("r1 between attempts: attempts %d last_error %q, want 1 and the handler's error", in.Attempts, in.LastError)
	}

	waitFor(t, firstBackoff+10*time.Second, func() bool { return l.count() >= 2 || s.exited() }, "the retry of r1")
	if code := s.stop(t, 30*time.Second); code != 0 {
		t.Errorf("sub: exit %d after SIGTERM, want 0\nstderr: %s", code, s.stderr)
	}
	ds := l.deliveries("r1")
	if len(ds) != 2 {
		t.Fatalf("r1 delivered %d times, want 2: %+v", len(ds), ds)
	}
	if ds[0].Attempt != 1 || ds[1].Attempt != 2 {
		t.Errorf("attempts %d then %d, want 1 then 2", ds[0].Attempt, ds[1].Attempt)
	}
	if gap := ds[1].at.Sub(ds[0].at); gap < firstBackoff-clockSlack {
		t.Errorf("retried %v after the failure, want >= %v", gap, firstBackoff)
	}
	if ds[1].at.Before(ds[1].due) || ds[1].Body == nil || *ds[1].Body != "retry me" {
		t.Errorf("retry: %+v", ds[1])
	}
	t.Logf("retry came %v after the first attempt (due %v after)", ds[1].at.Sub(ds[0].at), ds[1].due.Sub(ds[0].at))
	wantExit(t, cli(t, "", "get", "--addr", addr, "--topic", topic, "--id", "r1"), 1, "not found")
}

// subDead: with --max-attempts 1 a failed delivery is dead at once; dead
// list shows it, requeue makes it due again, purge deletes it.
func subDead(t *testing.T, addr, topic string) {
	base := []string{"--addr", addr, "--topic", topic}
	for _, id := range []string{"d1", "d2"} {
		mustCLI(t, "", append([]string{"send", "--id", id, "--body", "dead " + id}, base...)...)
	}
	ds := subRun(t, addr, topic, "--count", "2", "--fail-attempts", "1", "--max-attempts", "1")
	if len(ds) != 2 {
		t.Fatalf("sub --count 2 printed %d deliveries: %+v", len(ds), ds)
	}
	if ts := stats(t, addr, topic); ts.Dead != 2 || ts.Scheduled != 0 || ts.InFlight != 0 {
		t.Fatalf("after two failed last attempts: scheduled %d inflight %d dead %d, want 0 0 2", ts.Scheduled, ts.InFlight, ts.Dead)
	}

	r := mustCLI(t, "", append([]string{"dead", "list"}, base...)...)
	tbl := lines(r.stdout)
	if len(tbl) != 3 || !strings.HasPrefix(tbl[0], "id") {
		t.Errorf("dead list: want a header and 2 rows, got:\n%s", r.stdout)
	}
	r = mustCLI(t, "", append([]string{"dead", "list", "--json"}, base...)...)
	for _, ln := range lines(r.stdout) {
		var in infoJSON
		if err := json.Unmarshal([]byte(ln), &in); err != nil {
			t.Fatalf("dead list --json line %q: %v", ln, err)
		}
		if in.State != "dead" || in.Attempts != 1 || in.DiedAt == "" || !strings.Contains(in.LastError, "failed on purpose") ||
			in.Body == nil || *in.Body != "dead "+in.ID {
			t.Errorf("dead list --json: %+v", in)
		}
	}
	if n := len(lines(r.stdout)); n != 2 {
		t.Errorf("dead list --json printed %d lines, want 2", n)
	}
	if r := mustCLI(t, "", append([]string{"dead", "list", "--limit", "1"}, base...)...); len(lines(r.stdout)) != 2 {
		t.Errorf("dead list --limit 1: %q", r.stdout)
	}
	if in := decodeInfo(t, mustCLI(t, "", append([]string{"get", "--id", "d1"}, base...)...).stdout); in.State != "dead" {
		t.Errorf("get d1: state %q, want dead", in.State)
	}
	wantExit(t, cli(t, "", append([]string{"reschedule", "--id", "d1", "--delay", "1s"}, base...)...), 1)

	if r := mustCLI(t, "", append([]string{"dead", "requeue", "--id", "d1"}, base...)...); strings.TrimSpace(r.stdout) != "requeued 1" {
		t.Errorf("dead requeue --id d1 printed %q", r.stdout)
	}
	if in := decodeInfo(t, mustCLI(t, "", append([]string{"get", "--id", "d1"}, base...)...).stdout); in.State != "scheduled" || in.Attempts != 0 {
		t.Errorf("get d1 after requeue: state %q attempts %d, want scheduled 0", in.State, in.Attempts)
	}
	if r := mustCLI(t, "", append([]string{"dead", "purge", "--id", "d2"}, base...)...); strings.TrimSpace(r.stdout) != "purged 1" {
		t.Errorf("dead purge --id d2 printed %q", r.stdout)
	}
	wantExit(t, cli(t, "", append([]string{"get", "--id", "d2"}, base...)...), 1, "not found")

	ds = subRun(t, addr, topic, "--count", "1")
	if len(ds) != 1 || ds[0].ID != "d1" || ds[0].Attempt != 1 {
		t.Errorf("after requeue: deliveries %+v, want d1 attempt 1", ds)
	}
	if ts := stats(t, addr, topic); ts.Dead != 0 || ts.Scheduled != 0 || ts.InFlight != 0 {
		t.Errorf("at the end: scheduled %d inflight %d dead %d, want 0 0 0", ts.Scheduled, ts.InFlight, ts.Dead)
	}
}
