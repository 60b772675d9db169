package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// send --unique-for: a negative or unparsable window is a usage error
// naming the flag and value, found before any connection.
func TestSendUniqueForUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--id", "x", "--unique-for", "-1h"}, []string{"--unique-for", `"-1h"`, "negative"}},
		{[]string{"--id", "x", "--unique-for", "a day"}, []string{"--unique-for", `"a day"`}},
		{[]string{"--stdin", "--unique-for", "-5m"}, []string{"--unique-for", `"-5m"`, "negative"}},
	} {
		_, _, err := runArgs(t, append([]string{"send", "--addr", "127.0.0.1:1", "--topic", "t"}, tc.args...)...)
		checkUsageError(t, append([]string{"send"}, tc.args...), err, tc.want...)
	}
}

// getInfo runs "delayq get" and decodes its JSON.
func getInfo(t *testing.T, addr, topic, id string) (map[string]any, error) {
	t.Helper()
	out, _, err := runArgs(t, "get", "--addr", addr, "--topic", topic, "--id", id)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("get printed no JSON object: %v\n%s", err, out)
	}
	return m, nil
}

// send --unique-for N: once a delivery of the message was acked (here by
// "delayq sub --count 1"), get prints it done, with when it finished and
// until when its id is taken, N apart; a send of the id is refused, exit
// 1, saying when it was delivered and until when the id is taken,
// whatever --on-duplicate. With --stdin, a line's "unique_for" is its
// window, the flag that of the lines that set none, and a line refused
// as finished says so on stderr.
func TestSendUniqueFor(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	const topic = "uniq"
	send := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"send", "--addr", addr, "--topic", topic}, args...), strings.NewReader(stdin), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	if out, _, err := send("", "--id", "w", "--body", "x", "--unique-for", "1h"); err != nil || out != "w\n" {
		t.Fatalf("send --unique-for 1h: %q, %v", out, err)
	}
	if in, err := getInfo(t, addr, topic, "w"); err != nil || in["unique_for_ms"] != 3600000.0 || in["state"] != "scheduled" {
		t.Errorf("get of a message sent with --unique-for 1h: %v, %v", in, err)
	}
	if out, _, err := runArgs(t, "sub", "--addr", addr, "--topic", topic, "--count", "1", "--timeout", "20s"); err != nil || !strings.Contains(out, `"id":"w"`) {
		t.Fatalf("sub --count 1: %q, %v", out, err)
	}
	var in map[string]any
	testenv.WaitFor(t, 10*time.Second, "w done", func() bool {
		var err error
		in, err = getInfo(t, addr, topic, "w")
		return err == nil && in["state"] == "done"
	})
	finished, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(in["finished"]))
	until, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(in["unique_until"]))
	if err1 != nil || err2 != nil || until.Sub(finished) != time.Hour || time.Since(finished) > time.Minute {
		t.Errorf("get of a done message: %v", in)
	}
	if _, ok := in["body"]; ok {
		t.Errorf("get of a done message shows a body: %v", in)
	}

	for _, args := range [][]string{
		{"--id", "w", "--body", "again"},
		{"--id", "w", "--body", "again", "--on-duplicate", "replace"},
		{"--id", "w", "--unique-for", "2h", "--on-duplicate", "debounce", "--delay", "1m"},
	} {
		out, _, err := send("", args...)
		var fe *delayq.FinishedError
		var ue *usageError
		if !errors.As(err, &fe) || !errors.Is(err, delayq.ErrDuplicate) || errors.As(err, &ue) || errors.Is(err, delayq.ErrRunning) {
			t.Errorf("send %v of a finished id: %v, want a FinishedError (exit 1)", args, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `"w" in topic uniq was delivered at `+finished.UTC().Format("2006-01-02T15:04:05")) ||
			!strings.Contains(msg, "its id is taken until "+until.UTC().Format("2006-01-02T15:04:05")) {
			t.Errorf("send %v of a finished id: %q, want it to say when it was delivered and until when its id is taken", args, msg)
		}
		if fe.Done.Until != until.UnixMilli() || out != "" {
			t.Errorf("send %v of a finished id: until %d (want %d), stdout %q", args, fe.Done.Until, until.UnixMilli(), out)
		}
	}

	lines := strings.Join([]string{
		`{"id":"w","delay":"1h"}`,                     // 1 refused: finished
		`{"id":"x","delay":"1h","unique_for":"2h"}`,   // 2 its own window
		`{"id":"y","delay":"1h"}`,                     // 3 the flag's
		`{"id":"z","delay":"1h","unique_for":"-1s"}`,  // 4 rejected: negative
		`{"id":"v","delay":"1h","unique_for":"soon"}`, // 5 rejected: not a duration
		`{"id":"n","delay":"1h","unique_for":"0s"}`,   // 6 set: the topic's default (none), not the flag's
	}, "\n")
	out, errOut, err := send(lines, "--stdin", "--unique-for", "3h")
	if err == nil || err.Error() != "3 of 6 messages rejected" {
		t.Errorf("send --stdin: %v, want 3 of 6 rejected", err)
	}
	if out != "x\ny\nn\n" {
		t.Errorf("send --stdin printed %q", out)
	}
	errLines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(errLines) != 3 ||
		!strings.HasPrefix(errLines[0], `line 1: id "w": finished: duplicate message id: "w" in topic uniq was delivered at `) || !strings.Contains(errLines[0], "its id is taken until ") ||
		errLines[1] != `line 4: id "z": unique_for "-1s" is negative` ||
		!strings.HasPrefix(errLines[2], `line 5: id "v": unique_for "soon" is not a duration`) {
		t.Errorf("send --stdin stderr:\n%s", errOut)
	}
	for id, want := range map[string]any{"x": 7200000.0, "y": 10800000.0, "n": nil} {
		if in, err := getInfo(t, addr, topic, id); err != nil || in["unique_for_ms"] != want {
			t.Errorf("get %s after send --stdin --unique-for 3h: unique_for_ms %v, %v; want %v", id, in["unique_for_ms"], err, want)
		}
	}
}

