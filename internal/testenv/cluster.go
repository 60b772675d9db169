package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// clusterPoll is how often the cluster helpers poll the nodes while they
// wait for a state.
const clusterPoll = 50 * time.Millisecond

// ClusterOptions configures StartCluster. Zero values take the defaults named.
type ClusterOptions struct {
	// Masters is the number of masters (default 3, the least redis-cli
	// --cluster create accepts).
	Masters int
	// Replicas is the number of replicas per master (default 1; a
	// negative value means none).
	Replicas int
	// NodeTimeout is every node's cluster-node-timeout (default 2s): how
	// long a node may be unreachable before it is failed over.
	NodeTimeout time.Duration
	// Password, when set, is requirepass and masterauth on every node;
	// the helpers authenticate with it. Do does not: through it, nodes
	// answer NOAUTH.
	Password string
}

// Cluster is a running Redis Cluster on loopback, every node a
// redis-server of its own (append-only, cluster bus on a port of its own)
// in a directory under Dir, created with redis-cli --cluster create.
//
// Its helpers send the administration commands (CLUSTER, MIGRATE, INFO)
// on connections of their own, as an operator's tool would: outside the
// portable set and its audit, which are about what delayq sends.
type Cluster struct {
	// Dir holds one directory per node (node0, node1, ...) and the output
	// of redis-cli (create.log).
	Dir string

	opts    ClusterOptions
	seeds   string
	mu      sync.Mutex
	nodes   []*clusterNode
	moves   map[int]clusterMove // slot -> move begun by BeginMove
	stopped bool
}

type clusterMove struct{ from, to string }

// clusterNode is one redis-server of a Cluster.
type clusterNode struct {
	idx      int
	dir      string
	confPath string
	logPath  string
	outPath  string
	port     int
	busPort  int
	p        *proc
}

