package test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// TestWorkerEndToEnd runs "delayq worker" behind Twemproxy with an http
// topic (signed webhooks to a receiver in this test) and an exec topic,
// and enqueues through its HTTP API: webhooks carry the right headers and
// a valid signature, a failed delivery is retried after its backoff, the
// exec command gets the message, a message deleted before its due time
// never arrives, and SIGTERM stops the worker with exit status 0 within
// shutdown_timeout.
func TestWorkerEndToEnd(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	rcv := wStartReceiver(t)
	dir := t.TempDir()
	execOut := filepath.Join(dir, "exec.out")
	listen := wFreeAddr(t)
	const (
		secret          = "webhook-secret"
		token           = "api-token"
		shutdownTimeout = 5 * time.Second
	)
	cfgPath := filepath.Join(dir, "worker.toml")
	wWriteFile(t, cfgPath, fmt.Sprintf(`
[redis]
addr = %q

[worker]
id = "e2e-worker"
lease = "2s"
poll_interval = "200ms"
shutdown_timeout = %q

[http]
listen = %q
token = %q

[log]
level = "debug"

[[topic]]
name = "wk.hooks"
partitions = 4
backoff = ["1s"]
max_attempts = 3
timeout = "5s"
[topic.handler]
type = "http"
url = %q
secret = %q
headers = { X-Custom = "yes" }

[[topic]]
name = "wk.exec"
partitions = 4
concurrency = 1
[topic.handler]
type = "exec"
command = ["sh", "-c", 'printf "%%s:" "$DELAYQ_ID" >>"$1"; cat >>"$1"; echo >>"$1"', "sh", %q]
`, env.Proxy, shutdownTimeout.String(), listen, token, rcv.url+"/hooks", secret, execOut))

	w := wStartWorker(t, "--config", cfgPath)
	api := &wAPI{t: t, base: "http://" + listen, token: token}
	waitFor(t, 20*time.Second, func() bool {
		if w.exited() {
			return true
		}
		code, _ := api.do("GET", "/readyz", "", false)
		return code == http.StatusOK
	}, "/readyz 200")
	if w.exited() {
		t.Fatalf("worker exited early: %v\nstderr: %s", w.err, clip(w.stderr.String()))
	}

	// The API needs the token; bad fields are 400 naming the field.
	if code, _ := api.do("POST", "/v1/topics/wk.hooks/messages", `{"id":"x","body":"x"}`, false); code != http.StatusUnauthorized {
		t.Errorf("enqueue without a token: %d, want 401", code)
	}
	if code, body := api.do("POST", "/v1/topics/wk.hooks/messages", `{"id":"x","body":"x","delay":"soon"}`, true); code != http.StatusBadRequest || !strings.Contains(body, `"field":"delay"`) {
		t.Errorf("enqueue with a bad delay: %d %s, want 400 naming the field", code, body)
	}
	if code, _ := api.do("GET", "/healthz", "", false); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}

	sent := time.Now()
	api.enqueue("wk.hooks", `{"id":"hook-1","body":"{\"order\":42}","delay":"300ms"}`)
	api.enqueue("wk.hooks", `{"id":"flaky","body":"try again"}`)
	api.enqueue("wk.hooks", `{"id":"gone","body":"never","delay":"2s"}`)
	// Due after "gone" in the same topic: once it arrived, "gone" had its chance.
	api.enqueue("wk.hooks", `{"id":"witness","body":"after gone","delay":"2500ms"}`)
	if code, body := api.do("POST", "/v1/topics/wk.hooks/messages", `{"id":"gone","body":"again","delay":"2s"}`, true); code != http.StatusConflict {
		t.Errorf("enqueue of a duplicate id: %d %s, want 409", code, body)
	}
	api.enqueue("wk.exec", `{"id":"job-1","body":"first job"}`)
	api.enqueue("wk.exec", `{"id":"job-2","body":"second job","delay":"200ms"}`)
	deleted := time.Now()
	if code, body := api.do("DELETE", "/v1/topics/wk.hooks/messages/gone", "", true); code != http.StatusNoContent {
		t.Fatalf("delete gone: %d %s", code, body)
	}
	if time.Since(deleted) > time.Second {
		t.Errorf("the delete took %v: too close to the 2s due time to mean anything", time.Since(deleted))
	}

	waitFor(t, 20*time.Second, func() bool {
		return len(rcv.get("hook-1")) >= 1 && len(rcv.get("flaky")) >= 2
	}, "webhooks of hook-1 and of flaky's two attempts")
	waitFor(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(execOut)
		return strings.Count(string(b), "\n") >= 2
	}, "two exec deliveries in %s", execOut)
	waitFor(t, 10*time.Second, func() bool { return len(rcv.get("witness")) >= 1 },
		"the witness due after the deleted message")

	// hook-1: one signed POST with every header, not before its due time.
	hs := rcv.get("hook-1")
	if len(hs) != 1 {
		t.Fatalf("hook-1 delivered %d times", len(hs))
	}
	h := hs[0]
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(`{"order":42}`))
	wantSig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	due, err := time.Parse(time.RFC3339Nano, h.header.Get("X-Delayq-Due"))
	if err != nil {
		t.Errorf("X-Delayq-Due %q: %v", h.header.Get("X-Delayq-Due"), err)
	}
	for k, want := range map[string]string{
		"X-Delayq-Topic":     "wk.hooks",
		"X-Delayq-Id":        "hook-1",
		"X-Delayq-Attempt":   "1",
		"X-Delayq-Signature": wantSig,
		"Content-Type":       "application/octet-stream",
		"X-Custom":           "yes",
	} {
		if got := h.header.Get(k); got != want {
			t.Errorf("hook-1: header %s = %q, want %q", k, got, want)
		}
	}
	if h.method != "POST" || h.path != "/hooks" || h.body != `{"order":42}` {
		t.Errorf("hook-1: %s %s %q", h.method, h.path, h.body)
	}
	if h.at.Before(due) || due.Before(sent.Add(300*time.Millisecond-clockSlack)) {
		t.Errorf("hook-1 due %v, arrived %v, sent %v + 300ms", due, h.at, sent)
	}

	// flaky: attempt 1 got a 500, attempt 2 came at least the 1s backoff later.
	fs := rcv.get("flaky")
	if len(fs) != 2 {
		t.Fatalf("flaky delivered %d times, want 2", len(fs))
	}
	if fs[0].header.Get("X-Delayq-Attempt") != "1" || fs[1].header.Get("X-Delayq-Attempt") != "2" {
		t.Errorf("flaky attempts %q, %q", fs[0].header.Get("X-Delayq-Attempt"), fs[1].header.Get("X-Delayq-Attempt"))
	}
	if gap := fs[1].at.Sub(fs[0].at); gap < time.Second {
		t.Errorf("flaky attempt 2 came %v after attempt 1, before the 1s backoff", gap)
	}
	if fs[1].header.Get("X-Delayq-Signature") != fs[0].header.Get("X-Delayq-Signature") || fs[1].body != "try again" {
		t.Errorf("flaky retry differs: %+v", fs[1])
	}

	// The deleted message never arrived.
	if n := len(rcv.get("gone")); n != 0 {
		t.Errorf("the deleted message was delivered %d times", n)
	}

	// exec: each delivery appended its id and body. In either order: job-1,
	// due at once, may wait for its partition's next poll (200ms), while
	// job-2's partition may have claimed job-2 ahead and run it on time.
	b, _ := os.ReadFile(execOut)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"job-1:first job", "job-2:second job"}) {
		t.Errorf("exec output %q", b)
	}

	// The API reads what the worker did: flaky's record is gone (acked).
	if code, _ := api.do("GET", "/v1/topics/wk.hooks/messages/flaky", "", true); code != http.StatusNotFound {
		t.Errorf("GET flaky after its ack: %d, want 404", code)
	}
	if code, m := api.do("GET", "/metrics", "", false); code != http.StatusOK || !strings.Contains(m, "delayq_") {
		t.Errorf("/metrics: %d", code)
	}

	// SIGTERM: exit 0 within shutdown_timeout.
	start := time.Now()
	if code := w.stop(t, shutdownTimeout+5*time.Second); code != 0 {
		t.Errorf("worker exit %d after SIGTERM, want 0\nstderr: %s", code, clip(w.stderr.String()))
	}
	if took := time.Since(start); took > shutdownTimeout {
		t.Errorf("worker took %v to stop, more than shutdown_timeout %v", took, shutdownTimeout)
	}
	logs := w.stderr.String()
	for _, msg := range []string{"worker started", "worker stopping", "worker stopped", "delivery failed"} {
		if !strings.Contains(logs, msg) {
			t.Errorf("stderr lacks %q:\n%s", msg, clip(logs))
		}
	}
	if probs := env.ProxyLogProblems(); len(probs) > 0 {
		t.Errorf("nutcracker logged %d problems, first: %v", len(probs), probs[:min(5, len(probs))])
	}
}

