package handler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// Exec output limits: the tail of stderr that goes into errors, and of
// stdout that is logged at debug level.
const (
	stderrTail = 1 << 10
	stdoutTail = 1 << 10
)

// waitDelay is how long Exec waits, after the command exited or was
// killed, for processes it left behind to close stderr.
const waitDelay = 2 * time.Second

// Exec returns a handler that runs argv (program and arguments, no shell)
// for each delivery in a process group of its own, with the body on
// stdin and EnvTopic, EnvID, EnvAttempt and EnvDue (and, in a trace,
// EnvTraceparent) added to the environment. Exit status 0 acks; otherwise the error is "exit status N:
// <last KiB of stderr>". When the delivery's context ends first, the whole
// process group is killed and the error says "timed out" (or
// "cancelled"). Stdout is logged to log at debug level.
func Exec(argv []string, log *slog.Logger) (delayq.Handler, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("exec handler: empty command")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("exec handler: %w", err)
	}
	x := &command{path: path, argv: append([]string(nil), argv...), log: log.With("component", "exec", "command", argv[0])}
	return x.handle, nil
}

type command struct {
	path string
	argv []string
	log  *slog.Logger
}

func (x *command) handle(ctx context.Context, d *delayq.Delivery) error {
	cmd := exec.CommandContext(ctx, x.path, x.argv[1:]...)
	cmd.Args[0] = x.argv[0]
	cmd.Stdin = bytes.NewReader(d.Body)
	cmd.Env = append(os.Environ(),
		EnvTopic+"="+d.Topic,
		EnvID+"="+d.ID,
		EnvAttempt+"="+formatAttempt(d.Attempt),
		EnvDue+"="+formatDue(d.Due),
	)
	cmd.Env = append(cmd.Env, traceEnv(ctx)...)
	stderr := &tail{max: stderrTail}
	cmd.Stderr = stderr
	var stdout *tail
	if x.log.Enabled(ctx, slog.LevelDebug) {
		stdout = &tail{max: stdoutTail}
		cmd.Stdout = stdout
	} // else /dev/null
	ownGroup(cmd)
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if stdout != nil && len(stdout.buf) > 0 {
		x.log.Debug("stdout", "topic", d.Topic, "id", d.ID, "attempt", d.Attempt, "tail", stdout.String())
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited 0, but something it started kept stderr open.
		x.log.Debug("a process left behind kept stderr open", "topic", d.Topic, "id", d.ID)
		err = nil
	}
	if err == nil {
		return nil
	}
	suffix := ""
	if s := stderr.String(); s != "" {
		suffix = ": " + s
	}
	if ctx.Err() != nil {
		what := "timed out"
		if errors.Is(ctx.Err(), context.Canceled) {
			what = "cancelled"
		}
		pid := 0
		if cmd.Process != nil {
			pid = cmd.Process.Pid
		}
		return fmt.Errorf("%s: killed %s (process group %d)%s", what, x.argv[0], pid, suffix)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%v%s", ee, suffix)
	}
	return fmt.Errorf("run %s: %w", x.argv[0], err)
}

// tail is an io.Writer that keeps the last max bytes written.
type tail struct {
	max int
	buf []byte
	cut bool // bytes were dropped from the front
}

// Write keeps the end of p.
func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p, t.cut = p[len(p)-t.max:], true
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return n, nil
}

// String returns the kept bytes as trimmed valid UTF-8, starting with
// "..." when the front was dropped.
func (t *tail) String() string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "?"))
	if t.cut && s != "" {
		s = "..." + s
	}
	return s
}
