package test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
)

// exportLine is one line of "delayq export", decoded strictly.
type exportLine struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Due         string  `json:"due"`
	DiedAt      string  `json:"died_at"`
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	LastError   string  `json:"last_error"`
	Created     string  `json:"created"`
	Updated     string  `json:"updated"`
	Body        *string `json:"body"`
	BodyBase64  *string `json:"body_base64"`
}

// readExport decodes an export file into its lines by id, failing t on
// a malformed line or an id twice.
func readExport(t *testing.T, data string) map[string]exportLine {
	t.Helper()
	out := map[string]exportLine{}
	for i, l := range lines(data) {
		var e exportLine
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("export line %d: %v: %s", i+1, err, l)
		}
		if _, ok := out[e.ID]; ok {
			t.Fatalf("export line %d: id %q twice", i+1, e.ID)
		}
		if (e.Body == nil) == (e.BodyBase64 == nil) {
			t.Fatalf("export line %d: want exactly one of body and body_base64: %s", i+1, l)
		}
		for _, ts := range []string{e.Due, e.Created, e.Updated} {
			if _, err := time.Parse("2006-01-02T15:04:05.000Z", ts); err != nil {
				t.Fatalf("export line %d: time %q is not RFC 3339 UTC with milliseconds: %s", i+1, ts, l)
			}
		}
		out[e.ID] = e
	}
	return out
}

