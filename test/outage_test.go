package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// The log lines of an outage (docs/proxies.md, "Proxy outages"), as the
// CLI's default level (warn) shows them.
const (
	outageStartMsg = `msg="outage: no address answers; waiting for one"`
	outageEndMsg   = `msg="outage over"`
)

// outageEndRE reads the figures of the outage's summary line.
var outageEndRE = regexp.MustCompile(`msg="outage over" .*lasted=([0-9.]+[a-zµ]+) .*leases_lost=(\d+) partitions_retaken=(\d+)`)

// countLines returns how many lines of s contain sub.
func countLines(s, sub string) int {
	n := 0
	for _, ln := range strings.Split(s, "\n") {
		if strings.Contains(ln, sub) {
			n++
		}
	}
	return n
}

// sendOne sends one message due now through addr and returns its id.
func sendOne(t *testing.T, l *ledger, addr, topic, body string) string {
	t.Helper()
	r := mustCLI(t, "", "send", "--addr", addr, "--topic", topic, "--body", body)
	id := strings.TrimSpace(r.stdout)
	l.expect(id, []byte(body), time.Now().Add(-time.Second))
	return id
}

// TestOutageLogs: every proxy of a running sub (default log level, lease
// 2 s) is killed for 4 s, longer than the lease. Its stderr shows the
// outage in one line when it starts and one summary when it ends, with
// its length, the leases lost and the partitions retaken; no lease or
// partition loss of its own, and no line that names its component twice.
// The sub then delivers a message sent after the outage.
func TestOutageLogs(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, Proxies: 2})
	addrs := strings.Join(env.Proxies, ",")
	topic := "e2e.outage.logs"
	const parts = 4
	l := newLedger()
	s := startSub(t, l, 0, "--addr", addrs, "--topic", topic, "--partitions", strconv.Itoa(parts), "--lease", "2s", "--id", "out-0")
	c := faultClient(t, addrs, parts)
	waitOwners(t, c, topic, time.Now(), faultSettle, "the sub owning every partition", func(o ownership) bool {
		return o.ownedExactlyBy(parts, parts, parts, "out-0")
	})

	env.StopProxyN(t, 0)
	env.StopProxyN(t, 1)
	down := time.Now()
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), outageStartMsg) },
		"the outage's first line\nstderr: %s", s.stderr)
	time.Sleep(time.Until(down.Add(4 * time.Second)))
	env.StartProxyN(t, 0)
	env.StartProxyN(t, 1)
	back := time.Now()
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(s.stderr.String(), outageEndMsg) },
		"the outage's summary\nstderr: %s", s.stderr)

	id := sendOne(t, l, addrs, topic, "after the outage")
	waitFor(t, 20*time.Second, func() bool { return len(l.deliveries(id)) > 0 }, "the delivery of a message sent after the outage")
	if code := s.stop(t, 30*time.Second); code != 0 {
		t.Errorf("sub exited %d\nstderr: %s", code, s.stderr)
	}

	stderr := s.stderr.String()
	if n := countLines(stderr, outageStartMsg); n != 1 {
		t.Errorf("%d lines say the outage started, want 1\nstderr: %s", n, stderr)
	}
	if n := countLines(stderr, outageEndMsg); n != 1 {
		t.Errorf("%d lines say the outage ended, want 1\nstderr: %s", n, stderr)
	}
	for _, lost := range []string{`msg="lease lost`, `msg="partition lost"`, `msg="lease extension refused"`, `msg="release partition"`} {
		if n := countLines(stderr, lost); n > 0 {
			t.Errorf("%d lines %s during a known outage, want them folded into its summary\nstderr: %s", n, lost, stderr)
		}
	}
	for _, ln := range strings.Split(stderr, "\n") {
		if strings.Count(ln, "component=") > 1 {
			t.Errorf("a line names its component twice: %s", ln)
		}
	}
	m := outageEndRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no lasted=, leases_lost= and partitions_retaken= in the summary\nstderr: %s", stderr)
	}
	lasted, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("lasted=%s: %v", m[1], err)
	}
	if want := back.Sub(down); lasted < want-2*time.Second || lasted > want+time.Second {
		t.Errorf("the summary says the outage lasted %v; the proxies were down %v", lasted, want)
	}
	lost, _ := strconv.Atoi(m[2])
	retaken, _ := strconv.Atoi(m[3])
	if lost != parts || retaken != parts {
		t.Errorf("summary: %d leases lost and %d partitions retaken, want %d and %d (an outage of 4 s, leases of 2 s)\n%s",
			lost, retaken, parts, parts, m[0])
	}
	testenv.Figure(t, "scenario=outage-logs-4s lasted_ms=%d leases_lost=%d partitions_retaken=%d", lasted.Milliseconds(), lost, retaken)
}

