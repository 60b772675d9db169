package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// Options configures New.
type Options struct {
	// Seeds are host:port of nodes to learn the slot map from. One that
	// answers is enough; the map names the rest.
	Seeds []string
	// Dial connects to a node. It must dial with portable's Cluster set,
	// so that the router's own commands pass the check.
	Dial func(ctx context.Context, addr string) (*portable.Conn, error)
	// Logger receives the changes of the slot map. Default: discarded.
	Logger *slog.Logger
	// Down, when set, is called when a master stops answering (a dial
	// or a connection failed, or it said CLUSTERDOWN) while all
	// answered; Up when the last master that did not answer answers
	// again, or a new map no longer names it (its replica took over).
	// Each is called with the router's health lock held: they must not
	// call the router.
	Down func(addr string, err error)
	Up   func(addr string)
}

// Router knows which master serves each slot. It learns the map from
// CLUSTER SLOTS, asked again after a redirection or a connection lost,
// and hands out connections (Conn) that route each command by its key.
// It is safe for concurrent use.
type Router struct {
	o Options

	mu      sync.RWMutex
	slots   [Slots]string // master's host:port; "" before the first map
	ranges  []slotRange   // the last map read, as CLUSTER SLOTS gave it
	known   []string      // masters of the last map, then the seeds
	version int           // maps read so far

	refreshMu   sync.Mutex // one read of the map at a time
	lastRefresh time.Time

	healthMu sync.Mutex
	down     map[string]bool // masters that failed and have not answered since
	anyDown  atomic.Bool     // len(down) > 0
}

// minRefresh is the least time between two reads of the map that a
// redirection or a lost connection asks for: a storm of them (a
// failover, a reshard) reads it a few times a second, not once per
// command.
const minRefresh = 100 * time.Millisecond

// New returns a Router. It does not connect: the first command does.
func New(o Options) (*Router, error) {
	if len(o.Seeds) == 0 {
		return nil, errors.New("cluster: no seed node")
	}
	if o.Dial == nil {
		return nil, errors.New("cluster: no Dial")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Router{o: o, known: append([]string(nil), o.Seeds...)}, nil
}

// Addr returns the master that serves slot as far as the router knows,
// reading the map first when none was read yet.
func (r *Router) Addr(ctx context.Context, slot int) (string, error) {
	r.mu.RLock()
	a := r.slots[slot]
	r.mu.RUnlock()
	if a != "" {
		return a, nil
	}
	if err := r.Refresh(ctx, false); err != nil {
		return "", err
	}
	r.mu.RLock()
	a = r.slots[slot]
	r.mu.RUnlock()
	if a == "" {
		return "", fmt.Errorf("cluster: no node serves slot %d (CLUSTERDOWN: the map has a hole)", slot)
	}
	return a, nil
}

// anyAddr returns a node for a command without a key.
func (r *Router) anyAddr() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.known[0]
}

// learn records that slot moved to addr (a MOVED reply), before the map
// is read again.
func (r *Router) learn(slot int, addr string) {
	r.mu.Lock()
	r.slots[slot] = addr
	r.mu.Unlock()
}

// Refresh reads the slot map from the first node that answers: the
// masters of the last map, then the seeds. Unless force, it does nothing
// when the map was read less than minRefresh ago.
func (r *Router) Refresh(ctx context.Context, force bool) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	if !force && time.Since(r.lastRefresh) < minRefresh {
		return nil
	}
	r.mu.RLock()
	try := append([]string(nil), r.known...)
	r.mu.RUnlock()
	var errs []error
	for _, addr := range try {
		m, err := r.readMap(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		r.use(m)
		r.lastRefresh = time.Now()
		return nil
	}
	return fmt.Errorf("cluster: no node gave the slot map: %w", errors.Join(errs...))
}

// refreshSoon reads the map again in the background (see Refresh).
func (r *Router) refreshSoon() {
	go r.Refresh(context.Background(), false) //nolint:errcheck // the next redirection asks again
}

// slotRange is one entry of CLUSTER SLOTS: slots first..last are served by
// master, which replicas copy.
type slotRange struct {
	first, last int
	master      string
	replicas    []string
}

// readMap asks addr for CLUSTER SLOTS.
func (r *Router) readMap(ctx context.Context, addr string) ([]slotRange, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := r.o.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	reply, err := redis.Values(c.DoContext(ctx, "CLUSTER", "SLOTS"))
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS from %s: %w", addr, err)
	}
	return parseSlots(reply, addr)
}

// parseSlots reads a CLUSTER SLOTS reply from addr: per range its first
// and last slot, then its master's address (ip, port, ...), then its
// replicas'. An empty ip is addr's own host.
func parseSlots(reply []any, addr string) ([]slotRange, error) {
	host, _, _ := net.SplitHostPort(addr)
	var out []slotRange
	for _, e := range reply {
		f, err := redis.Values(e, nil)
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS from %s: bad entry %v", addr, e)
		}
		first, err1 := redis.Int(f[0], nil)
		last, err2 := redis.Int(f[1], nil)
		if err1 != nil || err2 != nil || first < 0 || last >= Slots || first > last {
			return nil, fmt.Errorf("CLUSTER SLOTS from %s: bad entry %v", addr, e)
		}
		nodes := make([]string, 0, len(f)-2)
		for _, n := range f[2:] {
			a, err := nodeAddr(n, host)
			if err != nil {
				return nil, fmt.Errorf("CLUSTER SLOTS from %s: %w", addr, err)
			}
			nodes = append(nodes, a)
		}
		out = append(out, slotRange{first, last, nodes[0], nodes[1:]})
	}
	return out, nil
}

