package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// TestBenchEnqueuePolicy runs the enqueue workload small through
// Twemproxy with each policy for existing ids: reject times one pass,
// replace and debounce two (every send of the first creates its message,
// every send of the second replaces or debounces one, or the run fails),
// each with its rate, commands and client CPU. Not parallel: the rates
// are measured.
func TestBenchEnqueuePolicy(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	for _, c := range []struct {
		flags  []string
		prefix string
		passes []string
	}{
		{[]string{"--ids", "given"}, "workload=enqueue n=2000 producers=16 mode=single ids=given policy=reject rate=", nil},
		{[]string{"--ids", "given", "--on-duplicate", "replace"}, "workload=enqueue n=2000 producers=16 mode=single ids=given policy=replace pass=create rate=", []string{"create", "replace"}},
		{[]string{"--ids", "given", "--on-duplicate", "debounce", "--batch"}, "workload=enqueue n=2000 producers=16 mode=batch-256 ids=given policy=debounce pass=create rate=", []string{"create", "replace"}},
	} {
		args := append([]string{"bench", "--addr", env.Proxy, "--backends", strings.Join(env.Backends, ","),
			"--workload", "enqueue", "--n", "2000"}, c.flags...)
		stdout, stderr, err := runArgs(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.flags, err, stderr)
		}
		line := strings.TrimSpace(stdout)
		t.Log(line)
		if !strings.HasPrefix(line, c.prefix) || strings.Contains(line, "\n") {
			t.Fatalf("%v: want one line beginning %q, got %q", c.flags, c.prefix, line)
		}
		var passes []string
		for _, m := range regexp.MustCompile(` pass=(\w+)`).FindAllStringSubmatch(line, -1) {
			passes = append(passes, m[1])
		}
		if strings.Join(passes, ",") != strings.Join(c.passes, ",") {
			t.Errorf("%v: passes %q, want %q", c.flags, passes, c.passes)
		}
		for _, name := range []string{"rate", "cmds_per_msg", "client_cpu_us_per_msg"} {
			ms := regexp.MustCompile(`(?:^| )`+name+`=([0-9.]+)`).FindAllStringSubmatch(line, -1)
			if len(ms) != max(len(c.passes), 1) {
				t.Errorf("%v: %d %s= in %q, want one a pass", c.flags, len(ms), name, line)
			}
			for _, m := range ms {
				if v, err := strconv.ParseFloat(m[1], 64); err != nil || v <= 0 {
					t.Errorf("%v: %s=%s not positive in %q", c.flags, name, m[1], line)
				}
			}
		}
	}
}

// TestBenchOnDuplicateUsage: --on-duplicate takes reject, replace or
// debounce, and a policy for existing ids only with ids the bench gives.
func TestBenchOnDuplicateUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--on-duplicate", "replace"}, "--on-duplicate replace needs --ids given"},
		{[]string{"--on-duplicate", "debounce", "--ids", "generated"}, "--on-duplicate debounce needs --ids given"},
		{[]string{"--on-duplicate", "merge", "--ids", "given"}, `invalid value "merge" for flag --on-duplicate`},
	} {
		_, _, err := runArgs(t, append([]string{"bench", "--addr", "127.0.0.1:1", "--workload", "enqueue"}, c.args...)...)
		checkUsageError(t, c.args, err, c.want)
	}
}
