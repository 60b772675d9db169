package main

import (
	"testing"
	"time"
)

func TestMedianLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"odd", []string{
			"workload=enqueue n=100 mode=single rate=300 cmds_per_msg=0.250",
			"workload=enqueue n=100 mode=single rate=100 cmds_per_msg=0.125",
			"workload=enqueue n=100 mode=single rate=200 cmds_per_msg=1.500",
		}, "workload=enqueue n=100 mode=single rate=200 cmds_per_msg=0.250 runs=3 stat=median"},
		{"even, and tokens without a value", []string{
			"workload=burst n=10 drain_rate=10 lateness_ms p50=1.5 p99=9.0",
			"workload=burst n=10 drain_rate=21 lateness_ms p50=2.5 p99=3.0",
		}, "workload=burst n=10 drain_rate=16 lateness_ms p50=2.0 p99=6.0 runs=2 stat=median"},
		{"a field missing from a line keeps the first line's value", []string{
			"workload=enqueue rate=10 mem_per_msg=500",
			"workload=enqueue rate=30",
		}, "workload=enqueue rate=20 mem_per_msg=500 runs=2 stat=median"},
		{"a key repeated in a line: each place its own median", []string{
			"workload=limited n=100 rate_limit=100 cmds_per_s=500.0 rate_limit=200 cmds_per_s=700.0",
			"workload=limited n=100 rate_limit=100 cmds_per_s=520.0 rate_limit=200 cmds_per_s=690.0",
			"workload=limited n=100 rate_limit=100 cmds_per_s=510.0 rate_limit=200 cmds_per_s=710.0",
		}, "workload=limited n=100 rate_limit=100 cmds_per_s=510.0 rate_limit=200 cmds_per_s=700.0 runs=3 stat=median"},
		{"an enqueue line of two passes: words kept, each pass its own median", []string{
			"workload=enqueue n=100 mode=single ids=given policy=replace pass=create rate=300 cmds_per_msg=2.400 pass=replace rate=90 cmds_per_msg=2.300",
			"workload=enqueue n=100 mode=single ids=given policy=replace pass=create rate=100 cmds_per_msg=2.500 pass=replace rate=80 cmds_per_msg=2.400",
			"workload=enqueue n=100 mode=single ids=given policy=replace pass=create rate=200 cmds_per_msg=2.450 pass=replace rate=70 cmds_per_msg=2.350",
		}, "workload=enqueue n=100 mode=single ids=given policy=replace pass=create rate=200 cmds_per_msg=2.450 pass=replace rate=80 cmds_per_msg=2.350 runs=3 stat=median"},
	} {
		if got := medianLine(c.lines); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestLateness: each message counts once, whether its id has a message
// number or not; a second delivery counts as a duplicate; the lateness
// is done at the target, and its summary and last start are those of
// the first deliveries.
func TestLateness(t *testing.T) {
	l := newLateness(5)
	due := time.Unix(1000, 0)
	ms := func(n int) time.Time { return due.Add(time.Duration(n) * time.Millisecond) }
	l.record("b00000002", due, ms(30))
	l.record("b00000000", due, ms(10))
	l.record("b00000002", due, ms(90)) // a duplicate: not the last start
	l.record("x", due, ms(20))         // no message number
	l.record("x", due, ms(80))
	l.record("b00000009", due, ms(40)) // a number past the target: counted under mu
	if l.isDone() {
		t.Fatal("done before the target")
	}
	l.record("b00000003", due, ms(50))
	if !l.isDone() {
		t.Fatalf("not done after 5 distinct ids (got %d)", l.got.Load())
	}
	if got := l.dups.Load(); got != 2 {
		t.Errorf("duplicates = %d, want 2", got)
	}
	if got := l.lastStart(); !got.Equal(ms(50)) {
		t.Errorf("last start = %v, want %v", got, ms(50))
	}
	if got, want := l.summary(), "lateness_ms p50=30.0 p99=50.0 max=50.0"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}
