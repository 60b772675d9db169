package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// TestBenchLimited runs the limited workload small through Twemproxy:
// each window delivers at its rate limit (within 10%), the commands are
// counted on the clients and on the backends, and the run leaves no
// topic behind. Not parallel: the rates are measured.
func TestBenchLimited(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	stdout, stderr, err := runArgs(t, "bench", "--addr", env.Proxy, "--backends", strings.Join(env.Backends, ","),
		"--workload", "limited", "--n", "4000", "--rate", "200", "--warmup", "1s", "--window", "2s")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	line := strings.TrimSpace(stdout)
	t.Log(line)
	if !strings.HasPrefix(line, "workload=limited n=4000 consumers=2 window_s=2 idle_cmds_per_s=") || strings.Contains(line, "\n") {
		t.Fatalf("want one limited line, got %q", line)
	}
	// values returns the values of every name= in the line, in order.
	values := func(name string) []float64 {
		var vs []float64
		for _, m := range regexp.MustCompile(`(?:^| )`+name+`=([0-9.]+)`).FindAllStringSubmatch(line, -1) {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatalf("%s=%s in %q: %v", name, m[1], line, err)
			}
			vs = append(vs, v)
		}
		return vs
	}
	rates, delivered := values("rate_limit"), values("delivered_per_s")
	cmds, backend := values("cmds_per_s"), values("backend_cmds_per_s")
	if len(rates) != 2 || rates[0] != 200 || rates[1] != 400 || len(delivered) != 2 || len(cmds) != 2 || len(backend) != 2 {
		t.Fatalf("want two windows, at 200 and 400 a second, with their figures: %q", line)
	}
	for i, r := range rates {
		if d := delivered[i]; d < 0.9*r || d > 1.1*r {
			t.Errorf("rate limit %v: %v deliveries a second", r, d)
		}
		if cmds[i] <= 0 || backend[i] < cmds[i] {
			t.Errorf("rate limit %v: %v commands a second sent, %v run by the backends", r, cmds[i], backend[i])
		}
	}
	if idle := values("idle_cmds_per_s"); len(idle) != 1 || idle[0] <= 0 || idle[0] >= cmds[0] {
		t.Errorf("idle: %v commands a second, %v at the rate limit", idle, cmds[0])
	}
	c, err := delayq.New(delayq.Options{Addr: env.Proxy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if topics, err := c.Inspector().Topics(context.Background()); err != nil || len(topics) > 0 {
		t.Errorf("topics left by the run: %+v (%v)", topics, err)
	}
}
