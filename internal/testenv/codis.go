package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CodisBinEnv names the environment variable that holds the folder of
// the Codis 3.2 binaries (codis-server, codis-proxy, codis-dashboard,
// codis-admin) for StartCodis. Without it, StartCodis builds them with
// ../shared/codis/build.sh when that script sits beside the project.
const CodisBinEnv = "DELAYQ_CODIS_BIN"

// CodisRequiredEnv, set to 1, makes StartCodis fail rather than skip
// when no Codis binaries can be found (CI sets it).
const CodisRequiredEnv = "DELAYQ_CODIS_REQUIRED"

// codisProduct is the product name of every test cluster.
const codisProduct = "delayq-test"

// codisSlots is the number of slots of a Codis 3.2 cluster.
const codisSlots = 1024

// CodisOptions selects a Codis cluster's topology.
type CodisOptions struct {
	// Groups is the number of server groups (default 2); the slots are
	// split evenly between them.
	Groups int
	// Replicas gives every group a replica of its master, synced before
	// StartCodis returns.
	Replicas bool
	// Proxies is the number of codis-proxy processes (default 1).
	Proxies int
}

// Codis is a running Codis 3.2 cluster on loopback: codis-server groups,
// a codis-dashboard on a filesystem coordinator and codis-proxy
// processes, set up as a deployment is (see ../shared/codis/README.md).
type Codis struct {
	// Proxies holds the client address of each codis-proxy.
	Proxies []string
	// Groups holds, per group (group id i+1), the addresses of its
	// servers as added: the master at start first, then its replica.
	Groups [][]string

	dir       string
	bin       string
	dashboard string // admin address
	admins    []string
	mu        sync.Mutex
	procs     map[string]*proc // by address: servers and proxies
	dash      *proc
	stopped   bool
}

var (
	codisOnce sync.Once
	codisBin  string
	codisErr  error
)

// CodisBin returns the folder of the Codis binaries: $DELAYQ_CODIS_BIN,
// or what ../shared/codis/build.sh (looked for above the working
// directory) builds, once per process.
func CodisBin() (string, error) {
	codisOnce.Do(func() { codisBin, codisErr = findCodis() })
	return codisBin, codisErr
}

func findCodis() (string, error) {
	if d := os.Getenv(CodisBinEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "codis-proxy")); err != nil {
			return "", fmt.Errorf("$%s=%s: %w", CodisBinEnv, d, err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		script := filepath.Join(d, "..", "shared", "codis", "build.sh")
		if _, err := os.Stat(script); err == nil {
			out, err := exec.Command(script).Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return "", fmt.Errorf("%s: %w: %s", script, err, ee.Stderr)
				}
				return "", fmt.Errorf("%s: %w", script, err)
			}
			return strings.TrimSpace(string(out)), nil
		}
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || filepath.Dir(d) == d {
			break // the project's root, where ../shared would be
		}
	}
	return "", errors.New("no Codis binaries")
}