// TestWorkerConfigErrors: a misspelled key makes "delayq worker" exit 1
// with the key and its line, before it touches Redis.
func TestWorkerConfigErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "typo.toml")
	wWriteFile(t, p, "[redis]\naddr = \"127.0.0.1:1\"\n\n[worker]\nlease = \"5s\"\npolll_interval = \"1s\"\n")
	r := cli(t, "", "worker", "--config", p)
	wantExit(t, r, 1, `unknown key "polll_interval"`, "[worker]", "typo.toml line 6", "known keys: id, lease, poll_interval")

	wWriteFile(t, p, "[[topic]]\nname = \"t\"\ntimeout = \"soon\"\n[topic.handler]\ntype = \"http\"\nurl = \"http://x\"\n")
	wantExit(t, cli(t, "", "worker", "--config", p), 1, `"timeout"`, "typo.toml line 3", `"soon" is not a duration`)

	wantExit(t, cli(t, "", "worker", "--config", filepath.Join(dir, "missing.toml")), 1, "missing.toml")
	wWriteFile(t, p, "[http]\nlisten = \"127.0.0.1:0\"\n")
	wantExit(t, cli(t, "", "worker", "--config", p, "--addr", "nope"), 2, "--addr")
}

// wReceiver is an HTTP server that records the webhooks it gets. It
// answers 500 to the first attempt of the message "flaky", 204 otherwise.
type wReceiver struct {
	url  string
	mu   sync.Mutex
	reqs map[string][]wHook // by X-Delayq-Id
}