// unique-for prints a topic's default uniqueness window ("none", or the
// duration; --json {"topic","unique_for_ms"}), sets it with --set, which
// a later send with an id of its own gets, and clears it with --set 0;
// bad values are usage errors naming the flag and value; a topic that
// does not exist is refused (exit 1) and not created.
func TestUniqueForCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	ctx := context.Background()
	for _, args := range [][]string{{}, {"--set", "1h"}, {"--set", "0"}, {"--json"}} {
		_, _, err := runArgs(t, append([]string{"unique-for", "--addr", addr, "--topic", "ghost"}, args...)...)
		var ue *usageError
		if !errors.Is(err, delayq.ErrNoTopic) || errors.As(err, &ue) || !strings.Contains(err.Error(), `topic "ghost" does not exist`) {
			t.Errorf("unique-for %v of a topic never used: %v, want ErrNoTopic (exit 1)", args, err)
		}
	}
	if stored(t, addr, "ghost") {
		t.Error("unique-for created the topic")
	}
	uniqueFor := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := runArgs(t, append([]string{"unique-for", "--addr", addr, "--topic", "t"}, args...)...)
		return out, err
	}
	for _, bad := range []struct {
		args []string
		want []string
	}{
		{[]string{"--set", "-1h"}, []string{"--set", `"-1h"`, "negative"}},
		{[]string{"--set", "a day"}, []string{"--set", `"a day"`}},
		{[]string{"--set", "24"}, []string{"--set", `"24"`, "missing unit"}},
		{[]string{"--partitions", "4"}, []string{"--partitions does not apply"}},
		{[]string{"--id", "x"}, []string{"--id"}},
	} {
		_, err := uniqueFor(bad.args...)
		checkUsageError(t, append([]string{"unique-for"}, bad.args...), err, bad.want...)
	}

	if _, _, err := runArgs(t, "send", "--addr", addr, "--topic", "t", "--delay", "1h"); err != nil {
		t.Fatal(err)
	}
	c, err := delayq.New(delayq.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(want time.Duration) {
		t.Helper()
		if got, err := c.Inspector().UniqueFor(ctx, "t"); err != nil || got != want {
			t.Errorf("Inspector.UniqueFor: %v, %v; want %v", got, err, want)
		}
	}
	jsonIs := func(ms int64) {
		t.Helper()
		out, err := uniqueFor("--json")
		var got map[string]any
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got) != 2 || got["topic"] != "t" || got["unique_for_ms"] != float64(ms) {
			t.Errorf("unique-for --json: %q, %v; want {\"topic\":\"t\",\"unique_for_ms\":%d}", out, err, ms)
		}
	}
	if out, err := uniqueFor(); err != nil || out != "t: none\n" {
		t.Errorf("unique-for of a topic with none: %q, %v", out, err)
	}
	jsonIs(0)
	for _, step := range []struct {
		args []string
		out  string
		want time.Duration
	}{
		{[]string{"--set", "24h"}, "t: 24h0m0s\n", 24 * time.Hour},
		{nil, "t: 24h0m0s\n", 24 * time.Hour},
		{[]string{"--set", "90m"}, "t: 1h30m0s\n", 90 * time.Minute},
	} {
		if out, err := uniqueFor(step.args...); err != nil || out != step.out {
			t.Errorf("unique-for %v: %q, %v; want %q", step.args, out, err, step.out)
		}
		check(step.want)
	}
	jsonIs(90 * 60 * 1000)
	// A send with an id of its own gets the default; with --unique-for, its own.
	if _, _, err := runArgs(t, "send", "--addr", addr, "--topic", "t", "--id", "given", "--delay", "1h"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runArgs(t, "send", "--addr", addr, "--topic", "t", "--id", "own", "--delay", "1h", "--unique-for", "5m"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]float64{"given": 90 * 60 * 1000, "own": 5 * 60 * 1000} {
		if in, err := getInfo(t, addr, "t", id); err != nil || in["unique_for_ms"] != want {
			t.Errorf("get %s: unique_for_ms %v, %v; want %v", id, in["unique_for_ms"], err, want)
		}
	}
	if out, err := uniqueFor("--set", "0"); err != nil || out != "t: none\n" {
		t.Errorf("unique-for --set 0: %q, %v", out, err)
	}
	check(0)
	jsonIs(0)
}

