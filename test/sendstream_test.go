package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
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
	env := testenv.Start(t, testenv.Options{})
	addr, topic := env.Proxy, "e2e.send.restart"
	const n, batch = 1600, 10

	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := newCmd(ctx, "send", "--addr", addr, "--topic", topic, "--stdin", "--batch", fmt.Sprint(batch))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // a batch every 20 ms: 3.2 s of lines
		defer in.Close()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < n; i += batch {
			var b strings.Builder
			for j := i; j < i+batch; j++ {
				switch j % 4 {
				case 0:
					fmt.Fprintf(&b, `{"id":"px-%d","body":"b%d"}`+"\n", j, j)
				case 1:
					fmt.Fprintf(&b, `{"body":"b%d"}`+"\n", j)
				case 2:
					fmt.Fprintf(&b, `{"id":"px-%d","body":"b%d","delay":"3m"}`+"\n", j, j)
				default:
					fmt.Fprintf(&b, `{"body":"b%d","delay":"3m"}`+"\n", j)
				}
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
	}()
	waitFor(t, 10*time.Second, func() bool { return strings.Count(out.String(), "\n") >= 400 }, "400 lines sent")
	env.StopProxy(t)
	time.Sleep(2 * time.Second) // the restart's length
	env.StartProxy(t)
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) || err != nil {
		t.Fatalf("send --stdin across a 2 s proxy restart: %v\nstderr: %s", err, clip(errb.String()))
	}
	ids := strings.Fields(out.String())
	if len(ids) != n {
		t.Errorf("%d lines accepted, want %d; stderr: %s", len(ids), n, clip(errb.String()))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("id %s accepted twice", id)
		}
		seen[id] = true
	}
	if s := errb.String(); strings.Contains(s, "line ") {
		t.Errorf("lines rejected: %s", clip(s))
	}
	st := stats(t, addr, topic)
	if got := st.Scheduled + st.InFlight + st.Dead; got != n {
		t.Errorf("the topic holds %d messages, want %d", got, n)
	}
	t.Logf("stderr: %s", clip(errb.String()))
}