func (n *clusterNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

func (n *clusterNode) name() string { return fmt.Sprintf("redis-server cluster node %d", n.idx) }

func (n *clusterNode) running() bool { return n.p != nil && !n.p.exited() }

// config renders the node's redis.conf. The bus port is chosen like the
// client port, rather than the default port+10000, which may not exist.
func (n *clusterNode) config(o ClusterOptions) string {
	lines := []string{
		"port " + strconv.Itoa(n.port),
		"cluster-port " + strconv.Itoa(n.busPort),
		"bind 127.0.0.1",
		"protected-mode no",
		"cluster-enabled yes",
		"cluster-config-file " + strconv.Quote(filepath.Join(n.dir, "nodes.conf")),
		"cluster-node-timeout " + strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
		"appendonly yes",
		"appendfsync everysec",
		`save ""`,
		"dir " + strconv.Quote(n.dir),
		"logfile " + strconv.Quote(n.logPath),
		"daemonize no",
		// A master otherwise waits 5s for more replicas before it
		// starts a (diskless) full sync.
		"repl-diskless-sync-delay 0",
	}
	if o.Password != "" {
		lines = append(lines,
			"requirepass "+strconv.Quote(o.Password),
			"masterauth "+strconv.Quote(o.Password))
	}
	return strings.Join(lines, "\n") + "\n"
}

// startFresh starts the node on new ports in an emptied directory,
// retrying on other ports when it dies before being ready.
func (n *clusterNode) startFresh(o ClusterOptions) error {
	var err error
	for range startTries {
		if err = os.RemoveAll(n.dir); err != nil {
			return err
		}
		if err = os.MkdirAll(n.dir, 0o755); err != nil {
			return err
		}
		if n.port, err = freePort(); err != nil {
			return err
		}
		if n.busPort, err = freePort(); err != nil {
			return err
		}
		if err = os.WriteFile(n.confPath, []byte(n.config(o)), 0o644); err != nil {
			return err
		}
		if err = n.launch(); err == nil {
			return nil
		}
	}
	return err
}

// launch starts the process and waits until PING answers; on failure the
// process is killed and the error carries the log tail.
func (n *clusterNode) launch() error {
	bin, err := lookBin("redis-server")
	if err != nil {
		return fmt.Errorf("%s", missingMsg("redis-server"))
	}
	p, err := startProc(n.name(), n.dir, n.outPath, bin, n.confPath)
	if err != nil {
		return err
	}
	n.p = p
	if err := waitReady(p, n.addr(), readyTimeout); err != nil {
		p.kill()
		return fmt.Errorf("%v%s", err, logTail(20, n.logPath, n.outPath))
	}
	return nil
}

// StartCluster starts a Redis Cluster described by o in a test temporary
// directory and registers a tb.Cleanup that stops it. It returns once
// WaitHealthy passes and every replica's link to its master is up. On
// failure it calls tb.Fatal with the output of redis-cli and the tails of
// the nodes' logs.
func StartCluster(tb testing.TB, o ClusterOptions) *Cluster {
	tb.Helper()
	requireBins(tb, false)
	if _, err := lookBin("redis-cli"); err != nil {
		tb.Fatal(missingMsg("redis-cli"))
	}
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Masters < 3 {
		tb.Fatalf("testenv: ClusterOptions.Masters = %d: redis-cli --cluster create wants at least 3", o.Masters)
	}
	switch {
	case o.Replicas == 0:
		o.Replicas = 1
	case o.Replicas < 0:
		o.Replicas = 0
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 2 * time.Second
	}
	if o.NodeTimeout < time.Millisecond {
		tb.Fatalf("testenv: ClusterOptions.NodeTimeout = %v, want at least 1ms", o.NodeTimeout)
	}
	c := &Cluster{Dir: tb.TempDir(), opts: o, moves: map[int]clusterMove{}}
	tb.Cleanup(c.stop) // after TempDir's, so run before the directory goes
	if err := c.start(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return c
}

// start launches the nodes, joins them with redis-cli and waits for a
// healthy cluster with its replicas in sync.
func (c *Cluster) start() error {
	total := c.opts.Masters * (1 + c.opts.Replicas)
	var addrs []string
	for i := range total {
		dir := filepath.Join(c.Dir, "node"+strconv.Itoa(i))
		n := &clusterNode{
			idx:      i,
			dir:      dir,
			confPath: filepath.Join(dir, "redis.conf"),
			logPath:  filepath.Join(dir, "redis.log"),
			outPath:  filepath.Join(dir, "stdout.log"),
		}
		c.mu.Lock()
		c.nodes = append(c.nodes, n)
		c.mu.Unlock()
		if err := n.startFresh(c.opts); err != nil {
			return err
		}
		addrs = append(addrs, n.addr())
	}
	if err := c.create(addrs); err != nil {
		return err
	}
	if err := c.waitHealthy(30 * time.Second); err != nil {
		return err
	}
	if err := c.waitReplicasLinked(30 * time.Second); err != nil {
		return err
	}
	masters, err := c.Masters()
	if err != nil {
		return err
	}
	if len(masters) != c.opts.Masters {
		return fmt.Errorf("cluster created with masters %v, want %d of them%s", masters, c.opts.Masters, logTail(20, filepath.Join(c.Dir, "create.log")))
	}
	c.seeds = strings.Join(masters, ",")
	return nil
}

// create runs redis-cli --cluster create on addrs; its output goes to
// Dir/create.log.
func (c *Cluster) create(addrs []string) error {
	cli, err := lookBin("redis-cli")
	if err != nil {
		return fmt.Errorf("%s", missingMsg("redis-cli"))
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.opts.Replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Dir = c.Dir
	// With TERM=xterm*, redis-cli colors its log even into a file.
	cmd.Env = append(os.Environ(), "TERM=dumb")
	if c.opts.Password != "" {
		// Rather than -a, which makes redis-cli print a warning.
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+c.opts.Password)
	}
	out, err := cmd.CombinedOutput()
	logPath := filepath.Join(c.Dir, "create.log")
	_ = os.WriteFile(logPath, out, 0o644)
	if err == nil && !strings.Contains(string(out), "[OK] All 16384 slots covered") {
		err = fmt.Errorf("no \"[OK] All 16384 slots covered\" in its output")
	}
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v%s%s", err, logTail(30, logPath), c.logTails(10))
	}
	return nil
}

// stop terminates every node (SIGTERM, then SIGKILL after stopGrace) and
// waits for them.
func (c *Cluster) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	var ps []*proc
	for _, n := range c.nodes {
		if n.p != nil {
			ps = append(ps, n.p)
		}
	}
	stopAll(ps, stopGrace)
}