// A worker's [[topic]] unique_for sets the default uniqueness window of a
// topic whose window was never set, and says so at info; once it was, a
// worker whose key differs keeps the stored one and warns, naming both;
// a worker without the key leaves it alone and says nothing of it.
func TestWorkerUniqueFor(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	c, err := delayq.New(delayq.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	file := func(key string) string {
		return writeWorkerConfig(t, fmt.Sprintf("[redis]\naddr = %q\n[http]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n[worker]\nshutdown_timeout = \"1s\"\n"+
			"[[topic]]\nname = \"uq\"\n%s[topic.handler]\ntype = \"exec\"\ncommand = [\"true\"]\n", addr, key))
	}
	windowIs := func(want time.Duration) func() bool {
		return func() bool {
			d, err := c.Inspector().UniqueFor(ctx, "uq")
			return err == nil && d == want
		}
	}
	rw := startWorker(t, file("unique_for = \"24h\"\n"))
	testenv.WaitFor(t, 10*time.Second, "the file's window stored", windowIs(24*time.Hour))
	testenv.WaitFor(t, 5*time.Second, "the log that it was set", func() bool {
		return workerLogValue(rw.logs.String(), "topic uniqueness window set", "setting") == "24h0m0s"
	})
	if l := logLine(rw.logs.String(), "topic uniqueness window set"); !strings.Contains(l, `"level":"INFO"`) || !strings.Contains(l, `"topic":"uq"`) {
		t.Errorf("the log of the window set: %s", l)
	}
	stopRun(t, rw.cancel, rw.done, 10*time.Second)

	if _, _, err := runArgs(t, "unique-for", "--addr", addr, "--topic", "uq", "--set", "1h"); err != nil {
		t.Fatal(err)
	}
	rw = startWorker(t, file("unique_for = \"24h\"\n"))
	var warned string
	testenv.WaitFor(t, 10*time.Second, "the warning that the stored window differs", func() bool {
		warned = logLine(rw.logs.String(), "stored uniqueness window differs")
		return warned != ""
	})
	if !strings.Contains(warned, `"level":"WARN"`) || !strings.Contains(warned, `"stored":"1h0m0s"`) || !strings.Contains(warned, `"configured":"24h0m0s"`) ||
		!strings.Contains(warned, "the stored one applies (change it with delayq unique-for)") {
		t.Errorf("the warning does not name both windows: %s", warned)
	}
	if !windowIs(time.Hour)() {
		t.Error("a worker's file changed a window that was set")
	}
	stopRun(t, rw.cancel, rw.done, 10*time.Second)

	rw = startWorker(t, file(""))
	testenv.WaitFor(t, 10*time.Second, "the worker to own the topic", func() bool {
		st, err := c.Inspector().Stats(ctx, "uq")
		return err == nil && st.Partitions[0].Owner != ""
	})
	if !windowIs(time.Hour)() {
		t.Error("a worker without unique_for changed the window")
	}
	if l := logLine(rw.logs.String(), "uniqueness"); l != "" {
		t.Errorf("a worker without unique_for logged of it: %s", l)
	}
	stopRun(t, rw.cancel, rw.done, 10*time.Second)
}
