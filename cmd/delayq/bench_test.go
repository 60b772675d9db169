package main

import "testing"

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