// Seeds returns the addresses of the masters as the cluster was created,
// comma-separated and sorted: what a client is configured with.
func (c *Cluster) Seeds() string { return c.seeds }

// Nodes returns every node's address, in the order the nodes were
// started, the killed ones included.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr()
	}
	return addrs
}

// live returns the addresses of the nodes whose process runs.
func (c *Cluster) live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var addrs []string
	for _, n := range c.nodes {
		if n.running() {
			addrs = append(addrs, n.addr())
		}
	}
	return addrs
}

func (c *Cluster) node(addr string) *clusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.addr() == addr {
			return n
		}
	}
	return nil
}

func (c *Cluster) nodeOrFatal(tb testing.TB, addr string) *clusterNode {
	tb.Helper()
	n := c.node(addr)
	if n == nil {
		tb.Fatalf("testenv: %s is not a node of the cluster %v", addr, c.Nodes())
	}
	return n
}

// logTails returns the last n lines of every node's logs.
func (c *Cluster) logTails(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var paths []string
	for _, x := range c.nodes {
		paths = append(paths, x.logPath, x.outPath)
	}
	return logTail(n, paths...)
}

// Kill kills the node at addr with SIGKILL and waits for it to exit. It
// stays down until Restart.
func (c *Cluster) Kill(tb testing.TB, addr string) {
	tb.Helper()
	n := c.nodeOrFatal(tb, addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.p != nil {
		n.p.kill()
	}
}

// Restart starts a killed node again, on its ports with its directory (so
// its nodes.conf, its identity in the cluster, and its append-only file),
// and waits until it answers PING. It does not wait for the node to
// rejoin: see WaitHealthy.
func (c *Cluster) Restart(tb testing.TB, addr string) {
	tb.Helper()
	n := c.nodeOrFatal(tb, addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		tb.Fatal("testenv: cluster already stopped")
	}
	if n.running() {
		tb.Fatalf("testenv: cluster node %s is running: Kill it first", addr)
	}
	if err := n.launch(); err != nil {
		tb.Fatalf("testenv: restart of cluster node %s: %v", addr, err)
	}
}

// nodeInfo is one line of CLUSTER NODES.
type nodeInfo struct {
	id     string
	addr   string // host:port, without the bus port
	flags  map[string]bool
	master string // the id of its master, "-" for a master
}

// failing reports whether the node is, in the view it came from, failed,
// suspected, or not (yet) a usable member.
func (ni nodeInfo) failing() bool {
	return ni.flags["fail"] || ni.flags["fail?"] || ni.flags["handshake"] || ni.flags["noaddr"]
}

// clusterNodes returns CLUSTER NODES as seen by the first live node that
// answers it, and that node's address.
func (c *Cluster) clusterNodes() ([]nodeInfo, string, error) {
	var last error = fmt.Errorf("no live node among %v", c.Nodes())
	for _, addr := range c.live() {
		text, err := c.bulk(addr, "CLUSTER", "NODES")
		if err != nil {
			last = err
			continue
		}
		nodes, err := parseClusterNodes(text)
		if err != nil {
			return nil, "", fmt.Errorf("CLUSTER NODES of %s: %w", addr, err)
		}
		return nodes, addr, nil
	}
	return nil, "", last
}

func parseClusterNodes(text string) ([]nodeInfo, error) {
	var nodes []nodeInfo
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("short line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@") // ip:port@cport[,hostname]
		ni := nodeInfo{id: f[0], addr: addr, flags: map[string]bool{}, master: f[3]}
		for _, fl := range strings.Split(f[2], ",") {
			ni.flags[fl] = true
		}
		nodes = append(nodes, ni)
	}
	return nodes, nil
}

