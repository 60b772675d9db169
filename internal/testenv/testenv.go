package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DefaultBackends is the number of redis-server processes started when
// Options.Backends is zero.
const DefaultBackends = 3

// SpawnerFunc is the function of the one goroutine testenv keeps for the
// whole process on purpose (it spawns servers from a locked OS thread so
// that they die with the test binary): leak checks ignore it, e.g.
// goleak.IgnoreTopFunction(testenv.SpawnerFunc).
const SpawnerFunc = "github.com/delayq/delayq/internal/testenv.startCmd.func1.1"

// readyTimeout bounds how long a freshly started server may take to accept
// connections and answer PING with +PONG.
const readyTimeout = 15 * time.Second

// stopGrace is how long Stop waits after SIGTERM before sending SIGKILL.
const stopGrace = 5 * time.Second

// startTries is how many times an initial start is attempted, each time on
// new ports, when the process dies before it is ready (port races).
const startTries = 3

// Options selects the topology. The zero value means DefaultBackends
// backends without persistence, behind one nutcracker.
type Options struct {
	// Backends is the number of redis-server processes (default 3).
	Backends int
	// AppendOnly turns on "appendonly yes" (with "appendfsync always"), so
	// that data survives RestartBackend, which kills with SIGKILL.
	AppendOnly bool
	// NoProxy skips starting nutcracker; Env.Proxy is then "".
	NoProxy bool
	// Proxies is the number of nutcracker processes in front of the same
	// backends (default 1), as a deployment runs several.
	Proxies int
	// Password, when set, is each backend's requirepass. The proxy does
	// not know it: a client's AUTH reaches no backend through it, so its
	// commands are answered NOAUTH.
	Password string
}

// Env is a running set of servers. Its exported fields are fixed for the
// life of the Env: restarts reuse the same ports and directories.
type Env struct {
	// Dir is the root directory holding one sub-directory per server.
	Dir string
	// Backends holds "127.0.0.1:port" of each redis-server.
	Backends []string
	// Proxy is "127.0.0.1:port" of nutcracker, or "" with NoProxy: the
	// first of Proxies.
	Proxy string
	// Proxies holds the address of each nutcracker (Options.Proxies).
	Proxies []string
	// ProxyLog is the path of nutcracker's log file ("" with NoProxy). It
	// is appended to across proxy restarts.
	ProxyLog string

	opts     Options
	ownDir   bool // Stop removes Dir (StartDaemon with dir == "")
	mu       sync.Mutex
	backends []*backend
	proxy    *proxyServer
	proxies  []*proxyServer
	stopped  bool
}

// Target names an address a suite can run against.
type Target struct {
	// Name is "direct" or "twemproxy"; suitable for t.Run.
	Name string
	// Addr is "127.0.0.1:port".
	Addr string
}

// Start starts the servers described by o in a test temporary directory,
// waits until each answers PING, and registers a tb.Cleanup that stops them
// all. On failure it calls tb.Fatal with the tail of the failing server's
// log. Missing binaries are a failure, not a skip (see Require).
func Start(tb testing.TB, o Options) *Env {
	tb.Helper()
	requireBins(tb, !o.NoProxy)
	dir := tb.TempDir() // registered first, so removed after Stop runs
	e, err := start(dir, o)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(e.Stop)
	return e
}