// StartCodis starts a Codis cluster for tb and stops it at its cleanup.
// Without Codis binaries (see CodisBin) it skips tb with one line that
// says how to get them, unless $DELAYQ_CODIS_REQUIRED is 1.
func StartCodis(tb testing.TB, o CodisOptions) *Codis {
	tb.Helper()
	requireBins(tb, false)
	bin, err := CodisBin()
	if err != nil {
		msg := fmt.Sprintf("Codis tests need Codis 3.2: set $%s to the folder of codis-server, codis-proxy, codis-dashboard and codis-admin, or put the project beside shared/codis/build.sh (%v)", CodisBinEnv, err)
		if os.Getenv(CodisRequiredEnv) == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	c, err := startCodis(tb.TempDir(), bin, o)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}

func startCodis(dir, bin string, o CodisOptions) (*Codis, error) {
	if o.Groups <= 0 {
		o.Groups = 2
	}
	if o.Proxies <= 0 {
		o.Proxies = 1
	}
	c := &Codis{dir: dir, bin: bin, procs: map[string]*proc{}}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	for g := range o.Groups {
		var addrs []string
		for r := range 1 + btoi(o.Replicas) {
			addr, err := c.startServer(fmt.Sprintf("group%d-%d", g+1, r))
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, addr)
		}
		c.Groups = append(c.Groups, addrs)
	}
	if err := c.startDashboard(); err != nil {
		return nil, err
	}
	for g, addrs := range c.Groups {
		gid := strconv.Itoa(g + 1)
		if err := c.admin("--create-group", "--gid="+gid); err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if err := c.admin("--group-add", "--gid="+gid, "--addr="+a); err != nil {
				return nil, err
			}
		}
		for _, a := range addrs[1:] {
			if err := c.admin("--sync-action", "--create", "--addr="+a); err != nil {
				return nil, err
			}
		}
	}
	for i := range o.Proxies {
		if err := c.startProxy(i); err != nil {
			return nil, err
		}
	}
	per := codisSlots / len(c.Groups)
	for g := range c.Groups {
		beg, end := g*per, (g+1)*per-1
		if g == len(c.Groups)-1 {
			end = codisSlots - 1
		}
		if err := c.admin("--slots-assign", "--beg="+strconv.Itoa(beg), "--end="+strconv.Itoa(end), "--gid="+strconv.Itoa(g+1), "--confirm"); err != nil {
			return nil, err
		}
	}
	for _, addrs := range c.Groups {
		for _, replica := range addrs[1:] {
			if err := waitSynced(addrs[0], replica); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range c.Proxies {
		if err := waitRouting(p); err != nil {
			return nil, fmt.Errorf("%w%s", err, logTail(20, filepath.Join(c.dir, "proxy0", "proxy.log")))
		}
	}
	ok = true
	return c, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startServer starts a codis-server from a config file (codis-admin's
// sync and promote run CONFIG REWRITE, which needs one), append-only as a
// deployment runs it, and returns its address.
func (c *Codis) startServer(name string) (string, error) {
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var err error
	for range startTries {
		var port int
		if port, err = freePort(); err != nil {
			return "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		conf := filepath.Join(dir, "redis.conf")
		lines := []string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1",
			`save ""`,
			"appendonly yes",
			"appendfsync everysec",
			"dir " + strconv.Quote(dir),
			"logfile " + strconv.Quote(filepath.Join(dir, "redis.log")),
			"daemonize no",
			"protected-mode no",
		}
		if err = os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return "", err
		}
		var p *proc
		p, err = startProc("codis-server "+name, dir, filepath.Join(dir, "stdout.log"), filepath.Join(c.bin, "codis-server"), conf)
		if err != nil {
			return "", err
		}
		if err = waitReady(p, addr, readyTimeout); err == nil {
			c.mu.Lock()
			c.procs[addr] = p
			c.mu.Unlock()
			return addr, nil
		}
		p.kill()
		err = fmt.Errorf("%v%s", err, logTail(20, filepath.Join(dir, "redis.log"), filepath.Join(dir, "stdout.log")))
	}
	return "", err
}

// codisConfig returns the default config of codis-<what> with the keys of
// set given the values of set, TOML values (strings quoted).
func (c *Codis) codisConfig(what string, set map[string]string) (string, error) {
	out, err := exec.Command(filepath.Join(c.bin, "codis-"+what), "--default-config").Output()
	if err != nil {
		return "", fmt.Errorf("codis-%s --default-config: %w", what, err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if k, _, ok := strings.Cut(line, "="); ok {
			if v, ok := set[strings.TrimSpace(k)]; ok {
				line = strings.TrimSpace(k) + " = " + v
			}
		}
		b.WriteString(line + "\n")
	}
	return b.String(), nil
}

func (c *Codis) startDashboard() error {
	dir := filepath.Join(c.dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	c.dashboard = "127.0.0.1:" + strconv.Itoa(port)
	conf, err := c.codisConfig("dashboard", map[string]string{
		"coordinator_name": strconv.Quote("filesystem"),
		"coordinator_addr": strconv.Quote(filepath.Join(c.dir, "coordinator")),
		"product_name":     strconv.Quote(codisProduct),
		"admin_addr":       strconv.Quote(c.dashboard),
	})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "dashboard.toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	log := filepath.Join(dir, "dashboard.log")
	p, err := startProc("codis-dashboard", dir, filepath.Join(dir, "stdout.log"), filepath.Join(c.bin, "codis-dashboard"), "--config="+path, "--log="+log)
	if err != nil {
		return err
	}
	c.dash = p
	if !Poll(readyTimeout, func() bool { return c.admin("--list-group") == nil || p.exited() }) || p.exited() {
		return fmt.Errorf("codis-dashboard not ready on %s%s", c.dashboard, logTail(20, log, filepath.Join(dir, "stdout.log")))
	}
	return nil
}

func (c *Codis) startProxy(i int) error {
	dir := filepath.Join(c.dir, "proxy"+strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	adminPort, err := freePort()
	if err != nil {
		return err
	}
	addr, admin := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(adminPort)
	conf, err := c.codisConfig("proxy", map[string]string{
		"product_name":           strconv.Quote(codisProduct),
		"admin_addr":             strconv.Quote(admin),
		"proxy_addr":             strconv.Quote(addr),
		"proxy_heap_placeholder": strconv.Quote("0"),
		// Reads never go to a replica, as a queue's must not.
		"backend_primary_only": "true",
	})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "proxy.toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	log := filepath.Join(dir, "proxy.log")
	p, err := startProc("codis-proxy "+strconv.Itoa(i), dir, filepath.Join(dir, "stdout.log"), filepath.Join(c.bin, "codis-proxy"), "--config="+path, "--log="+log)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[addr] = p
	c.mu.Unlock()
	if !Poll(readyTimeout, func() bool { _, err := c.proxyStats(admin); return err == nil || p.exited() }) || p.exited() {
		return fmt.Errorf("codis-proxy %d: admin not ready on %s%s", i, admin, logTail(20, log, filepath.Join(dir, "stdout.log")))
	}
	if err := c.admin("--create-proxy", "--addr="+admin); err != nil {
		return err
	}
	c.Proxies = append(c.Proxies, addr)
	c.admins = append(c.admins, admin)
	return nil
}

// admin runs codis-admin against the dashboard.
func (c *Codis) admin(args ...string) error {
	_, err := c.adminOut(args...)
	return err
}

func (c *Codis) adminOut(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, "codis-admin"), append([]string{"--dashboard=" + c.dashboard}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("codis-admin %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitSynced waits until replica serves a key written on master.
func waitSynced(master, replica string) error {
	key := "testenv:sync:" + replica
	if r, err := Do(master, "SET", key, "1", "PX", "60000"); err != nil || r != "+OK" {
		return fmt.Errorf("write to %s: %q %v", master, r, err)
	}
	if !Poll(20*time.Second, func() bool { r, err := Do(replica, "GET", key); return err == nil && r == "$1" }) {
		return fmt.Errorf("replica %s did not sync from %s", replica, master)
	}
	return nil
}

// waitRouting waits until the proxy at addr routes commands (it answers
// "router is not online" before its slots are filled).
func waitRouting(addr string) error {
	var last string
	var err error
	if Poll(readyTimeout, func() bool {
		last, err = Do(addr, "SET", "testenv:ready", "1", "PX", "1000")
		return err == nil && last == "+OK"
	}) {
		return nil
	}
	return fmt.Errorf("codis-proxy %s does not route: %q %v", addr, last, err)
}

// Stop terminates every process of the cluster and waits for them.
func (c *Codis) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	var ps []*proc
	for _, p := range c.procs {
		ps = append(ps, p)
	}
	if c.dash != nil {
		ps = append(ps, c.dash)
	}
	stopAll(ps, stopGrace)
}

// Kill kills the server or proxy at addr with SIGKILL and waits for it.
func (c *Codis) Kill(tb testing.TB, addr string) {
	tb.Helper()
	c.mu.Lock()
	p := c.procs[addr]
	c.mu.Unlock()
	if p == nil {
		tb.Fatalf("testenv: no Codis process at %s", addr)
	}
	p.kill()
}

// Promote makes addr the master of group gid (codis-admin
// --promote-server): the dashboard points the proxies at it.
func (c *Codis) Promote(tb testing.TB, gid int, addr string) {
	tb.Helper()
	if err := c.admin("--promote-server", "--gid="+strconv.Itoa(gid), "--addr="+addr); err != nil {
		tb.Fatal(err)
	}
}

// MigrateSlots starts moving slots beg..end to group gid, as an operator
// does while clients run; WaitMigrated waits for the end.
func (c *Codis) MigrateSlots(tb testing.TB, beg, end, gid int) {
	tb.Helper()
	if err := c.admin("--slot-action", "--create-range", "--beg="+strconv.Itoa(beg), "--end="+strconv.Itoa(end), "--gid="+strconv.Itoa(gid)); err != nil {
		tb.Fatal(err)
	}
}

// SlotsOf returns how many slots group gid serves with no action pending,
// and how many slots have an action pending.
func (c *Codis) SlotsOf(gid int) (serving, pending int, err error) {
	out, err := c.adminOut("slots")
	if err != nil {
		return 0, 0, err
	}
	var slots []struct {
		ID      int `json:"id"`
		GroupID int `json:"group_id"`
		Action  struct {
			State    string `json:"state"`
			TargetID int    `json:"target_id"`
		} `json:"action"`
	}
	if err := json.Unmarshal(jsonPart(out), &slots); err != nil {
		return 0, 0, fmt.Errorf("codis-admin slots: %w: %s", err, lastLines(string(out), 3))
	}
	for _, s := range slots {
		switch {
		case s.Action.State != "":
			pending++
		case s.GroupID == gid:
			serving++
		}
	}
	return serving, pending, nil
}

// jsonPart drops what codis-admin logs before its JSON output.
func jsonPart(out []byte) []byte {
	s := string(out)
	if i := strings.IndexAny(s, "[{"); i > 0 {
		s = s[i:]
	}
	return []byte(s)
}

// CodisOp is one command's counters of a codis-proxy (/proxy/stats).
type CodisOp struct {
	OpStr string `json:"opstr"`
	Calls int64  `json:"calls"`
	// Fails counts requests the proxy failed: not forwarded, or not
	// answered (a backend lost, a session closed with replies pending).
	Fails int64 `json:"fails"`
	// RedisErrType counts error replies, the proxy's own refusals
	// ("ERR handle request, command 'X' is not allowed") included.
	RedisErrType int64 `json:"redis_errtype"`
}

// ProxyOps returns the per-command counters of proxy i.
func (c *Codis) ProxyOps(i int) ([]CodisOp, error) {
	return c.proxyStats(c.admins[i])
}

func (c *Codis) proxyStats(admin string) ([]CodisOp, error) {
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get("http://" + admin + "/proxy/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("codis-proxy %s /proxy/stats: %s: %s", admin, resp.Status, body)
	}
	var st struct {
		Ops struct {
			Cmd []CodisOp `json:"cmd"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("codis-proxy %s /proxy/stats: %w", admin, err)
	}
	return st.Ops.Cmd, nil
}
