package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// A store may be given several addresses: proxies (Twemproxy, Codis) in
// front of the same backends, any of which serves any key. New
// connections go to each healthy proxy in turn. A proxy that fails
// (refused, reset, timed out, or answering "router is not online" while a
// Codis proxy starts) is skipped, and tried again after a backoff that
// doubles from proxyRetryMin to proxyRetryMax; its idle connections are
// dropped when next borrowed. A proxy going down while another answers
// is logged once; all of them down is an outage (see outage.go).
//
// A command whose connection broke is not sent again here: the operations
// above decide, since only they know what is safe to repeat. The partition
// loops and lease managers try again on their next turn (polls, outcomes
// kept pending, lease extensions, heartbeats: all idempotent or fenced);
// a write of messages runs its round trips again under WithRetry, each
// in the way that is safe for it (retry.go, and AddMany: a resent HSETNX
// whose reply was lost must not report the message as a duplicate of
// itself).
const (
	proxyRetryMin = 100 * time.Millisecond
	proxyRetryMax = 5 * time.Second
)

// proxies tracks the health of a store's addresses. Safe for concurrent use.
type proxies struct {
	addrs []string
	log   *slog.Logger
	// probe dials an address and checks it answers, for a proxy that is
	// down once its backoff is over (see probeDown).
	probe  func(ctx context.Context, addr string) error
	probes sync.WaitGroup

	outage *Outage

	mu    sync.Mutex
	next  int // the address the next dial starts from
	state []proxyState
}

type proxyState struct {
	down bool
	// answered: a dial or probe of it succeeded since it was last down
	// (a proxy not dialed yet is neither down nor answered).
	answered bool
	// unlogged: it is down, and its loss is not logged yet: it failed
	// while no other proxy was known to answer (see failed).
	unlogged bool
	probing  bool // a probe of it runs
	// gen counts the times it went down: a connection dialed before
	// its last failure is stale (see proxyConn.gen).
	gen     uint64
	retryAt time.Time     // when a down proxy may be dialed again
	backoff time.Duration // the current backoff
	lastErr error
}

func newProxies(addrs []string, log *slog.Logger, probe func(ctx context.Context, addr string) error) *proxies {
	return &proxies{addrs: addrs, log: log, probe: probe, state: make([]proxyState, len(addrs)), outage: newOutage(addrs, log)}
}

// probeDown starts a probe of each proxy that is down and due for a try,
// so that one that came back is known as up (and used) even while the
// pool makes no new connection. It is called as connections are
// borrowed; a probe runs at most once per backoff of its proxy.
func (x *proxies) probeDown(timeout time.Duration) {
	if len(x.addrs) < 2 {
		return
	}
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range x.state {
		st := &x.state[i]
		if !st.down || st.probing || now.Before(st.retryAt) {
			continue
		}
		st.probing = true
		x.probes.Add(1)
		go func() {
			defer x.probes.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := x.probe(ctx, x.addrs[i])
			cancel()
			x.mu.Lock()
			x.state[i].probing = false
			x.mu.Unlock()
			if err != nil {
				x.failed(i, err)
			} else {
				x.up(i)
			}
		}()
	}
}

// proxyConn is a connection with the index of the address it was dialed
// to, so that its failure marks that proxy down. It has every method of
// portable.Conn (redigo's pool needs those with a context or a timeout).
type proxyConn struct {
	*portable.Conn
	x *proxies
	i int
	// gen is its proxy's generation when it was dialed. A connection
	// older than the proxy's last failure is not used, and its own
	// failure is the old one, not a new one: a proxy that was restarted
	// is not marked down again by the connections it had before.
	gen uint64
}

// Close marks the connection's proxy down when the connection broke (a
// network error, not an error reply) and is of the proxy's current
// generation, then closes it.
func (c *proxyConn) Close() error {
	if err := c.Conn.Err(); err != nil && isNetErr(err) {
		c.x.mu.Lock()
		current := c.x.state[c.i].gen == c.gen
		c.x.mu.Unlock()
		if current {
			c.x.failed(c.i, err)
		}
	}
	return c.Conn.Close()
}

// isNetErr reports whether err is a connection's failure rather than a
// Redis error reply.
func isNetErr(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		return isProxyDown(re)
	}
	// A reset or broken pipe comes as a *net.OpError, a net.Error; a
	// connection the proxy closed, as io.EOF.
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isProxyDown reports whether an error reply means the proxy cannot serve
// yet: a Codis proxy starting up, or a Redis Cluster with slots no
// master serves (CLUSTERDOWN: a failover under way).
func isProxyDown(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "router is not online") || strings.HasPrefix(err.Error(), "CLUSTERDOWN "))
}