// TestOutageSubStartsDuringOutage: a sub started while every proxy is
// down waits for them, logging the outage once, instead of exiting; it
// delivers a message sent after they return, and stops with exit 0.
func TestOutageSubStartsDuringOutage(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 2, Proxies: 2})
	addrs := strings.Join(env.Proxies, ",")
	topic := "e2e.outage.start"
	env.StopProxyN(t, 0)
	env.StopProxyN(t, 1)
	l := newLedger()
	s := startSub(t, l, 0, "--addr", addrs, "--topic", topic, "--partitions", "4", "--lease", "2s")
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), outageStartMsg) || s.exited() },
		"the outage's first line\nstderr: %s", s.stderr)
	// Wait as long as a few dials and retries take: still running.
	if poll(2*time.Second, s.exited) {
		t.Fatalf("sub started during an outage exited %d\nstderr: %s", s.exitCode(), s.stderr)
	}
	env.StartProxyN(t, 0)
	env.StartProxyN(t, 1)
	id := sendOne(t, l, addrs, topic, "sent after the outage")
	waitFor(t, 20*time.Second, func() bool { return len(l.deliveries(id)) > 0 },
		"the delivery of a message sent after the outage\nstderr: %s", s.stderr)
	if code := s.stop(t, 30*time.Second); code != 0 {
		t.Errorf("sub exited %d\nstderr: %s", code, s.stderr)
	}
	if n := countLines(s.stderr.String(), outageStartMsg); n != 1 {
		t.Errorf("%d lines say the outage started, want 1\nstderr: %s", n, s.stderr)
	}
}

// TestOutageWorkerStartsDuringOutage: a worker started while its proxy
// is down waits for it, logging the outage once (and its API's failures
// naming their component once), and delivers a message sent after it is
// back; SIGTERM then stops it with exit 0.
func TestOutageWorkerStartsDuringOutage(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{})
	env.StopProxy(t)
	dir := t.TempDir()
	out, cfg, listen := filepath.Join(dir, "exec.out"), filepath.Join(dir, "worker.toml"), wFreeAddr(t)
	wWriteFile(t, cfg, fmt.Sprintf(`
[redis]
addr = %q

[worker]
lease = "2s"

[http]
listen = %q

[[topic]]
name = "e2e.outage.worker"
partitions = 4
[topic.handler]
type = "exec"
command = ["sh", "-c", 'cat >>"$1"', "sh", %q]
`, env.Proxy, listen, out))
	w := wStartWorker(t, "--config", cfg)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(w.stderr.String(), outageStartMsg) || w.exited() },
		"the outage's first line")
	if poll(2*time.Second, w.exited) {
		t.Fatalf("worker started during an outage exited\n%s", w.stderr)
	}
	api := &wAPI{t: t, base: "http://" + listen}
	if code, body := api.do("GET", "/v1/topics/e2e.outage.worker/messages/m1", "", false); code < 500 {
		t.Errorf("GET of a message during an outage: %d %s, want a 5xx", code, body)
	}
	env.StartProxy(t)
	mustCLI(t, "", "send", "--addr", env.Proxy, "--topic", "e2e.outage.worker", "--body", "after the outage")
	waitFor(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "after the outage")
	}, "the delivery of a message sent after the outage")
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d", code)
	}
	if n := countLines(w.stderr.String(), outageStartMsg); n != 1 {
		t.Errorf("%d lines say the outage started, want 1\n%s", n, w.stderr)
	}
	for _, ln := range strings.Split(w.stderr.String(), "\n") {
		if strings.Count(ln, "component=") > 1 {
			t.Errorf("a line names its component twice: %s", ln)
		}
	}
}