// StartDaemon is Start without a testing.TB, for demo and benchmark
// programs. The servers live under dir (created if missing); with dir ""
// a new temporary directory is made and Stop removes it. The caller must
// call Stop.
func StartDaemon(dir string, o Options) (*Env, error) {
	if _, err := lookBin("redis-server"); err != nil {
		return nil, errors.New(missingMsg("redis-server"))
	}
	if !o.NoProxy {
		if _, err := lookBin("nutcracker"); err != nil {
			return nil, errors.New(missingMsg("nutcracker"))
		}
	}
	own := false
	if dir == "" {
		d, err := os.MkdirTemp("", "delayq-testenv-")
		if err != nil {
			return nil, err
		}
		dir, own = d, true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e, err := start(dir, o)
	if err != nil {
		if own {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	e.ownDir = own
	return e, nil
}

// start launches the backends, then the proxy pointing at them. On error
// everything already started is stopped.
func start(dir string, o Options) (*Env, error) {
	if o.Backends < 0 {
		return nil, fmt.Errorf("Options.Backends = %d, want >= 0", o.Backends)
	}
	if o.Backends == 0 {
		o.Backends = DefaultBackends
	}
	e := &Env{Dir: dir, opts: o}
	for i := 0; i < o.Backends; i++ {
		b, err := newBackend(dir, i, o.AppendOnly)
		if err == nil {
			b.password = o.Password
		}
		if err != nil {
			e.Stop()
			return nil, err
		}
		e.backends = append(e.backends, b)
		if err := b.startFresh(); err != nil {
			e.Stop()
			return nil, err
		}
		e.Backends = append(e.Backends, b.addr())
	}
	if !o.NoProxy {
		for i := range max(o.Proxies, 1) {
			p, err := newProxy(dir, i, e.Backends)
			if err != nil {
				e.Stop()
				return nil, err
			}
			e.proxies = append(e.proxies, p)
			if err := p.startFresh(); err != nil {
				e.Stop()
				return nil, err
			}
			e.Proxies = append(e.Proxies, p.addr())
		}
		e.proxy = e.proxies[0]
		e.Proxy = e.proxy.addr()
		e.ProxyLog = e.proxy.logPath
	}
	return e, nil
}

// Stop terminates every process (SIGTERM, then SIGKILL after 5s) and waits
// for all of them to exit. It is safe to call more than once.
func (e *Env) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	var ps []*proc
	for _, x := range e.proxies {
		if x.p != nil {
			ps = append(ps, x.p)
		}
	}
	for _, b := range e.backends {
		if b.p != nil {
			ps = append(ps, b.p)
		}
	}
	stopAll(ps, stopGrace)
	if e.ownDir {
		os.RemoveAll(e.Dir)
	}
}

// Targets lists the addresses to run a suite against: "direct" (the first
// backend) and, when a proxy runs, "twemproxy".
func (e *Env) Targets() []Target {
	var ts []Target
	if len(e.Backends) > 0 {
		ts = append(ts, Target{Name: "direct", Addr: e.Backends[0]})
	}
	if e.Proxy != "" {
		ts = append(ts, Target{Name: "twemproxy", Addr: e.Proxy})
	}
	return ts
}

// Require fails tb (it does not skip) when redis-server or nutcracker is
// not installed, with a message saying how to install them.
func Require(tb testing.TB) {
	tb.Helper()
	requireBins(tb, true)
}

func requireBins(tb testing.TB, proxy bool) {
	tb.Helper()
	names := []string{"redis-server"}
	if proxy {
		names = append(names, "nutcracker")
	}
	for _, n := range names {
		if _, err := lookBin(n); err != nil {
			tb.Fatal(missingMsg(n))
		}
	}
}

func missingMsg(name string) string {
	return name + " not found: run `make deps` (apt-get install redis-server nutcracker)"
}

// lookBin finds a server binary on PATH or in the usual Debian places
// (nutcracker lives in /usr/sbin, which is often not on a user's PATH).
func lookBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// StopProxy kills nutcracker with SIGKILL and waits for it to exit.
func (e *Env) StopProxy(tb testing.TB) {
	tb.Helper()
	p := e.proxyOrFatal(tb)
	e.mu.Lock()
	defer e.mu.Unlock()
	p.kill()
}

// StartProxy starts nutcracker again on the same port and configuration
// and waits until it answers PING. The proxy must be stopped.
func (e *Env) StartProxy(tb testing.TB) {
	tb.Helper()
	p := e.proxyOrFatal(tb)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		tb.Fatal("testenv: Env already stopped")
	}
	if err := p.startSame(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

// StopProxyN kills nutcracker i (of Options.Proxies) with SIGKILL and
// waits for it to exit.
func (e *Env) StopProxyN(tb testing.TB, i int) {
	tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if i < 0 || i >= len(e.proxies) {
		tb.Fatalf("testenv: no proxy %d", i)
	}
	e.proxies[i].kill()
}

// StartProxyN starts nutcracker i again on the same port and waits until
// it answers PING.
func (e *Env) StartProxyN(tb testing.TB, i int) {
	tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if i < 0 || i >= len(e.proxies) {
		tb.Fatalf("testenv: no proxy %d", i)
	}
	if e.stopped {
		tb.Fatal("testenv: Env already stopped")
	}
	if err := e.proxies[i].startSame(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

// RestartProxy is StopProxy followed by StartProxy: a hard proxy fault.
func (e *Env) RestartProxy(tb testing.TB) {
	tb.Helper()
	e.StopProxy(tb)
	e.StartProxy(tb)
}

// StopBackend kills backend i with SIGKILL (a real fault: no shutdown
// save) and waits for it to exit.
func (e *Env) StopBackend(tb testing.TB, i int) {
	tb.Helper()
	b := e.backendOrFatal(tb, i)
	e.mu.Lock()
	defer e.mu.Unlock()
	b.kill()
}

// StartBackend starts backend i again on the same port and directory and
// waits until it has finished loading (PING answers +PONG).
func (e *Env) StartBackend(tb testing.TB, i int) {
	tb.Helper()
	b := e.backendOrFatal(tb, i)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		tb.Fatal("testenv: Env already stopped")
	}
	if err := b.startSame(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

// PauseBackend stops backend i with SIGSTOP: it keeps its connections
// but answers nothing until ResumeBackend, like a server stuck in a long
// command or swapped out.
func (e *Env) PauseBackend(tb testing.TB, i int) {
	tb.Helper()
	e.signalBackend(tb, i, syscall.SIGSTOP)
}

// ResumeBackend continues backend i after PauseBackend (SIGCONT).
func (e *Env) ResumeBackend(tb testing.TB, i int) {
	tb.Helper()
	e.signalBackend(tb, i, syscall.SIGCONT)
}

func (e *Env) signalBackend(tb testing.TB, i int, sig syscall.Signal) {
	tb.Helper()
	b := e.backendOrFatal(tb, i)
	e.mu.Lock()
	defer e.mu.Unlock()
	b.p.signal(sig)
}

// RestartBackend is StopBackend followed by StartBackend. With
// Options.AppendOnly every acknowledged write survives it.
func (e *Env) RestartBackend(tb testing.TB, i int) {
	tb.Helper()
	e.StopBackend(tb, i)
	e.StartBackend(tb, i)
}

func (e *Env) proxyOrFatal(tb testing.TB) *proxyServer {
	tb.Helper()
	if e.proxy == nil {
		tb.Fatal("testenv: no proxy in this Env (Options.NoProxy)")
	}
	return e.proxy
}

func (e *Env) backendOrFatal(tb testing.TB, i int) *backend {
	tb.Helper()
	if i < 0 || i >= len(e.backends) {
		tb.Fatalf("testenv: backend %d out of range [0,%d)", i, len(e.backends))
	}
	return e.backends[i]
}

// WaitFor polls cond every 10ms until it holds, and fails tb if it does
// not within d; what names the condition in the failure.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(d, cond) {
		tb.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Poll polls cond every 10ms until it holds (true) or d passes (false).
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Buffer is a bytes.Buffer safe for concurrent writers and readers, for
// logs and process output that tests read while they are written.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Figure logs a test's measured figures as a "FIGURE ..." line and, when
// $DELAYQ_FIGURES names a file, appends the line to it, with the test's
// name: "make test" prints that file at its end, since go test shows a
// passing test's logs only with -v.
func Figure(tb testing.TB, format string, args ...any) {
	tb.Helper()
	line := "FIGURE " + fmt.Sprintf(format, args...)
	tb.Log(line)
	path := os.Getenv("DELAYQ_FIGURES")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Errorf("figures file: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s: %s\n", tb.Name(), line); err != nil {
		tb.Errorf("figures file: %v", err)
	}
}
