package test

import (
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// TestCLIUsageExits runs the binary as a user would: a missing or unknown
// command, and values the library refuses, exit 2 with the error on the
// first line of stderr, naming the flag as typed; the first hour's
// commands topic list and version answer.
func TestCLIUsageExits(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	past := "2020-01-02T03:04:05Z"
	mustCLI(t, "", "send", "--addr", env.Proxy, "--topic", "usage", "--id", "a")
	for _, tc := range []struct {
		args  []string
		first string // stderr's first line
		lines int    // stderr's lines at most
	}{
		{nil, "delayq: no command", 3},
		{[]string{"frob"}, `delayq: unknown command "frob"`, 3},
		{[]string{"pause", "--addr", env.Proxy, "--topic", "usage", "--until", past}, `delayq: pause: invalid value "` + past + `" for flag --until: is not in the future`, 1},
		{[]string{"sub", "--addr", env.Proxy, "--topic", "usage", "--lease", "1ms"}, `delayq: sub: invalid value "1ms" for flag --lease: is shorter than 30ms`, 1},
		{[]string{"limits", "--addr", env.Proxy, "--topic", "usage", "--rate", "1e9/s"}, `delayq: limits: invalid value "1e9/s" for flag --rate: is above 1000000/s`, 1},
		{[]string{"partitions", "--addr", env.Proxy, "--topic", "usage", "--set", "6"}, `delayq: partitions: invalid value "6" for flag --set: is not a multiple or a divisor`, 1},
	} {
		r := cli(t, "", tc.args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || !strings.HasPrefix(lines[0], tc.first) || len(lines) > tc.lines || r.stdout != "" {
			t.Errorf("want exit 2, stderr starting %q in at most %d lines; got %s", tc.first, tc.lines, r)
		}
	}
	if r := mustCLI(t, "", "topic", "list", "--addr", env.Proxy); !strings.Contains(r.stdout, "usage") {
		t.Errorf("topic list does not list the topic: %s", r)
	}
	if r := mustCLI(t, "", "version"); !strings.HasPrefix(r.stdout, "delayq ") || !strings.Contains(r.stdout, "revision") {
		t.Errorf("version: %s", r)
	}
}