// Masters returns the addresses of the current masters, sorted: the
// nodes flagged master, and neither failed nor suspected, in the CLUSTER
// NODES of a live node.
func (c *Cluster) Masters() ([]string, error) {
	nodes, _, err := c.clusterNodes()
	if err != nil {
		return nil, err
	}
	var masters []string
	for _, ni := range nodes {
		if ni.flags["master"] && !ni.failing() {
			masters = append(masters, ni.addr)
		}
	}
	sort.Strings(masters)
	return masters, nil
}

// slotRange is an entry of CLUSTER SLOTS: slots from..to served by master.
type slotRange struct {
	from, to int
	master   string
}

// slotMap returns CLUSTER SLOTS of addr, sorted by first slot.
func (c *Cluster) slotMap(addr string) ([]slotRange, error) {
	reply, err := c.do(addr, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	entries, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("CLUSTER SLOTS of %s: got %T, want an array", addr, reply)
	}
	var m []slotRange
	for _, e := range entries {
		a, ok := e.([]any)
		if !ok || len(a) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS of %s: bad entry %v", addr, e)
		}
		from, ok1 := a[0].(int64)
		to, ok2 := a[1].(int64)
		master, ok3 := a[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(master) < 2 {
			return nil, fmt.Errorf("CLUSTER SLOTS of %s: bad entry %v", addr, e)
		}
		host, ok1 := master[0].(string)
		port, ok2 := master[1].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("CLUSTER SLOTS of %s: bad master %v", addr, master)
		}
		m = append(m, slotRange{int(from), int(to), net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	sort.Slice(m, func(i, j int) bool { return m[i].from < m[j].from })
	return m, nil
}

// ownerIn returns the master serving slot in m, or "".
func ownerIn(m []slotRange, slot int) string {
	for _, r := range m {
		if r.from <= slot && slot <= r.to {
			return r.master
		}
	}
	return ""
}

func formatSlotMap(m []slotRange) string {
	parts := make([]string, len(m))
	for i, r := range m {
		parts[i] = fmt.Sprintf("%d-%d:%s", r.from, r.to, r.master)
	}
	return strings.Join(parts, " ")
}

// MasterOf returns the address of the node serving slot now, in the
// CLUSTER SLOTS of a live node.
func (c *Cluster) MasterOf(slot int) (string, error) {
	if slot < 0 || slot >= ClusterSlots {
		return "", fmt.Errorf("slot %d out of range [0,%d)", slot, ClusterSlots)
	}
	var last error = fmt.Errorf("no live node among %v", c.Nodes())
	for _, addr := range c.live() {
		m, err := c.slotMap(addr)
		if err != nil {
			last = err
			continue
		}
		if owner := ownerIn(m, slot); owner != "" {
			return owner, nil
		}
		return "", fmt.Errorf("slot %d is not assigned in the view of %s: %s", slot, addr, formatSlotMap(m))
	}
	return "", last
}

// WaitHealthy polls until every live node says cluster_state:ok, all
// 16384 slots are assigned, each to a live node, and every live node has
// the same slot map; it fails tb with each node's problem, the view of
// the cluster and the nodes' log tails when timeout passes first.
func (c *Cluster) WaitHealthy(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	if err := c.waitHealthy(timeout); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

func (c *Cluster) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		problems := c.healthProblems()
		if len(problems) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			view := "(no view)"
			if nodes, from, err := c.clusterNodes(); err == nil {
				var b strings.Builder
				fmt.Fprintf(&b, "CLUSTER NODES of %s:", from)
				for _, ni := range nodes {
					fmt.Fprintf(&b, "\n  %s %s %s", ni.addr, ni.id, strings.Join(sortedKeys(ni.flags), ","))
				}
				view = b.String()
			}
			return fmt.Errorf("cluster not healthy after %v:\n  %s\n%s%s", timeout, strings.Join(problems, "\n  "), view, c.logTails(8))
		}
		time.Sleep(clusterPoll)
	}
}

