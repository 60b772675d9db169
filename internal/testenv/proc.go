package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/delayq/delayq/internal/portable"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process we hold (never daemonized), in its own process
// group so that signals aimed at it do not reach the test binary and
// terminal signals aimed at the test do not reach it.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, valid after done is closed
}

// startProc starts bin with args in dir, with stdout and stderr appended to
// outPath (servers print some startup errors there before their log opens).
func startProc(name, dir, outPath, bin string, args ...string) (*proc, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy after Start
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := startCmd(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited (and was reaped).
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group of p; errors (already gone) are
// ignored.
func (p *proc) signal(sig syscall.Signal) {
	if p.exited() {
		return
	}
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil {
		_ = syscall.Kill(pid, sig)
	}
}

// kill sends SIGKILL and waits until the process has been reaped.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stopAll sends SIGTERM to every process, waits up to grace for all of them,
// then SIGKILLs the survivors and waits for them.
func stopAll(ps []*proc, grace time.Duration) {
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
		case <-deadline.C:
			// Grace is over: kill this one and all that remain.
			for _, q := range ps {
				q.signal(syscall.SIGKILL)
			}
			deadline.Reset(time.Hour)
			<-p.done
		}
	}
	for _, p := range ps {
		<-p.done
	}
}

// waitReady polls addr with a RESP PING until it answers +PONG, the process
// exits, or timeout passes. A server still loading its data set answers
// -LOADING and is polled again.
func waitReady(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready: %v", p.name, p.err)
		}
		// A server that wants a password answers NOAUTH: it is up.
		if last = Ping(addr); last == nil || strings.Contains(last.Error(), `"-NOAUTH`) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready on %s after %v: %v", p.name, addr, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ping opens a raw TCP connection to addr, sends PING as a RESP array (the
// inline form "PING\r\n" is rejected by nutcracker, which closes the
// connection) and returns nil only if the reply is +PONG. Note that
// nutcracker answers PING itself, without contacting a backend.
func Ping(addr string) error {
	reply, err := Do(addr, "PING")
	if err != nil {
		return err
	}
	if reply != "+PONG" {
		return fmt.Errorf("PING %s: got %q", addr, reply)
	}
	return nil
}

// Do sends one command as a RESP array over a new raw TCP connection to
// addr and returns the first line of the reply, plus the payload of a bulk
// string reply: "+OK", "-ERR ...", ":1", "$v" for bulk "v", "$nil" for a
// nil bulk. Arrays are returned as their header only ("*3"). It is meant
// for probing servers in tests, not as a client.
//
// Like every connection of the project, it sends only commands of the
// portable set (see package portable), and records them in the audit log.
func Do(addr string, args ...string) (string, error) {
	if len(args) == 0 {
		return "", fmt.Errorf("testenv.Do: no command")
	}
	rest := make([]any, len(args)-1)
	for i, a := range args[1:] {
		rest[i] = a
	}
	shape, err := portable.Check(args[0], rest...)
	portable.Record(shape, err)
	if err != nil {
		return "", err
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.Write(EncodeCommand(args...)); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("%s to %s: read: %w (connection closed by server?)", args[0], addr, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line, nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return "", fmt.Errorf("bad bulk header %q", line)
	}
	if n < 0 {
		return "$nil", nil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return "$" + string(buf[:n]), nil
}

// EncodeCommand returns args encoded as a RESP array of bulk strings.
func EncodeCommand(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

var (
	portMu sync.Mutex
	// portsGiven remembers ports handed out by this process, so that two
	// Envs in parallel tests never get the same one, even after a server
	// releases it during a restart.
	portsGiven = map[int]bool{}
)

// freePort returns a loopback TCP port nobody listens on right now. The
// caller must still cope with a race (another process may take it before
// the server binds it): see startTries.
func freePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port found")
}

// logTail returns the last n lines of each existing file in paths, for
// error messages.
func logTail(n int, paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", p, strings.Join(lines, "\n"))
	}
	return b.String()
}