// nodeAddr reads a node of a CLUSTER SLOTS entry (ip, port, ...) as
// host:port; an empty ip is host, that of the node that answered.
func nodeAddr(n any, host string) (string, error) {
	node, err := redis.Values(n, nil)
	if err != nil || len(node) < 2 {
		return "", fmt.Errorf("bad node %v", n)
	}
	ip, err1 := redis.String(node[0], nil)
	port, err2 := redis.Int(node[1], nil)
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("bad node %v", node)
	}
	if ip == "" || ip == "?" {
		ip = host
	}
	return net.JoinHostPort(ip, strconv.Itoa(port)), nil
}

// failed records that addr did not answer (err).
func (r *Router) failed(addr string, err error) {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	if r.down == nil {
		r.down = map[string]bool{}
	}
	if r.down[addr] {
		return
	}
	r.down[addr] = true
	r.anyDown.Store(true)
	if len(r.down) == 1 && r.o.Down != nil {
		r.o.Down(addr, err)
	}
}

// answered records that addr answered: cheap unless a master is down.
func (r *Router) answered(addr string) {
	if !r.anyDown.Load() {
		return
	}
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	r.clear(addr, func(a string) bool { return a == addr })
}

// clear forgets the masters down that gone says are gone, and calls Up
// when none is left. healthMu must be held.
func (r *Router) clear(by string, gone func(string) bool) {
	if len(r.down) == 0 {
		return
	}
	for a := range r.down {
		if gone(a) {
			delete(r.down, a)
		}
	}
	if len(r.down) == 0 {
		r.anyDown.Store(false)
		if r.o.Up != nil {
			r.o.Up(by)
		}
	}
}

// use installs a map read from a node.
func (r *Router) use(m []slotRange) {
	var slots [Slots]string
	seen := map[string]bool{}
	var masters []string
	for _, rg := range m {
		for s := rg.first; s <= rg.last; s++ {
			slots[s] = rg.master
		}
		if !seen[rg.master] {
			seen[rg.master] = true
			masters = append(masters, rg.master)
		}
	}
	known := masters
	for _, a := range r.o.Seeds {
		if !seen[a] {
			known = append(known, a)
		}
	}
	r.mu.Lock()
	changed := r.slots != slots
	r.slots, r.ranges, r.known = slots, m, known
	r.version++
	v := r.version
	r.mu.Unlock()
	if r.anyDown.Load() { // a master down that the map no longer names was replaced
		r.healthMu.Lock()
		r.clear(strings.Join(masters, ","), func(a string) bool { return !seen[a] })
		r.healthMu.Unlock()
	}
	if changed && v > 1 {
		r.o.Logger.Info("cluster slot map changed", "masters", strings.Join(masters, ","))
	}
}

// Ready reads the slot map unless one was read already.
func (r *Router) Ready(ctx context.Context) error {
	r.mu.RLock()
	v := r.version
	r.mu.RUnlock()
	if v > 0 {
		return nil
	}
	return r.Refresh(ctx, true)
}

// Masters returns the masters of the last map read, reading one first
// when none was.
func (r *Router) Masters(ctx context.Context) ([]string, error) {
	if err := r.Ready(ctx); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, a := range r.slots {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// Shard is a master of the cluster, the replicas that copy it, and how
// many slots it serves.
type Shard struct {
	Master   string
	Replicas []string
	Slots    int
}

// Shards reads the slot map again and returns a Shard per master that
// serves slots, in the order of their first slot. Its replicas are those
// CLUSTER SLOTS lists, which leaves out a master that serves no slot, a
// replica the answering node thinks failed, and (Redis 7.0) one whose
// replication offset it has not yet heard to be above 0: the replica of
// a master never written to, for up to repl-ping-replica-period (10 s)
// after it synced. A master's INFO names its replicas without that lag
// (portable.BackendSettings).
func (r *Router) Shards(ctx context.Context) ([]Shard, error) {
	if err := r.Refresh(ctx, true); err != nil {
		return nil, err
	}
	r.mu.RLock()
	ranges := r.ranges
	r.mu.RUnlock()
	return shardsOf(ranges), nil
}

// shardsOf groups the ranges of a map by master.
func shardsOf(ranges []slotRange) []Shard {
	sorted := append([]slotRange(nil), ranges...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].first < sorted[j].first })
	var out []Shard
	at := map[string]int{}
	for _, rg := range sorted {
		i, ok := at[rg.master]
		if !ok {
			i = len(out)
			at[rg.master] = i
			out = append(out, Shard{Master: rg.master, Replicas: []string{}})
		}
		out[i].Slots += rg.last - rg.first + 1
		for _, rep := range rg.replicas {
			if !slices.Contains(out[i].Replicas, rep) {
				out[i].Replicas = append(out[i].Replicas, rep)
			}
		}
	}
	return out
}