// TestMoveBetweenClusters moves a topic from one Twemproxy cluster to
// another as docs/export-import.md describes: 10,000 messages, scheduled
// (in segments and with given ids), in flight (a consumer holds them)
// and dead, with UTF-8 and binary bodies, are exported from the first
// cluster while its consumer runs and imported into the second, which has
// another partition count. Every message comes out of the second cluster as it went in,
// field by field (in flight becomes scheduled at its due); importing
// again changes nothing and exits 1 with the count of duplicates; and the
// second cluster's consumer delivers the imported messages at their
// original due times: never early, at most a second late.
//
// Not parallel: it measures lateness.
func TestMoveBetweenClusters(t *testing.T) {
	from := testenv.Start(t, testenv.Options{Backends: 3})
	to := testenv.Start(t, testenv.Options{Backends: 3})
	const topic = "moving"
	dir := t.TempDir()
	start := time.Now()
	soonAt := start.Add(16 * time.Second) // after the move: delivered by the new cluster
	const (
		nFar, nGenerated, nSoon, nDead, nFly = 3500, 3500, 2000, 700, 300
	)
	body := func(i int, suffix string) (field, value string) {
		if i%2 == 0 {
			return "body", fmt.Sprintf("héllo ☃ %d%s", i, suffix)
		}
		raw := append([]byte{0xff, 0xfe, byte(i), byte(i >> 8), 0}, suffix...)
		return "body_base64", base64.StdEncoding.EncodeToString(raw)
	}
	var in strings.Builder
	line := func(id string, i int, extra string) {
		f, v := body(i, "")
		idPart := ""
		if id != "" {
			idPart = fmt.Sprintf(`"id":%q,`, id)
		}
		fmt.Fprintf(&in, `{%s%q:%q%s}`+"\n", idPart, f, v, extra)
	}
	for i := range nFar {
		line(fmt.Sprintf("far-%d", i), i, fmt.Sprintf(`,"delay_ms":%d,"max_attempts":%d`, 3600_000+i, i%5))
	}
	for i := range nGenerated { // generated ids, due far ahead: stored in segments
		line("", i, `,"delay_ms":7200000`)
	}
	for i := range nSoon {
		at := soonAt.Add(time.Duration(i%1000) * time.Millisecond).UTC().Format(time.RFC3339Nano)
		line(fmt.Sprintf("soon-%d", i), i, fmt.Sprintf(`,"at":%q`, at))
	}
	r := mustCLI(t, in.String(), "send", "--addr", from.Proxy, "--topic", topic, "--stdin")
	if n := len(lines(r.stdout)); n != nFar+nGenerated+nSoon {
		t.Fatalf("sent %d messages, want %d", n, nFar+nGenerated+nSoon)
	}

	// Dead: failed at their only attempt.
	in.Reset()
	for i := range nDead {
		f, v := body(i, "DIE")
		fmt.Fprintf(&in, `{"id":"dead-%d",%q:%q,"max_attempts":1}`+"\n", i, f, v)
	}
	mustCLI(t, in.String(), "send", "--addr", from.Proxy, "--topic", topic, "--stdin")
	killer := startSub(t, newLedger(), 0, "--addr", from.Proxy, "--topic", topic, "--fail", "DIE", "--concurrency", "32")
	waitFor(t, 20*time.Second, func() bool { return stats(t, from.Proxy, topic).Dead == nDead }, "%d dead messages", nDead)
	killer.stop(t, 10*time.Second)

	// In flight: a consumer with the default handler timeout (30 s) works
	// on each for ten minutes, all through the export (which ends within
	// 14 s of the start: see below), and is then killed, leaving them in
	// flight for the export to have read and the delete to remove.
	in.Reset()
	for i := range nFly {
		fmt.Fprintf(&in, `{"id":"fly-%d","body":"fly %d"}`+"\n", i, i)
	}
	mustCLI(t, in.String(), "send", "--addr", from.Proxy, "--topic", topic, "--stdin")
	holder := startSub(t, newLedger(), 1, "--addr", from.Proxy, "--topic", topic, "--work", "10m",
		"--concurrency", fmt.Sprint(nFly), "--poll", "100ms")
	waitFor(t, 20*time.Second, func() bool { return stats(t, from.Proxy, topic).InFlight == nFly }, "%d messages in flight", nFly)

	// The move.
	file := filepath.Join(dir, "moving.jsonl")
	r = mustCLI(t, "", "export", "--addr", from.Proxy, "--topic", topic, "--out", file)
	if !strings.Contains(r.stderr, "exported 10000 messages of moving") {
		t.Fatalf("export summary: %s", r)
	}
	if holder.exited() {
		t.Fatalf("the consumer of the old cluster exited during the export: %s", holder.stderr.String())
	}
	// No consumer is left on the old cluster to retry those messages at
	// their deadline, or to return them, while they are moved.
	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.wait(t, 5*time.Second)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	exported := readExport(t, string(data))
	count := map[string]int{}
	for _, e := range exported {
		count[e.State]++
	}
	if len(exported) != 10000 || count["dead"] != nDead || count["inflight"] != nFly {
		t.Fatalf("exported %d messages by state %v, want 10000 with %d dead and %d in flight", len(exported), count, nDead, nFly)
	}
	r = mustCLI(t, "", "import", "--addr", to.Proxy, "--topic", topic, "--partitions", "8", "--in", file)
	if !strings.Contains(r.stderr, "imported 10000 of 10000 messages") {
		t.Fatalf("import summary: %s", r)
	}
	// Again, before anything is delivered: every line is a duplicate
	// (checked field by field below: nothing changed).
	r = cli(t, "", "import", "--addr", to.Proxy, "--topic", topic, "--in", file)
	wantExit(t, r, 1, "10000 of 10000 messages not imported: 10000 duplicates")
	importedAt := time.Now()
	if importedAt.After(soonAt.Add(-2 * time.Second)) {
		t.Fatalf("the move took until %v after the start, too late to see the soon messages delivered at their due", importedAt.Sub(start))
	}
	l := newLedger()
	startSub(t, l, 2, "--addr", to.Proxy, "--topic", topic, "--concurrency", "64", "--poll", "200ms")

	// Field by field, through an export of the new cluster.
	r = mustCLI(t, "", "export", "--addr", to.Proxy, "--topic", topic, "--state", "scheduled,dead")
	moved := readExport(t, r.stdout)
	for id, want := range exported {
		got, ok := moved[id]
		if want.State == "inflight" {
			want.State = "scheduled"
			if !ok {
				continue // delivered at once by the new cluster's consumer: checked below
			}
		}
		if !ok {
			t.Errorf("%q is missing from the new cluster", id)
			continue
		}
		if !sameLine(got, want) {
			t.Errorf("%q differs after the move:\n got %+v\nwant %+v", id, got, want)
		}
	}
	if n := stats(t, to.Proxy, topic).Count; n != 8 {
		t.Errorf("the new cluster's topic has %d partitions, want 8", n)
	}

	// Delivered at their original due times: in flight ones at once (due
	// in the past), the soon ones at theirs.
	waitFor(t, 30*time.Second, func() bool {
		return len(l.deliveries("fly-0")) > 0 && countPrefix(l, "soon-") == nSoon && countPrefix(l, "fly-") == nFly
	}, "the fly and soon messages delivered by the new cluster")
	var worst time.Duration
	for _, d := range l.snapshot() {
		want := exported[d.ID]
		due := mustTime(t, want.Due)
		if !d.due.Equal(due) {
			t.Errorf("%q delivered with due %v, exported with %v", d.ID, d.due, due)
		}
		var wantBody []byte
		if want.Body != nil {
			wantBody = []byte(*want.Body)
		} else if wantBody, err = base64.StdEncoding.DecodeString(*want.BodyBase64); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.body, wantBody) {
			t.Errorf("%q delivered with body %q, exported with %q", d.ID, d.body, wantBody)
		}
		if !strings.HasPrefix(d.ID, "soon-") {
			continue
		}
		if d.at.Before(due) {
			t.Errorf("%q delivered at %v, before its due %v", d.ID, d.at, due)
		}
		if late := d.seen.Sub(due); late > worst {
			worst = late
		}
	}
	if worst > time.Second {
		t.Errorf("the latest soon message was read %v after its due, want at most 1s", worst)
	}
	for _, d := range l.snapshot() {
		if strings.HasPrefix(d.ID, "dead-") || strings.HasPrefix(d.ID, "far-") {
			t.Errorf("%q delivered by the new cluster: %+v", d.ID, d)
		}
	}
	// Delete what was moved from the old cluster.
	r = mustCLI(t, "", "delete", "--addr", from.Proxy, "--topic", topic, "--in", file)
	if !strings.Contains(r.stdout, "deleted 10000 messages of moving; 0 were gone already") {
		t.Fatalf("delete --in: %s", r)
	}
	if st := stats(t, from.Proxy, topic); st.Scheduled+st.InFlight+st.Dead != 0 {
		t.Fatalf("the old cluster still holds %d scheduled, %d in flight, %d dead", st.Scheduled, st.InFlight, st.Dead)
	}
	testenv.Figure(t, "move between clusters: 10000 messages; soon ones delivered at most %v after their due", worst.Round(time.Millisecond))
}