// TestOutageSubStartStops: a sub waiting for the proxies at its start
// stops at SIGTERM with exit 0; one with a bad flag value still fails at
// once.
func TestOutageSubStartStops(t *testing.T) {
	dead := "127.0.0.1:1,127.0.0.1:2"
	l := newLedger()
	s := startSub(t, l, 0, "--addr", dead, "--topic", "e2e.outage.stop")
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), outageStartMsg) || s.exited() },
		"the outage's first line\nstderr: %s", s.stderr)
	if s.exited() {
		t.Fatalf("sub exited %d during an outage\nstderr: %s", s.exitCode(), s.stderr)
	}
	if code := s.stop(t, 5*time.Second); code != 0 {
		t.Errorf("sub stopped during an outage exited %d, want 0\nstderr: %s", code, s.stderr)
	}
	r := cli(t, "", "sub", "--addr", dead, "--topic", "bad topic")
	wantExit(t, r, 1, "topic")
}

// startSend starts "delayq send args..." and returns a channel that gets
// its result and how long it ran.
func startSend(t *testing.T, args ...string) (<-chan result, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	cmd := newCmd(ctx, append([]string{"send"}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	ch := make(chan result, 1)
	go func() {
		defer cancel()
		err := cmd.Wait()
		r := result{args: args, stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			r.code = -1
		}
		ch <- r
	}()
	return ch, start
}

// TestOutageSendRetryFor: "send --retry-for 3s" started while the proxy
// is down succeeds when the proxy is back within the bound; when it is
// not, it fails once the bound has passed (not before, and not long
// after), saying how long it tried and the last error. With --retry-for
// 0 it fails at once and says it did not retry.
func TestOutageSendRetryFor(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	addr, topic := env.Proxy, "e2e.outage.send"
	env.StopProxy(t)

	done, _ := startSend(t, "--addr", addr, "--topic", topic, "--body", "waited", "--retry-for", "3s")
	time.Sleep(time.Second)
	env.StartProxy(t)
	r := <-done
	if r.code != 0 {
		t.Fatalf("send during an outage shorter than --retry-for: %s", r)
	}
	id := strings.TrimSpace(r.stdout)
	got := mustCLI(t, "", "get", "--addr", addr, "--topic", topic, "--id", id)
	if in := decodeInfo(t, got.stdout); in.Body == nil || *in.Body != "waited" {
		t.Errorf("the message sent during the outage reads %s", got.stdout)
	}

	env.StopProxy(t)
	const bound, slack = 3 * time.Second, 2 * time.Second
	done, start := startSend(t, "--addr", addr, "--topic", topic, "--body", "never", "--retry-for", bound.String())
	r = <-done
	took := time.Since(start)
	if took < bound || took > bound+slack {
		t.Errorf("send --retry-for %v with the proxy down exited after %v, want between %v and %v", bound, took, bound, bound+slack)
	}
	wantExit(t, r, 1, "3s", "connection refused")

	start = time.Now()
	r = cli(t, "", "send", "--addr", addr, "--topic", topic, "--body", "never", "--retry-for", "0")
	if took := time.Since(start); took > time.Second {
		t.Errorf("send --retry-for 0 with the proxy down took %v", took)
	}
	wantExit(t, r, 1, "not retried", "connection refused")
	env.StartProxy(t)
}

// TestOutageErrorText: the error of a dial names the address once, as
// the network error does, without prefixes that repeat it.
func TestOutageErrorText(t *testing.T) {
	r := cli(t, "", "send", "--addr", "127.0.0.1:1", "--topic", "e2e.outage.text", "--retry-for", "0")
	wantExit(t, r, 1, "dial tcp 127.0.0.1:1: connect: connection refused")
	if msg := errorLine(r.stderr); strings.Count(msg, "127.0.0.1:1") != 1 {
		t.Errorf("the error names the address more than once: %s", msg)
	}
	r = cli(t, "", "stats", "--addr", "127.0.0.1:1,127.0.0.1:2", "--topic", "e2e.outage.text")
	wantExit(t, r, 1, "dial tcp 127.0.0.1:1: connect: connection refused", "dial tcp 127.0.0.1:2: connect: connection refused")
	for _, a := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		if msg := errorLine(r.stderr); strings.Count(msg, a+":") != 1 {
			t.Errorf("the error does not name %s once: %s", a, msg)
		}
	}
}

// errorLine returns the line of stderr that carries the command's error.
func errorLine(stderr string) string {
	for _, ln := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(ln, "delayq: ") {
			return ln
		}
	}
	return ""
}
