package test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// TestSendStdinProxyRestart: a nutcracker restarted for 2 s in the
// middle of a paced "send --stdin" (default --retry-for 5s) costs the
// producer nothing: exit 0, every line accepted once, none reported a
// duplicate of itself, and the topic holds each message once: given ids
// and generated ones, due now and a few minutes ahead (written as
// segments).
func TestSendStdinProxyRestart(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{})
	addr, topic := env.Proxy, "e2e.send.restart"
	const n, batch = 1600, 10

	out, errb := sendAcrossRestart(t, env, n, batch, []string{"send", "--addr", addr, "--topic", topic, "--stdin", "--batch", fmt.Sprint(batch)}, func(j int) string {
		switch j % 4 {
		case 0:
			return fmt.Sprintf(`{"id":"px-%d","body":"b%d"}`, j, j)
		case 1:
			return fmt.Sprintf(`{"body":"b%d"}`, j)
		case 2:
			return fmt.Sprintf(`{"id":"px-%d","body":"b%d","delay":"3m"}`, j, j)
		default:
			return fmt.Sprintf(`{"body":"b%d","delay":"3m"}`, j)
		}
	})
	ids := strings.Fields(out)
	if len(ids) != n {
		t.Errorf("%d lines accepted, want %d; stderr: %s", len(ids), n, clip(errb))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("id %s accepted twice", id)
		}
		seen[id] = true
	}
	if s := errb; strings.Contains(s, "line ") {
		t.Errorf("lines rejected: %s", clip(s))
	}
	st := stats(t, addr, topic)
	if got := st.Scheduled + st.InFlight + st.Dead; got != n {
		t.Errorf("the topic holds %d messages, want %d", got, n)
	}
	t.Logf("stderr: %s", clip(errb))
}

// sendAcrossRestart runs "delayq args..." (a send --stdin) fed n lines
// by pace, stops the proxy for 2 s once 400 lines were accepted, and
// returns its stdout and stderr once it exited 0 (it fails t otherwise).
func sendAcrossRestart(t *testing.T, env *testenv.Env, n, batch int, args []string, line func(j int) string) (out, errb string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := newCmd(ctx, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var o, e testenv.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go pace(ctx, in, n, batch, line)
	waitFor(t, 10*time.Second, func() bool { return strings.Count(o.String(), "\n") >= 400 }, "400 lines sent")
	env.StopProxy(t)
	time.Sleep(2 * time.Second) // the restart's length
	env.StartProxy(t)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s across a 2 s proxy restart: %v\nstderr: %s", strings.Join(args, " "), err, clip(e.String()))
	}
	return o.String(), e.String()
}

// pace writes the n lines line(0), line(1), ... to in, batch lines every
// 20 ms, then closes it.
func pace(ctx context.Context, in io.WriteCloser, n, batch int, line func(j int) string) {
	defer in.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < n; i += batch {
		var b strings.Builder
		for j := i; j < min(i+batch, n); j++ {
			b.WriteString(line(j) + "\n")
		}
		if _, err := io.WriteString(in, b.String()); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// TestSendStdinReplaceProxyRestart: a paced "send --stdin --on-duplicate
// replace" that sends each id twice, 800 lines apart, across a 2 s
// restart of its nutcracker, exits 0 with each id reported created once
// and replaced once, never "replaced" for its first send (which a run
// again after a lost reply could report), and the topic holds each
// message once, with its second body.
func TestSendStdinReplaceProxyRestart(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{})
	addr, topic := env.Proxy, "e2e.send.replace.restart"
	const ids, batch = 800, 10
	const n = 2 * ids

	out, errb := sendAcrossRestart(t, env, n, batch, []string{"send", "--addr", addr, "--topic", topic, "--stdin", "--batch", fmt.Sprint(batch), "--on-duplicate", "replace"}, func(j int) string {
		delay := ""
		if j%2 == 1 {
			delay = `,"delay":"3m"`
		}
		return fmt.Sprintf(`{"id":"rp-%d","body":"b%d"%s}`, j%ids, j, delay)
	})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines accepted, want %d; stderr: %s", len(lines), n, clip(errb))
	}
	for j, l := range lines {
		id := fmt.Sprintf("rp-%d", j%ids)
		if j < ids && l != id {
			t.Errorf("line %d: %q, want %q (created)", j+1, l, id)
		}
		if j >= ids && !strings.HasPrefix(l, id+" replaced, due ") {
			t.Errorf("line %d: %q, want %q replaced", j+1, l, id)
		}
	}
	st := stats(t, addr, topic)
	if got := st.Scheduled + st.InFlight + st.Dead; got != ids {
		t.Errorf("the topic holds %d messages, want %d", got, ids)
	}
	for _, j := range []int{0, 1, ids - 1} {
		id := fmt.Sprintf("rp-%d", j)
		r := cli(t, "", "get", "--addr", addr, "--topic", topic, "--id", id)
		if r.code != 0 {
			t.Fatalf("get %s: %s", id, r)
		}
		body := ""
		if b := decodeInfo(t, r.stdout).Body; b != nil {
			body = *b
		}
		if want := fmt.Sprintf("b%d", j+ids); body != want {
			t.Errorf("%s holds %q, want %q", id, body, want)
		}
	}
	t.Logf("stderr: %s", clip(errb))
}