// healthProblems returns what keeps the cluster from being healthy (see
// WaitHealthy), one line per problem; none when it is.
func (c *Cluster) healthProblems() []string {
	live := c.live()
	if len(live) == 0 {
		return []string{"no live node"}
	}
	isLive := map[string]bool{}
	for _, a := range live {
		isLive[a] = true
	}
	var problems []string
	var first []slotRange
	firstAddr := ""
	for _, addr := range live {
		info, err := c.bulk(addr, "CLUSTER", "INFO")
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		fields := infoFields(info)
		if st := fields["cluster_state"]; st != "ok" {
			problems = append(problems, fmt.Sprintf("%s: cluster_state:%s", addr, st))
		}
		if n := fields["cluster_slots_assigned"]; n != strconv.Itoa(ClusterSlots) {
			problems = append(problems, fmt.Sprintf("%s: cluster_slots_assigned:%s", addr, n))
		}
		m, err := c.slotMap(addr)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, r := range m {
			if !isLive[r.master] {
				problems = append(problems, fmt.Sprintf("%s: slots %d-%d assigned to %s, which is down", addr, r.from, r.to, r.master))
			}
		}
		if first == nil {
			first, firstAddr = m, addr
		} else if a, b := formatSlotMap(first), formatSlotMap(m); a != b {
			problems = append(problems, fmt.Sprintf("slot maps differ: %s has %s; %s has %s", firstAddr, a, addr, b))
		}
	}
	return problems
}

// waitReplicasLinked polls until every replica in the view of a live node
// says master_link_status:up, and there are as many as configured.
func (c *Cluster) waitReplicasLinked(timeout time.Duration) error {
	want := c.opts.Masters * c.opts.Replicas
	var last string
	ok := Poll(timeout, func() bool {
		nodes, _, err := c.clusterNodes()
		if err != nil {
			last = err.Error()
			return false
		}
		n := 0
		for _, ni := range nodes {
			if !ni.flags["slave"] {
				continue
			}
			n++
			info, err := c.bulk(ni.addr, "INFO", "replication")
			if err != nil {
				last = err.Error()
				return false
			}
			if st := infoFields(info)["master_link_status"]; st != "up" {
				last = fmt.Sprintf("replica %s: master_link_status:%s", ni.addr, st)
				return false
			}
		}
		if n != want {
			last = fmt.Sprintf("%d replicas, want %d", n, want)
			return false
		}
		return true
	})
	if !ok {
		return fmt.Errorf("replicas not linked to their masters after %v: %s%s", timeout, last, c.logTails(8))
	}
	return nil
}

// myID returns the cluster node id of addr.
func (c *Cluster) myID(addr string) (string, error) {
	return c.bulk(addr, "CLUSTER", "MYID")
}

// BeginMove starts moving slot from the node serving it to the master to,
// as redis-cli --cluster reshard does: CLUSTER SETSLOT slot IMPORTING on
// to, then MIGRATING on the source. Keys not yet moved are still served by
// the source; for the others it answers -ASK.
func (c *Cluster) BeginMove(tb testing.TB, slot int, to string) {
	tb.Helper()
	c.nodeOrFatal(tb, to)
	from, err := c.MasterOf(slot)
	if err != nil {
		tb.Fatalf("testenv: BeginMove of slot %d: %v", slot, err)
	}
	if from == to {
		tb.Fatalf("testenv: BeginMove of slot %d: %s serves it already", slot, to)
	}
	fromID, err := c.myID(from)
	if err != nil {
		tb.Fatalf("testenv: BeginMove of slot %d: %v", slot, err)
	}
	toID, err := c.myID(to)
	if err != nil {
		tb.Fatalf("testenv: BeginMove of slot %d: %v", slot, err)
	}
	s := strconv.Itoa(slot)
	if err := c.ok(to, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		tb.Fatalf("testenv: BeginMove of slot %d: %v", slot, err)
	}
	if err := c.ok(from, "CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		tb.Fatalf("testenv: BeginMove of slot %d: %v", slot, err)
	}
	c.mu.Lock()
	c.moves[slot] = clusterMove{from: from, to: to}
	c.mu.Unlock()
}