// sameLine compares two export lines, times by instant.
func sameLine(a, b exportLine) bool {
	eqT := func(x, y string) bool {
		if x == "" || y == "" {
			return x == y
		}
		tx, ex := time.Parse(time.RFC3339Nano, x)
		ty, ey := time.Parse(time.RFC3339Nano, y)
		return ex == nil && ey == nil && tx.Equal(ty)
	}
	eqS := func(x, y *string) bool { return (x == nil && y == nil) || (x != nil && y != nil && *x == *y) }
	return a.ID == b.ID && a.State == b.State && eqT(a.Due, b.Due) && eqT(a.DiedAt, b.DiedAt) &&
		a.Attempts == b.Attempts && a.MaxAttempts == b.MaxAttempts && a.LastError == b.LastError &&
		eqT(a.Created, b.Created) && eqT(a.Updated, b.Updated) && eqS(a.Body, b.Body) && eqS(a.BodyBase64, b.BodyBase64)
}

// countPrefix counts the distinct ids beginning with prefix that l saw
// delivered.
func countPrefix(l *ledger, prefix string) int {
	seen := map[string]bool{}
	for _, d := range l.snapshot() {
		if strings.HasPrefix(d.ID, prefix) {
			seen[d.ID] = true
		}
	}
	return len(seen)
}

// TestBenchExport runs the export workload of "delayq bench" small: every
// rate and the heap figures positive, the backends' CPU read, and no
// topic left behind.
func TestBenchExport(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	r := mustCLI(t, "", "bench", "--addr", env.Proxy, "--backends", strings.Join(env.Backends, ","), "--workload", "export", "--n", "3000")
	line := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(line, "workload=export n=3000 body=256 ") || strings.Contains(line, "\n") {
		t.Fatalf("want one export line, got %s", r)
	}
	for _, name := range []string{"enqueue_batch_given_rate", "export_rate", "paced_export_rate", "import_rate", "import_api_rate", "delete_rate", "file_mb", "export_heap_mb", "import_heap_mb", "export_backend_cpu_pct", "paced_backend_cpu_pct", "import_backend_cpu_pct"} {
		m := regexp.MustCompile(` ` + name + `=([0-9.]+)`).FindStringSubmatch(line)
		if m == nil {
			t.Errorf("no %s= in %q", name, line)
			continue
		}
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || (v <= 0 && !strings.HasSuffix(name, "_pct") && name != "file_mb") {
			t.Errorf("%s=%s in %q", name, m[1], line)
		}
	}
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: env.Proxy}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if topics, err := st.Topics(context.Background()); err != nil || len(topics) > 0 {
		t.Errorf("topics left by the run: %q (%v)", topics, err)
	}
}
