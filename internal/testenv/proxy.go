package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PoolName is the name of the single nutcracker pool.
const PoolName = "delayq"

// statsInterval is nutcracker's stats aggregation interval (-i). Counters
// read through ProxyStats lag by up to this much.
const statsInterval = 100 * time.Millisecond

// proxyServer is nutcracker with its directory under Env.Dir.
type proxyServer struct {
	dir       string
	confPath  string
	logPath   string
	outPath   string
	backends  []string
	port      int
	statsPort int
	p         *proc
}

func newProxy(root string, i int, backends []string) (*proxyServer, error) {
	dir := filepath.Join(root, "proxy")
	if i > 0 {
		dir += strconv.Itoa(i)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &proxyServer{
		dir:      dir,
		confPath: filepath.Join(dir, "nutcracker.yml"),
		logPath:  filepath.Join(dir, "nutcracker.log"),
		outPath:  filepath.Join(dir, "stdout.log"),
		backends: backends,
	}, nil
}

func (x *proxyServer) addr() string { return "127.0.0.1:" + strconv.Itoa(x.port) }

// config renders the pool. No hash_tag on purpose: the design must be
// correct when the keys of one partition live on different backends.
// auto_eject_hosts is false as docs/proxies.md requires of deployments.
func (x *proxyServer) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", PoolName)
	fmt.Fprintf(&b, "  listen: 127.0.0.1:%d\n", x.port)
	b.WriteString("  hash: fnv1a_64\n")
	b.WriteString("  distribution: ketama\n")
	b.WriteString("  redis: true\n")
	b.WriteString("  auto_eject_hosts: false\n")
	b.WriteString("  timeout: 3000\n")
	b.WriteString("  server_retry_timeout: 1000\n")
	b.WriteString("  server_failure_limit: 3\n")
	b.WriteString("  preconnect: false\n")
	b.WriteString("  servers:\n")
	for i, s := range x.backends {
		fmt.Fprintf(&b, "   - %s:1 s%d\n", s, i)
	}
	return b.String()
}

// startFresh picks new ports (listen and stats) and starts nutcracker,
// retrying on new ports when it dies before being ready.
func (x *proxyServer) startFresh() error {
	var err error
	for try := 0; try < startTries; try++ {
		if x.port, err = freePort(); err != nil {
			return err
		}
		if x.statsPort, err = freePort(); err != nil {
			return err
		}
		if err = os.WriteFile(x.confPath, []byte(x.config()), 0o644); err != nil {
			return err
		}
		err = x.launch()
		if err == nil || !x.p.exited() {
			return err
		}
	}
	return err
}

func (x *proxyServer) startSame() error {
	if x.p != nil && !x.p.exited() {
		return fmt.Errorf("nutcracker is already running")
	}
	return x.launch()
}

// launch runs nutcracker at the default verbosity (5), which logs
// "parsed unsupported command" but not every request. The stats server gets
// its own port: the default 22222 would collide between parallel Envs.
func (x *proxyServer) launch() error {
	bin, err := lookBin("nutcracker")
	if err != nil {
		return fmt.Errorf("%s", missingMsg("nutcracker"))
	}
	p, err := startProc("nutcracker", x.dir, x.outPath, bin,
		"-c", x.confPath,
		"-o", x.logPath,
		"-v", "5",
		"-s", strconv.Itoa(x.statsPort),
		"-a", "127.0.0.1",
		"-i", strconv.Itoa(int(statsInterval/time.Millisecond)),
	)
	if err != nil {
		return err
	}
	x.p = p
	if err := waitReady(p, x.addr(), readyTimeout); err != nil {
		p.kill()
		return fmt.Errorf("%v%s", err, logTail(20, x.logPath, x.outPath))
	}
	return nil
}

func (x *proxyServer) kill() {
	if x.p != nil {
		x.p.kill()
	}
}

// proxyProblemMarkers are substrings of nutcracker 0.5.0 log lines that
// mean a client sent something the proxy rejected. Of these, the Debian
// build only logs "parsed unsupported command '<NAME>'" (nc_redis.c, at the
// default verbosity); "parsed bad req" lines come from debug builds or from
// keys that are empty or too long. A known command with an argument shape
// nutcracker does not accept (PING msg, EXPIRE k 10 NX, ...) closes the
// client connection WITHOUT any log line: use ProxyStats().ClientErr for
// those.
var proxyProblemMarkers = []string{
	"parsed unsupported command",
	"parsed bad req",
	"unsupported",
}

// ProxyLogProblems returns the lines of the nutcracker log (across
// restarts) that show a client-side protocol problem, such as
// "nc_redis.c:1324 parsed unsupported command 'KEYS'". Tests assert it is
// empty to prove no unsupported command was sent. It returns nil without a
// proxy.
func (e *Env) ProxyLogProblems() []string {
	if e.ProxyLog == "" {
		return nil
	}
	data, err := os.ReadFile(e.ProxyLog)
	if err != nil {
		return []string{"testenv: cannot read proxy log: " + err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, m := range proxyProblemMarkers {
			if strings.Contains(line, m) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// ProxyStats are nutcracker's pool-level counters, cumulative since the
// proxy (re)started and aggregated every 100ms, so they lag that much.
type ProxyStats struct {
	// ClientErr counts client connections closed on an error. Every
	// request nutcracker cannot parse or route (unknown command, known
	// command with an unsupported argument shape, inline command) closes the
	// connection and counts here. A client resetting its connection
	// (closing with unread replies) counts too.
	ClientErr int64 `json:"client_err"`
	// ClientEOF counts client connections closed normally by the client.
	ClientEOF int64 `json:"client_eof"`
	// ClientConnections is the number of open client connections.
	ClientConnections int64 `json:"client_connections"`
	// ForwardError counts requests that could not be forwarded to a
	// backend (for example while it is down).
	ForwardError int64 `json:"forward_error"`
	// ServerEjects counts backend ejections (always 0: auto_eject_hosts is
	// false).
	ServerEjects int64 `json:"server_ejects"`
}

// ProxyStats reads the pool counters from nutcracker's stats port.
func (e *Env) ProxyStats() (ProxyStats, error) {
	var st ProxyStats
	if e.proxy == nil {
		return st, fmt.Errorf("testenv: no proxy in this Env")
	}
	addr := "127.0.0.1:" + strconv.Itoa(e.proxy.statsPort)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return st, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return st, err
	}
	data, err := io.ReadAll(c) // the stats server writes one JSON object and closes
	if err != nil {
		return st, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return st, fmt.Errorf("testenv: bad nutcracker stats %q: %w", data, err)
	}
	pool, ok := top[PoolName]
	if !ok {
		return st, fmt.Errorf("testenv: no pool %q in nutcracker stats", PoolName)
	}
	if err := json.Unmarshal(pool, &st); err != nil {
		return st, err
	}
	return st, nil
}