// move returns the move of slot to to begun by BeginMove, or fails tb.
func (c *Cluster) move(tb testing.TB, what string, slot int, to string) clusterMove {
	tb.Helper()
	c.mu.Lock()
	m, ok := c.moves[slot]
	c.mu.Unlock()
	if !ok || m.to != to {
		tb.Fatalf("testenv: %s of slot %d to %s: no BeginMove of that slot to that node", what, slot, to)
	}
	return m
}

// MoveKeys moves keys, which must all hash to slot, from the source of a
// move begun by BeginMove to to (one MIGRATE ... KEYS). Keys that do not
// exist on the source are skipped.
func (c *Cluster) MoveKeys(tb testing.TB, slot int, to string, keys ...string) {
	tb.Helper()
	m := c.move(tb, "MoveKeys", slot, to)
	for _, k := range keys {
		if s := Slot(k); s != slot {
			tb.Fatalf("testenv: MoveKeys of slot %d: key %q is in slot %d", slot, k, s)
		}
	}
	if err := c.migrate(m.from, m.to, keys); err != nil {
		tb.Fatalf("testenv: MoveKeys of slot %d: %v", slot, err)
	}
}

// migrate runs MIGRATE on from for keys, to to.
func (c *Cluster) migrate(from, to string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	host, port, err := net.SplitHostPort(to)
	if err != nil {
		return err
	}
	args := []string{"MIGRATE", host, port, "", "0", "5000"}
	if c.opts.Password != "" {
		args = append(args, "AUTH", c.opts.Password)
	}
	args = append(args, "KEYS")
	args = append(args, keys...)
	reply, err := c.do(from, args...)
	if err != nil {
		return err
	}
	if reply != "OK" && reply != "NOKEY" {
		return fmt.Errorf("MIGRATE of %d keys from %s to %s: got %v", len(keys), from, to, reply)
	}
	return nil
}

// FinishMove ends a move begun by BeginMove: it migrates every key left in
// slot on the source, then sends CLUSTER SETSLOT slot NODE to the target,
// the source and every other master, and returns once every live node,
// masters and replicas, names to as the slot's master in its CLUSTER SLOTS.
func (c *Cluster) FinishMove(tb testing.TB, slot int, to string) {
	tb.Helper()
	m := c.move(tb, "FinishMove", slot, to)
	s := strconv.Itoa(slot)
	for {
		reply, err := c.do(m.from, "CLUSTER", "GETKEYSINSLOT", s, "100")
		if err != nil {
			tb.Fatalf("testenv: FinishMove of slot %d: %v", slot, err)
		}
		list, _ := reply.([]any)
		if len(list) == 0 {
			break
		}
		keys := make([]string, 0, len(list))
		for _, k := range list {
			ks, ok := k.(string)
			if !ok {
				tb.Fatalf("testenv: FinishMove of slot %d: CLUSTER GETKEYSINSLOT of %s: got %v", slot, m.from, reply)
			}
			keys = append(keys, ks)
		}
		if err := c.migrate(m.from, m.to, keys); err != nil {
			tb.Fatalf("testenv: FinishMove of slot %d: %v", slot, err)
		}
	}
	toID, err := c.myID(to)
	if err != nil {
		tb.Fatalf("testenv: FinishMove of slot %d: %v", slot, err)
	}
	masters, err := c.Masters()
	if err != nil {
		tb.Fatalf("testenv: FinishMove of slot %d: %v", slot, err)
	}
	targets := []string{m.to, m.from}
	for _, a := range masters {
		if a != m.to && a != m.from {
			targets = append(targets, a)
		}
	}
	for _, a := range targets {
		if err := c.ok(a, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			tb.Fatalf("testenv: FinishMove of slot %d: %v", slot, err)
		}
	}
	c.mu.Lock()
	delete(c.moves, slot)
	c.mu.Unlock()
	var last string
	if !Poll(15*time.Second, func() bool {
		for _, a := range c.live() {
			sm, err := c.slotMap(a)
			if err != nil {
				last = err.Error()
				return false
			}
			if owner := ownerIn(sm, slot); owner != to {
				last = fmt.Sprintf("%s says slot %d is served by %q", a, slot, owner)
				return false
			}
		}
		return true
	}) {
		tb.Fatalf("testenv: FinishMove of slot %d to %s: not agreed after 15s: %s%s", slot, to, last, c.logTails(8))
	}
}