// wHook is one recorded request.
type wHook struct {
	method, path, body string
	header             http.Header
	at                 time.Time
}

func wStartReceiver(t *testing.T) *wReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &wReceiver{url: "http://" + ln.Addr().String(), reqs: map[string][]wHook{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("X-Delayq-Id")
		r.mu.Lock()
		r.reqs[id] = append(r.reqs[id], wHook{req.Method, req.URL.Path, string(body), req.Header.Clone(), at})
		r.mu.Unlock()
		if id == "flaky" && req.Header.Get("X-Delayq-Attempt") == "1" {
			http.Error(w, "try later", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// get returns the requests of id so far.
func (r *wReceiver) get(id string) []wHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wHook(nil), r.reqs[id]...)
}

// wAPI calls the worker's HTTP API.
type wAPI struct {
	t     *testing.T
	base  string
	token string
}

// do sends a request (with the bearer token when auth is set) and returns
// the status and body; a transport error counts as status 0.
func (a *wAPI) do(method, path, body string, auth bool) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// enqueue POSTs a message and fails the test unless it is created.
func (a *wAPI) enqueue(topic, body string) {
	a.t.Helper()
	if code, resp := a.do("POST", "/v1/topics/"+topic+"/messages", body, true); code != http.StatusCreated {
		a.t.Fatalf("enqueue %s to %s: %d %s", body, topic, code, resp)
	}
}

// wWorker is a running "delayq worker" process.
type wWorker struct {
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	done   chan struct{}
	err    error // Wait's result, valid after done
}

func wStartWorker(t *testing.T, args ...string) *wWorker {
	t.Helper()
	cmd := newCmd(context.Background(), append([]string{"worker"}, args...)...)
	w := &wWorker{cmd: cmd, stderr: &testenv.Buffer{}, done: make(chan struct{})}
	cmd.Stdout = w.stderr
	cmd.Stderr = w.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		if !w.exited() {
			cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker stderr:\n%s", clip(w.stderr.String()))
		}
	})
	return w
}

func (w *wWorker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and returns the exit status (-1 for a signal), or
// fails t when the worker is still running after timeout.
func (w *wWorker) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.cmd.Process.Kill()
		<-w.done
		t.Fatalf("worker still running %v after SIGTERM", timeout)
	}
	var ee *exec.ExitError
	switch {
	case w.err == nil:
		return 0
	case errors.As(w.err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// wFreeAddr returns a loopback address with a port that was free a moment
// ago.
func wFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func wWriteFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