// dial connects to the next healthy address in turn, with dial, and
// returns the connection, or an *UnreachableError with each address's
// failure when none answers: the start of an outage, unless ctx ended
// first. A peer that refuses the credentials or does not speak Redis
// is no outage: its error (portable.Refused) is returned at once. With several addresses, a new connection is checked with a
// PING, so that a Codis proxy that is starting is skipped.
func (x *proxies) dial(ctx context.Context, dial func(ctx context.Context, addr string) (*portable.Conn, error)) (redis.Conn, error) {
	order := x.order(time.Now())
	var errs []error
	for _, i := range order {
		c, err := dial(ctx, x.addrs[i])
		if err == nil && len(x.addrs) > 1 {
			if _, perr := c.Do("PING"); perr != nil {
				c.Close()
				err = perr
			}
		}
		if err != nil && portable.Refused(err) {
			// Wrong credentials or not Redis: no outage, since waiting
			// will not help, and every address of the list is the same
			// deployment's, so none will do better.
			return nil, err
		}
		if err != nil {
			err = namedErr(x.addrs[i], err)
			x.failed(i, err)
			errs = append(errs, err)
			if ctx.Err() != nil {
				return nil, &UnreachableError{Errs: errs}
			}
			continue
		}
		return &proxyConn{Conn: c, x: x, i: i, gen: x.up(i)}, nil
	}
	err := &UnreachableError{Errs: errs}
	x.mu.Lock()
	for i := range x.state {
		x.state[i].unlogged = false // the outage's line names them all
	}
	x.mu.Unlock()
	x.outage.begin(err)
	return nil, err
}

// namedErr returns err naming addr, once: the errors of a dial and of a
// closed connection name it already (see portable.Dial), an error reply
// does not.
func namedErr(addr string, err error) error {
	if strings.Contains(err.Error(), addr) {
		return err
	}
	return fmt.Errorf("%s: %w", addr, err)
}

// order returns the addresses to try, starting from the next in turn:
// those not in backoff first, then the others (so that a process whose
// proxies are all down still tries, and resumes by itself).
func (x *proxies) order(now time.Time) []int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.addrs)
	start := x.next
	x.next = (x.next + 1) % n
	var ready, later []int
	for k := range n {
		i := (start + k) % n
		if x.state[i].down && now.Before(x.state[i].retryAt) {
			later = append(later, i)
		} else {
			ready = append(ready, i)
		}
	}
	return append(ready, later...)
}

// failed marks proxy i down, logging it once while another proxy
// answers, and doubles its backoff. While none is known to answer (every
// other one down, or not dialed yet: a process starting), the line waits
// for one that answers (see up); if none does, the dial that finds every
// proxy down starts an outage, logged as such instead.
func (x *proxies) failed(i int, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := &x.state[i]
	if !s.down {
		s.down, s.answered, s.backoff = true, false, proxyRetryMin
		s.gen++
		if x.anyAnswered() {
			x.log.Warn("proxy down: skipping it", "proxy", x.addrs[i], "err", err)
		} else {
			s.unlogged = true
		}
	} else {
		s.backoff = min(2*s.backoff, proxyRetryMax)
	}
	s.retryAt, s.lastErr = time.Now().Add(s.backoff), err
}

// anyAnswered reports whether a proxy answered since it was last down.
// x.mu is held.
func (x *proxies) anyAnswered() bool {
	for _, s := range x.state {
		if s.answered {
			return true
		}
	}
	return false
}

// up marks proxy i healthy, logging it when it was down, ends an
// outage, and returns the proxy's generation.
func (x *proxies) up(i int) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := &x.state[i]
	if s.down && len(x.addrs) > 1 {
		x.log.Info("proxy back", "proxy", x.addrs[i])
	}
	*s = proxyState{probing: s.probing, gen: s.gen, answered: true}
	for j := range x.state { // lost while none was known to answer
		if o := &x.state[j]; o.unlogged {
			o.unlogged = false
			x.log.Warn("proxy down: skipping it", "proxy", x.addrs[j], "err", o.lastErr)
		}
	}
	x.outage.end(x.addrs[i])
	return s.gen
}

// usable reports whether a pooled connection may be used: not when its
// proxy is down, nor when it was dialed before the proxy's last failure
// (the proxy may be back, but that connection is to the one that failed).
func (x *proxies) usable(c redis.Conn) bool {
	pc, ok := c.(*proxyConn)
	if !ok || len(x.addrs) == 1 { // one address: nowhere else to go
		return true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.state[pc.i]
	return !s.down && s.gen == pc.gen
}

// ProxyHealth is the state of one address of a store.
type ProxyHealth struct {
	Addr    string
	Up      bool
	LastErr string // why it is down
}

// Health returns the state of each address, in the order given.
func (s *Store) Health() []ProxyHealth {
	x := s.proxies
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]ProxyHealth, len(x.addrs))
	for i, a := range x.addrs {
		out[i] = ProxyHealth{Addr: a, Up: !x.state[i].down}
		if x.state[i].down && x.state[i].lastErr != nil {
			out[i].LastErr = x.state[i].lastErr.Error()
		}
	}
	return out
}
