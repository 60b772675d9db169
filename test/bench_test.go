package test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
)

// TestBenchCommand runs every workload of "delayq bench" in small sizes
// through Twemproxy (2 backends, memory measured on them) and checks each
// printed line: its fields, a positive rate, no duplicate delivery, and a
// memory figure no smaller than the body it stores; and that no run left
// its topic behind. Not parallel: its runs load both cores, which would
// slow the parallel scenarios' handovers.
func TestBenchCommand(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	base := []string{"bench", "--addr", env.Proxy, "--backends", strings.Join(env.Backends, ",")}
	field := func(line, name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?:^| )` + name + `=([0-9.]+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s= in %q", name, line)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("%s in %q: %v", name, line, err)
		}
		return v
	}
	run := func(args ...string) string {
		t.Helper()
		r := mustCLI(t, "", append(append([]string(nil), base...), args...)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 1 {
			t.Fatalf("want one line, got %s", r)
		}
		t.Log(lines[0])
		return lines[0]
	}
	for _, mode := range []struct{ flags, name string }{
		{"", "single ids=generated"}, {"--ids given", "single ids=given"}, {"--async", "async ids=generated"},
		{"--batch", "batch-256 ids=generated"}, {"--batch --ids given", "batch-256 ids=given"},
	} {
		args := append([]string{"--workload", "enqueue", "--n", "3000"}, strings.Fields(mode.flags)...)
		line := run(args...)
		if !strings.HasPrefix(line, "workload=enqueue n=3000 producers=16 mode="+mode.name+" ") {
			t.Errorf("enqueue line: %q", line)
		}
		if field(line, "rate") <= 0 || field(line, "cmds_per_msg") <= 0 || field(line, "client_cpu_us_per_msg") <= 0 {
			t.Errorf("enqueue %s: rate, commands or client CPU not positive: %q", mode.name, line)
		}
		if mem := field(line, "mem_per_msg"); mem < 256 || mem > 4096 {
			t.Errorf("enqueue %s: %v bytes per 256-byte message", mode.name, mem)
		}
		if field(line, "procs") < 1 {
			t.Errorf("enqueue %s: no GOMAXPROCS: %q", mode.name, line)
		}
		if st := field(line, "steal_pct"); st < 0 || st > 100 { // Linux: /proc/stat
			t.Errorf("enqueue %s: steal %v%%: %q", mode.name, st, line)
		}
	}
	// --procs sets the GOMAXPROCS the line reports.
	if line := run("--workload", "enqueue", "--n", "2000", "--procs", "1"); field(line, "procs") != 1 {
		t.Errorf("--procs 1: %q", line)
	}
	for _, w := range []struct{ workload, n string }{{"burst", "3000"}, {"spread", "500"}, {"duenow", "20"}} {
		line := run("--workload", w.workload, "--n", w.n)
		if !strings.HasPrefix(line, "workload="+w.workload+" n="+w.n+" ") {
			t.Errorf("%s line: %q", w.workload, line)
		}
		if w.workload == "burst" && field(line, "drain_rate") <= 0 {
			t.Errorf("burst: drain rate not positive: %q", line)
		}
		p50, p99, max := field(line, "p50"), field(line, "p99"), field(line, "max")
		if p50 < 0 || p50 > p99 || p99 > max {
			t.Errorf("%s: lateness quantiles out of order: %q", w.workload, line)
		}
		if d := field(line, "duplicates"); d != 0 {
			t.Errorf("%s: %v duplicate deliveries", w.workload, d)
		}
	}
	// --runs: a line per run, then one of medians.
	r := mustCLI(t, "", append(append([]string(nil), base...), "--workload", "enqueue", "--n", "2000", "--runs", "2")...)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[2], " runs=2 stat=median") {
		t.Fatalf("--runs 2: want two runs and a median line, got %s", r)
	}
	lo, hi := min(field(lines[0], "rate"), field(lines[1], "rate")), max(field(lines[0], "rate"), field(lines[1], "rate"))
	if m := field(lines[2], "rate"); m < lo-1 || m > hi+1 {
		t.Errorf("--runs 2: median rate %v outside the runs' %v..%v", m, lo, hi)
	}
	// Every run dropped its topic: none is left among the topics, and
	// (with the check of TestDropTopic) none of their keys.
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: env.Proxy}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if topics, err := st.Topics(context.Background()); err != nil || len(topics) > 0 {
		t.Errorf("topics left by the runs: %q (%v)", topics, err)
	}
	r = cli(t, "", append(append([]string(nil), base...), "--runs", "0")...)
	wantExit(t, r, 2, "invalid value 0 for flag --runs: must be positive")
	r = cli(t, "", append(append([]string(nil), base...), "--procs", "-2")...)
	wantExit(t, r, 2, `invalid value "-2" for flag --procs: negative`)
	r = cli(t, "", append(append([]string(nil), base...), "--batch", "--async")...)
	wantExit(t, r, 2, "--batch and --async")
	r = cli(t, "", append(append([]string(nil), base...), "--ids", "mine")...)
	wantExit(t, r, 2, `invalid value "mine" for flag --ids`)
	checkClientErr(t, env)
}
