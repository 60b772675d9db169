package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// TestBenchAutoscale runs the autoscale workload briefly through
// Twemproxy: one line, no more changes than the damping allows, every
// message due delivered.
func TestBenchAutoscale(t *testing.T) {
	t.Parallel() // measures no rate
	env := testenv.Start(t, testenv.Options{Backends: 2})
	stdout, stderr, err := runArgs(t, "bench", "--addr", env.Proxy, "--workload", "autoscale", "--duration", "15s", "--max-consumers", "4", "--shrink-after", "5s")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	line := strings.TrimSpace(stdout)
	t.Log(line)
	if !strings.HasPrefix(line, "workload=autoscale duration_s=15 joins=") || strings.Contains(line, "\n") {
		t.Fatalf("want one autoscale line, got %q", line)
	}
	value := func(name string) int {
		m := regexp.MustCompile(` ` + name + `=([0-9]+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s= in %q", name, line)
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	if changes, bound := value("changes"), value("damping_bound"); changes > bound || bound != 1 {
		t.Errorf("%d changes in 15 s, the damping bound %d (want 1: one change takes longer than 15 s)", changes, bound)
	}
	if sent, got := value("messages"), value("delivered"); sent < 100 || got < sent {
		t.Errorf("%d messages sent, %d delivered", sent, got)
	}
}
