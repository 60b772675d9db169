package handler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/config"
)

func mustExec(t *testing.T, argv ...string) func(context.Context, string, int, string) error {
	t.Helper()
	h, err := New(config.Handler{Type: config.HandlerExec, Command: argv}, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, id string, attempt int, body string) error {
		return h(ctx, delivery(id, attempt, body))
	}
}

func TestExecAckAndEnv(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	h := mustExec(t, "sh", "-c",
		`printf '%s|%s|%s|%s|' "$DELAYQ_TOPIC" "$DELAYQ_ID" "$DELAYQ_ATTEMPT" "$DELAYQ_DUE" >"$1"; cat >>"$1"; printf '|%s' "$HOME" >>"$1"`,
		"sh", out)
	if err := h(context.Background(), "id-7", 3, "the body\nline 2"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "orders|id-7|3|2030-01-02T02:04:05.6Z|the body\nline 2|" + os.Getenv("HOME")
	if string(got) != want {
		t.Errorf("got  %q\nwant %q (variables, stdin, and the inherited environment)", got, want)
	}
}

// TestExecTraceparent: a delivery in a trace sets TRACEPARENT; one
// outside a trace leaves it as the worker's environment has it.
func TestExecTraceparent(t *testing.T) {
	t.Setenv(EnvTraceparent, "")
	out := filepath.Join(t.TempDir(), "out")
	h := mustExec(t, "sh", "-c", `printf '%s|' "$TRACEPARENT" >>"$1"`, "sh", out)
	if err := h(inTrace(t, context.Background()), "t", 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), "u", 1, ""); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := testTraceparent + "||"; string(got) != want {
		t.Errorf("TRACEPARENT of a delivery in a trace, then of one outside: %q, want %q", got, want)
	}
}

func TestExecExitStatus(t *testing.T) {
	h := mustExec(t, "sh", "-c", "cat >/dev/null; echo some output; echo 'it went wrong' >&2; exit 3")
	err := h(context.Background(), "x", 1, strings.Repeat("b", 1<<20)) // more than a pipe holds
	if err == nil || err.Error() != "exit status 3: it went wrong" {
		t.Errorf("got %v, want \"exit status 3: it went wrong\"", err)
	}
	h = mustExec(t, "sh", "-c", "exit 4")
	if err := h(context.Background(), "x", 1, ""); err == nil || err.Error() != "exit status 4" {
		t.Errorf("got %v, want \"exit status 4\"", err)
	}
	// A command that does not read its stdin still acks.
	h = mustExec(t, "true")
	if err := h(context.Background(), "x", 1, strings.Repeat("b", 1<<20)); err != nil {
		t.Errorf("true: %v", err)
	}
}

func TestExecStderrTail(t *testing.T) {
	h := mustExec(t, "sh", "-c", `i=0; while [ $i -lt 300 ]; do echo "line $i of noise" >&2; i=$((i+1)); done; echo "THE END" >&2; exit 1`)
	err := h(context.Background(), "x", 1, "")
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "exit status 1: ...") || !strings.HasSuffix(msg, "THE END") {
		t.Errorf("want the stderr tail after the status, got %q", msg)
	}
	if len(msg) > len("exit status 1: ...")+stderrTail {
		t.Errorf("error of %d bytes: more than the last KiB of stderr", len(msg))
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := mustExec(t, "sh", "-c", `sleep 30 & echo $! >"$1"; echo started >&2; sleep 30`, "sh", pidFile)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h(ctx, "slow", 1, "")
	took := time.Since(start)
	if err == nil || !strings.HasPrefix(err.Error(), "timed out: killed sh (process group ") || !strings.HasSuffix(err.Error(), ": started") {
		t.Errorf("got %v, want a timeout error with the stderr tail", err)
	}
	if took > 5*time.Second {
		t.Errorf("returned after %v", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the background child %d outlived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone reports whether process pid no longer runs (a zombie waiting for
// init to reap it counts as gone).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestExecCancelled(t *testing.T) {
	h := mustExec(t, "sleep", "30")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := h(ctx, "x", 1, "")
	if err == nil || !strings.HasPrefix(err.Error(), "cancelled: killed sleep") {
		t.Errorf("got %v", err)
	}
}

func TestExecBackgroundChildOnSuccess(t *testing.T) {
	// The command exits 0 at once but leaves a child holding stderr: the
	// delivery is acked after waitDelay, not after the child's 30 s.
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := mustExec(t, "sh", "-c", `sleep 30 & echo $! >"$1"; exit 0`, "sh", pidFile)
	start := time.Now()
	if err := h(context.Background(), "x", 1, ""); err != nil {
		t.Errorf("got %v, want an ack", err)
	}
	if took := time.Since(start); took > waitDelay+3*time.Second {
		t.Errorf("took %v", took)
	}
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestExecStdoutLoggedAtDebug(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := New(config.Handler{Type: config.HandlerExec, Command: []string{"echo", "hello from stdout"}}, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), delivery("x", 1, "")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "hello from stdout") {
		t.Errorf("stdout not logged at debug: %s", logs.String())
	}
}

func TestExecNotFound(t *testing.T) {
	_, err := New(config.Handler{Type: config.HandlerExec, Command: []string{"no-such-program-delayq"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "no-such-program-delayq") {
		t.Errorf("got %v", err)
	}
	if _, err := Exec(nil, quiet); err == nil {
		t.Error("empty command accepted")
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 5}
	tl.Write([]byte("ab"))
	if tl.String() != "ab" {
		t.Errorf("%q", tl.String())
	}
	tl.Write([]byte("cdef"))
	if tl.String() != "...bcdef" {
		t.Errorf("%q", tl.String())
	}
	tl.Write([]byte("0123456789"))
	if tl.String() != "...56789" || len(tl.buf) != 5 {
		t.Errorf("%q", tl.String())
	}
	tl = &tail{max: 3}
	tl.Write([]byte{'a', 0xff, 'b'})
	if tl.String() != "a?b" {
		t.Errorf("invalid UTF-8: %q", tl.String())
	}
}