// MoveSlot moves slot, and its keys, to the master to: BeginMove then
// FinishMove.
func (c *Cluster) MoveSlot(tb testing.TB, slot int, to string) {
	tb.Helper()
	c.BeginMove(tb, slot, to)
	c.FinishMove(tb, slot, to)
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, the part between the first '{' and the next '}' when that is
// not empty, else of the whole key, modulo 16384. It is testenv's own
// copy, to check routing independently of the code under test.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % ClusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum of Redis Cluster's key hashing.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// do sends one command to addr, after AUTH when the cluster has a
// password (see nodeDo).
func (c *Cluster) do(addr string, args ...string) (any, error) {
	return nodeDo(addr, c.opts.Password, args...)
}

// bulk is do for commands that answer a bulk string.
func (c *Cluster) bulk(addr string, args ...string) (string, error) {
	reply, err := c.do(addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := reply.(string)
	if !ok {
		return "", fmt.Errorf("%s on %s: got %v, want a string", strings.Join(args, " "), addr, reply)
	}
	return s, nil
}

// ok is do for commands that answer +OK.
func (c *Cluster) ok(addr string, args ...string) error {
	reply, err := c.do(addr, args...)
	if err != nil {
		return err
	}
	if reply != "OK" {
		return fmt.Errorf("%s on %s: got %v, want OK", strings.Join(args, " "), addr, reply)
	}
	return nil
}

// infoFields parses the "name:value" lines of INFO or CLUSTER INFO.
func infoFields(text string) map[string]string {
	f := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// replyError is an error reply ("-ERR ...", "-ASK ...") without its '-'.
type replyError string

func (e replyError) Error() string { return string(e) }

// nodeDo sends AUTH password (when not empty), then one command, to addr
// on a connection of its own, and returns the reply decoded: a string
// for a simple or bulk string, int64, nil for a nil reply, []any for an
// array. An error reply is returned as an error naming the command.
// Unlike Do, it is not bound to the portable set: it is the cluster's
// administration channel.
func nodeDo(addr, password string, args ...string) (any, error) {
	what := strings.Join(args[:min(2, len(args))], " ")
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", what, addr, err)
	}
	defer c.Close()
	// Above MIGRATE's own timeout (5s).
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := c.Write(EncodeCommand("AUTH", password)); err != nil {
			return nil, fmt.Errorf("AUTH on %s: %w", addr, err)
		}
		reply, err := readReply(r)
		if err == nil && reply != "OK" {
			err = fmt.Errorf("got %v", reply)
		}
		if err != nil {
			return nil, fmt.Errorf("AUTH on %s: %w", addr, err)
		}
	}
	if _, err := c.Write(EncodeCommand(args...)); err != nil {
		return nil, fmt.Errorf("%s on %s: %w", what, addr, err)
	}
	reply, err := readReply(r)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: read: %w", what, addr, err)
	}
	if e, ok := reply.(replyError); ok {
		return nil, fmt.Errorf("%s on %s: -%w", what, addr, e)
	}
	return reply, nil
}

// readReply reads one RESP2 reply (see nodeDo); an error reply is
// returned as a replyError value, not as the error.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return replyError(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad bulk header %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad array header %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}
