package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/testenv"
)

// writeWorkerConfig writes a config file and returns its path.
func writeWorkerConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "worker.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const workerExecTopic = `
[[topic]]
name = "w"
[topic.handler]
type = "exec"
command = ["true"]
`

func TestWorkerConfigFlags(t *testing.T) {
	p := writeWorkerConfig(t, "[redis]\naddr = \"file:1\"\n[http]\nlisten = \"127.0.0.1:1\"\n"+workerExecTopic)
	cfg, err := workerConfig([]string{"--config", p}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Addr != "file:1" || cfg.HTTP.Listen != "127.0.0.1:1" || cfg.Log.Level != "info" || len(cfg.Topics) != 1 {
		t.Errorf("from the file: %+v", cfg)
	}
	// Flags override the file, and --listen "" turns the API off.
	cfg, err = workerConfig([]string{"--config", p, "--addr", "flag:2", "--cluster", "--listen", "", "--log-level", "debug", "--lease", "3s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Addr != "flag:2" || !cfg.Redis.Cluster || cfg.HTTP.Listen != "" || cfg.Log.Level != "debug" || cfg.Worker.Lease != 3*time.Second {
		t.Errorf("flags did not override: %+v %+v %+v", cfg.Redis, cfg.HTTP, cfg.Log)
	}
	// Without --config: the defaults, which need at least --listen.
	if cfg, err = workerConfig([]string{"--listen", "127.0.0.1:0"}, io.Discard); err != nil || cfg.Redis.Addr != config.DefaultAddr {
		t.Errorf("defaults with --listen: %v %+v", err, cfg)
	}

	var out bytes.Buffer
	if _, err := workerConfig([]string{"-h"}, &out); !errors.Is(err, errHelp) || !strings.Contains(out.String(), "-config") {
		t.Errorf("-h: %v\n%s", err, out.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", p, "--addr", "nope"}, `invalid value "nope" for flag --addr: "nope" is not host:port`},
		{[]string{"--config", p, "--log-level", "loud"}, `invalid value "loud" for flag --log-level`},
		{[]string{"--config", p, "--listen", "x"}, `flag --listen`},
		{[]string{"--config", p, "--lease", "soon"}, `invalid value "soon" for flag --lease`},
		{[]string{"--config", p, "--lease", "1ms"}, `flag --lease`},
		{[]string{"--config", p, "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "bogus"},
		{nil, "nothing to do"},
	} {
		_, err := workerConfig(tc.args, io.Discard)
		checkUsageError(t, tc.args, err, tc.want)
	}
}

func TestWorkerBadConfig(t *testing.T) {
	p := writeWorkerConfig(t, "[worker]\nid = \"w\"\n\npolll_interval = \"1s\"\n")
	_, stderr, err := runArgs(t, "worker", "--config", p)
	var ue *usageError
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("got %v, want a plain error (exit 1)", err)
	}
	want := `unknown key "polll_interval" in [worker] at worker.toml line 4`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want %q", err, want)
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
	p = writeWorkerConfig(t, "[[topic]]\nname = \"x\"\n[topic.handler]\ntype = \"exec\"\ncommand = [\"no-such-program-delayq\"]\n")
	if _, _, err := runArgs(t, "worker", "--config", p); err == nil || !strings.Contains(err.Error(), "topic x") || !strings.Contains(err.Error(), "no-such-program-delayq") {
		t.Errorf("missing program: %v", err)
	}
}

// runningWorker is a worker startWorker started.
type runningWorker struct {
	cfg    *config.Config
	w      *worker
	logs   *testenv.Buffer
	base   string // http://host:port of its [http] listen
	ctx    context.Context
	cancel context.CancelFunc // stops it; done then gets run's error
	done   chan error
}

// startWorker runs the worker of the config file at path, in this process,
// until the test ends or its cancel is called, and waits for its start log.
func startWorker(t *testing.T, path string) *runningWorker {
	t.Helper()
	rw := launchWorker(t, path)
	testenv.WaitFor(t, 10*time.Second, "the worker's start log", func() bool {
		if l := workerLogValue(rw.logs.String(), "worker started", "listen"); l != "" {
			rw.base = "http://" + l
			return true
		}
		return false
	})
	return rw
}

// launchWorker runs the worker of the config file at path, in this
// process, until the test ends or its cancel is called.
func launchWorker(t *testing.T, path string) *runningWorker {
	t.Helper()
	cfg, err := workerConfig([]string{"--config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rw := &runningWorker{cfg: cfg, logs: &testenv.Buffer{}, done: make(chan error, 1)}
	rw.w, err = newWorker(cfg, newWorkerLogger(rw.logs, cfg.Log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.w.close)
	rw.ctx, rw.cancel = context.WithCancel(context.Background())
	t.Cleanup(rw.cancel)
	go func() { rw.done <- rw.w.run(rw.ctx) }()
	return rw
}

// stopRun cancels a command run by a test and fails t unless the run
// returns nil within d.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan error, d time.Duration) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("run did not return within %v of cancel", d)
	}
}

// workerLogValue returns the value of key in the first JSON log line whose
// msg is msg, or "".
func workerLogValue(logs, msg, key string) string {
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			if v, ok := m[key]; ok {
				return fmt.Sprint(v)
			}
		}
	}
	return ""
}

// TestWorkerRun runs the worker in process against a real Redis: an exec
// topic is delivered, the API enqueues with its token, /readyz and
// /metrics answer, and cancelling the context stops everything.
func TestWorkerRun(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	p := writeWorkerConfig(t, fmt.Sprintf(`
[redis]
addr = %q
namespace = "wt"
[worker]
id = "unit"
lease = "1s"
poll_interval = "100ms"
shutdown_timeout = "2s"
[http]
listen = "127.0.0.1:0"
token = "s3cret"
[log]
format = "json"
level = "debug"
[[topic]]
name = "jobs"
partitions = 4
backoff = ["100ms"]
on_duplicate = "debounce"
max_wait = "30m"
[topic.handler]
type = "exec"
command = ["sh", "-c", 'printf "%%s=%%s\n" "$DELAYQ_ID" "$(cat)" >>"$1"', "sh", %q]
`, env.Backends[0], out))
	rw := startWorker(t, p)
	cfg, w, logs, base, ctx, cancel, done := rw.cfg, rw.w, rw.logs, rw.base, rw.ctx, rw.cancel, rw.done
	get := func(path string, token string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testenv.WaitFor(t, 10*time.Second, "/readyz 200", func() bool { c, _ := get("/readyz", ""); return c == 200 })

	// Enqueue through the API (with the token), and directly.
	post := func(token, body string) int {
		req, _ := http.NewRequest("POST", base+"/v1/topics/jobs/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("", `{"id":"api-1","body":"x"}`); c != http.StatusUnauthorized {
		t.Errorf("enqueue without the token: %d, want 401", c)
	}
	if c := post("s3cret", `{"id":"api-1","body":"from the api","delay":"200ms"}`); c != http.StatusCreated {
		t.Fatalf("enqueue: %d", c)
	}
	cl, err := delayq.New(delayq.Options{Addr: env.Backends[0], Namespace: "wt", Partitions: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Send(ctx, delayq.Message{Topic: "jobs", ID: "direct-1", Body: []byte("direct")}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "both deliveries in "+out, func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "api-1=from the api\n") && strings.Contains(string(b), "direct-1=direct\n")
	})

	// An id that exists: jobs debounces it by default, within 30 minutes
	// of the first event; other, not in the config, rejects it.
	postTo := func(topic, body string) (int, map[string]string) {
		req, _ := http.NewRequest("POST", base+"/v1/topics/"+topic+"/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var reply map[string]string
		json.NewDecoder(resp.Body).Decode(&reply)
		return resp.StatusCode, reply
	}
	first := time.Now().Truncate(time.Millisecond) // due times are stored in milliseconds
	if c, reply := postTo("jobs", `{"id":"o-1","body":"x","delay":"1h"}`); c != http.StatusCreated || reply["outcome"] != "created" {
		t.Errorf("enqueue to jobs again: %d %v", c, reply)
	}
	c, reply := postTo("jobs", `{"id":"o-1","body":"y","delay":"2h"}`)
	due, _ := time.Parse(time.RFC3339Nano, reply["due"])
	if c != http.StatusOK || reply["outcome"] != "debounced" || due.Before(first.Add(30*time.Minute)) || due.After(time.Now().Add(30*time.Minute)) {
		t.Errorf("the same id to jobs, whose default is to debounce within 30m: %d %v; want 200, debounced, due 30m after the first", c, reply)
	}
	// An unconfigured topic goes through the fallback client, and has no default.
	if c, reply := postTo("other", `{"id":"o","delay":"1h"}`); c != http.StatusCreated {
		t.Errorf("enqueue to an unconfigured topic: %d %v", c, reply)
	}
	if c, reply := postTo("other", `{"id":"o","delay":"2h"}`); c != http.StatusConflict || reply["outcome"] != "rejected" {
		t.Errorf("the same id to an unconfigured topic: %d %v; want 409 rejected", c, reply)
	}

	testenv.WaitFor(t, 5*time.Second, "delivery metrics", func() bool {
		_, m := get("/metrics", "")
		return strings.Contains(m, `delayq_lateness_seconds_count{topic="jobs"} 2`) &&
			strings.Contains(m, `delayq_handler_duration_seconds_count{result="ok",topic="jobs"} 2`)
	})
	if c, m := get("/metrics", ""); c != 200 || !strings.Contains(m, "go_goroutines") {
		t.Errorf("/metrics: %d, no Go collector", c)
	} else if want := fmt.Sprintf(`delayq_proxy_up{addr=%q} 1`, env.Backends[0]); !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if c, body := get("/readyz", ""); c != 200 || !strings.Contains(body, fmt.Sprintf(`"proxies":[{"addr":%q,"up":true}]`, env.Backends[0])) {
		t.Errorf("/readyz: %d %s, want ready with the one address up", c, body)
	}
	if err := w.ready(ctx); err != nil {
		t.Errorf("ready: %v", err)
	}

	stopRun(t, cancel, done, cfg.Worker.ShutdownTimeout+5*time.Second)
	if err := w.ready(context.Background()); err == nil {
		t.Error("ready after shutdown")
	}
	for _, msg := range []string{"worker started", "worker stopping", "worker stopped"} {
		if !strings.Contains(logs.String(), `"msg":"`+msg+`"`) {
			t.Errorf("no %q log", msg)
		}
	}
}

// TestWorkerUsesStoredPartitionCount: a worker whose config gives a topic
// another partition count than the one stored consumes it with the stored
// count, and warns, naming both.
func TestWorkerUsesStoredPartitionCount(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	cl, err := delayq.New(delayq.Options{Addr: env.Backends[0], Partitions: 8, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Send(context.Background(), delayq.Message{Topic: "eight", ID: "a", Body: []byte("from eight")}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "delivered")
	p := writeWorkerConfig(t, fmt.Sprintf("[redis]\naddr = %q\n[http]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n[worker]\nshutdown_timeout = \"1s\"\n"+
		"[[topic]]\nname = \"eight\"\npartitions = 16\n[topic.handler]\ntype = \"exec\"\ncommand = [\"sh\", \"-c\", \"cat >> %s\"]\n", env.Backends[0], out))
	rw := startWorker(t, p)
	testenv.WaitFor(t, 10*time.Second, "the message delivered", func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == "from eight"
	})
	logs := rw.logs.String()
	const warn = "topic has another partition count than configured: using the stored count"
	if workerLogValue(logs, warn, "stored") != "8" || workerLogValue(logs, warn, "configured") != "16" {
		t.Errorf("no warning naming 8 stored and 16 configured:\n%s", logs)
	}
	if n, err := cl.Inspector().Partitions(context.Background(), "eight"); err != nil || n.Count != 8 {
		t.Errorf("stored count after the worker ran: %+v, %v; want 8", n, err)
	}
	stopRun(t, rw.cancel, rw.done, 10*time.Second)
}

// TestWorkerWithoutTopics: a worker whose config has no [[topic]] but an
// [http] listen address serves the API and says, at warn level, that it
// delivers nothing; its start line gives a dashboard URL a browser on
// this machine opens (localhost for every interface).
func TestWorkerWithoutTopics(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	p := writeWorkerConfig(t, fmt.Sprintf(`
[redis]
addr = %q
[worker]
shutdown_timeout = "2s"
[http]
listen = ":0"
token = "tok"
[log]
format = "json"
level = "warn"
`, env.Backends[0]))
	rw := launchWorker(t, p)
	testenv.WaitFor(t, 10*time.Second, "the warning that nothing is delivered", func() bool {
		for _, line := range strings.Split(rw.logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["level"] == "WARN" && strings.Contains(fmt.Sprint(m["msg"]), "no [[topic]]") {
				return strings.Contains(fmt.Sprint(m["msg"]), "delivers nothing")
			}
		}
		return false
	})
	stopRun(t, rw.cancel, rw.done, rw.cfg.Worker.ShutdownTimeout+5*time.Second)
	// At the default level, the start line names the dashboard's URL.
	p = writeWorkerConfig(t, fmt.Sprintf("[redis]\naddr = %q\n[worker]\nshutdown_timeout = \"2s\"\n[http]\nlisten = \":0\"\ntoken = \"tok\"\n[log]\nformat = \"json\"\n", env.Backends[0]))
	rw = startWorker(t, p)
	url := workerLogValue(rw.logs.String(), "worker started", "dashboard")
	if !regexp.MustCompile(`^http://localhost:[0-9]+/ui/$`).MatchString(url) {
		t.Errorf("worker started: dashboard %q, want http://localhost:PORT/ui/\n%s", url, rw.logs.String())
	}
	if code, _, _ := fetch(t, dashboardClient(), url); code != http.StatusSeeOther {
		t.Errorf("GET %s: %d, want the sign-in redirect", url, code)
	}
	stopRun(t, rw.cancel, rw.done, rw.cfg.Worker.ShutdownTimeout+5*time.Second)
}
