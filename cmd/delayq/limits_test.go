package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
)

// limits prints a topic's limits, changes the fields given and keeps the
// others, removes one with 0 and all with --clear; bad values are usage
// errors naming the flag and value that write nothing; a topic that does
// not exist is refused and not created.
func TestLimitsCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	ctx := context.Background()
	for _, args := range [][]string{{}, {"--rate", "5/s"}, {"--clear"}, {"--concurrency", "3"}} {
		_, _, err := runArgs(t, append([]string{"limits", "--addr", addr, "--topic", "ghost"}, args...)...)
		var ue *usageError
		if !errors.Is(err, delayq.ErrNoTopic) || errors.As(err, &ue) {
			t.Errorf("limits %v of a topic never used: %v, want ErrNoTopic (exit 1)", args, err)
		}
	}
	if stored(t, addr, "ghost") {
		t.Error("limits created the topic")
	}
	if _, _, err := runArgs(t, "send", "--addr", addr, "--topic", "t", "--delay", "1h"); err != nil {
		t.Fatal(err)
	}
	c, err := delayq.New(delayq.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	limits := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := runArgs(t, append([]string{"limits", "--addr", addr, "--topic", "t"}, args...)...)
		return out, err
	}
	check := func(want delayq.Limits) {
		t.Helper()
		if got, err := c.Inspector().Limits(ctx, "t"); err != nil || got != want {
			t.Errorf("Inspector.Limits: %+v, %v; want %+v", got, err, want)
		}
	}
	if out, err := limits(); err != nil || out != "t: no limits\n" {
		t.Errorf("limits of a topic with none: %q, %v", out, err)
	}

	for _, bad := range []struct {
		args []string
		want []string
	}{
		{[]string{"--rate", "fast"}, []string{"--rate", `"fast"`}},
		{[]string{"--rate", "5/d"}, []string{"--rate", `"5/d"`, "s, m or h"}},
		{[]string{"--rate", "0/d"}, []string{"--rate", `"0/d"`, "s, m or h"}},
		{[]string{"--rate", "-5"}, []string{"--rate", `"-5"`}},
		{[]string{"--rate", "2000000"}, []string{"--rate", `"2000000"`, "above"}},
		{[]string{"--rate", "1e-9/s"}, []string{"--rate", `"1e-9/s"`, "below the slowest rate limit, 1/h", "pause"}},
		{[]string{"--burst", "-1", "--rate", "5"}, []string{"--burst", `"-1"`, "negative"}},
		{[]string{"--concurrency", "-2"}, []string{"--concurrency", `"-2"`, "negative"}},
		{[]string{"--concurrency", "many"}, []string{"-concurrency", `"many"`}},
		{[]string{"--clear", "--rate", "5"}, []string{"--clear and --rate"}},
		{[]string{"--clear", "--concurrency", "0"}, []string{"--clear and --concurrency"}},
		{[]string{"--burst", "5"}, []string{"--burst 5 without a rate"}},
		{[]string{"--rate", "0", "--burst", "5"}, []string{"--burst 5 with --rate 0"}},
		{[]string{"--partitions", "4"}, []string{"--partitions does not apply"}},
	} {
		_, err := limits(bad.args...)
		checkUsageError(t, append([]string{"limits"}, bad.args...), err, bad.want...)
	}
	check(delayq.Limits{})

	for _, step := range []struct {
		args []string
		out  string
		want delayq.Limits
	}{
		{[]string{"--rate", "200/s", "--concurrency", "10"}, "rate 200/s burst 20 (default) concurrency 10", delayq.Limits{Rate: 200, Concurrency: 10}},
		{[]string{"--burst", "50"}, "rate 200/s burst 50 concurrency 10", delayq.Limits{Rate: 200, Burst: 50, Concurrency: 10}},
		{[]string{"--concurrency", "0"}, "rate 200/s burst 50", delayq.Limits{Rate: 200, Burst: 50}},
		{[]string{"--rate", "600/m"}, "rate 10/s burst 50", delayq.Limits{Rate: 10, Burst: 50}},
		{[]string{"--burst", "0"}, "rate 10/s burst 1 (default)", delayq.Limits{Rate: 10}},
		{[]string{"--rate", "90/h", "--burst", "2"}, "rate 1.5/m burst 2", delayq.Limits{Rate: 0.025, Burst: 2}},
		{[]string{"--rate", "0", "--concurrency", "4"}, "concurrency 4", delayq.Limits{Concurrency: 4}},
		{[]string{"--clear"}, "no limits", delayq.Limits{}},
		{[]string{"--rate", "100", "--concurrency", "3"}, "rate 100/s burst 10 (default) concurrency 3", delayq.Limits{Rate: 100, Concurrency: 3}},
	} {
		if out, err := limits(step.args...); err != nil || out != "t: "+step.out+"\n" {
			t.Errorf("limits %v: %q, %v; want %q", step.args, out, err, "t: "+step.out+"\n")
		}
		check(step.want)
	}

	// What runs against the limits: slots of the cap held, and starts the
	// rate granted in the last whole second.
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if n, _, err := st.TakeSlots(ctx, "t", 3, []string{"a", "b"}, now.Add(time.Hour), nil); err != nil || n != 2 {
		t.Fatalf("TakeSlots: %d, %v", n, err)
	}
	var granted int
	testenv.WaitFor(t, 10*time.Second, "limits to print the starts of the last whole second", func() bool {
		// Taken a second ago, they count as the last whole second's
		// until the clock passes into the next second.
		g, err := st.TakeTokens(ctx, "t", store.TokenTake{Rate: 100, Burst: 10, Want: 4, Min: 1, Now: time.Now().Add(-time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		granted = g.N
		out, err := limits()
		return err == nil && out == fmt.Sprintf("t: rate 100/s burst 10 (default) concurrency 3\n%d started in the last second, 2 running\n", granted)
	})
	if granted == 0 {
		t.Error("the rate limit granted nothing: the test shows no start")
	}
	out, err := limits("--json")
	var js map[string]any
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || js["topic"] != "t" || js["rate"] != "100/s" || js["concurrency"] != 3.0 ||
		js["running"] != 2.0 || js["burst"] != nil || js["started_last_second"] == nil {
		t.Errorf("limits --json: %v\n%s", err, out)
	}
	out, _, err = runArgs(t, "stats", "--addr", addr, "--topic", "t")
	if err != nil || !strings.Contains(out, "\nlimits rate 100/s burst 10 (default) concurrency 3: ") || !strings.Contains(out, " started in the last second, 2 running\n") {
		t.Errorf("stats of a topic with limits (%v):\n%s", err, out)
	}
	out, _, _ = runArgs(t, "stats", "--addr", addr, "--topic", "t", "--json")
	var sj struct {
		Limits map[string]any `json:"limits"`
	}
	if err := json.Unmarshal([]byte(out), &sj); err != nil || sj.Limits["rate"] != "100/s" || sj.Limits["running"] != 2.0 {
		t.Errorf("stats --json of a topic with limits (%v):\n%s", err, out)
	}
	out, err = limits("--concurrency", "5", "--json")
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || js["concurrency"] != 5.0 || js["rate"] != "100/s" {
		t.Errorf("limits --concurrency 5 --json: %v\n%s", err, out)
	}
	if out, err := limits("--clear"); err != nil || out != "t: no limits\n" {
		t.Errorf("limits --clear: %q, %v", out, err)
	}
	check(delayq.Limits{})
	if out, _, _ := runArgs(t, "stats", "--addr", addr, "--topic", "t"); strings.Contains(out, "limits") {
		t.Errorf("stats after --clear still shows limits:\n%s", out)
	}
}

// A worker's [topic.limits] table sets the limits of a topic whose limits
// were never set; once they were, a worker whose table differs keeps the
// stored ones and warns, naming both; a worker without the table leaves
// them alone.
func TestWorkerLimits(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	c, err := delayq.New(delayq.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	file := func(table string) string {
		return writeWorkerConfig(t, fmt.Sprintf("[redis]\naddr = %q\n[http]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n[worker]\nshutdown_timeout = \"1s\"\n"+
			"[[topic]]\nname = \"lim\"\n[topic.handler]\ntype = \"exec\"\ncommand = [\"true\"]\n%s", addr, table))
	}
	limitsAre := func(want delayq.Limits) func() bool {
		return func() bool {
			l, err := c.Inspector().Limits(ctx, "lim")
			return err == nil && l == want
		}
	}
	rw := startWorker(t, file("[topic.limits]\nrate = \"200/s\"\nconcurrency = 5\n"))
	testenv.WaitFor(t, 10*time.Second, "the file's limits stored", limitsAre(delayq.Limits{Rate: 200, Concurrency: 5}))
	stopRun(t, rw.cancel, rw.done, 10*time.Second)

	if _, _, err := runArgs(t, "limits", "--addr", addr, "--topic", "lim", "--rate", "50/s"); err != nil {
		t.Fatal(err)
	}
	rw = startWorker(t, file("[topic.limits]\nrate = \"200/s\"\nconcurrency = 5\n"))
	var warned string
	testenv.WaitFor(t, 10*time.Second, "the warning that the stored limits differ", func() bool {
		warned = logLine(rw.logs.String(), "stored limits differ")
		return warned != ""
	})
	if !strings.Contains(warned, "rate 50/s") || !strings.Contains(warned, "rate 200/s") {
		t.Errorf("the warning does not name both limits: %s", warned)
	}
	if !limitsAre(delayq.Limits{Rate: 50, Concurrency: 5})() {
		t.Error("a worker's file changed limits that were set")
	}
	stopRun(t, rw.cancel, rw.done, 10*time.Second)

	rw = startWorker(t, file(""))
	testenv.WaitFor(t, 10*time.Second, "the worker to own the topic", func() bool {
		st, err := c.Inspector().Stats(ctx, "lim")
		return err == nil && st.Partitions[0].Owner != ""
	})
	if !limitsAre(delayq.Limits{Rate: 50, Concurrency: 5})() {
		t.Error("a worker without [topic.limits] changed the limits")
	}
	if l := logLine(rw.logs.String(), "limits"); l != "" {
		t.Errorf("a worker without [topic.limits] logged of limits: %s", l)
	}
	stopRun(t, rw.cancel, rw.done, 10*time.Second)
}

// logLine returns the first JSON log line of logs whose message holds
// part, or "".
func logLine(logs, part string) string {
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.Contains(fmt.Sprint(m["msg"]), part) {
			return line
		}
	}
	return ""
}
