package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// Conn is a redis.Conn over a cluster: each command goes to the master
// that serves its key's slot, on a connection to that node that Conn
// opens the first time it needs one and keeps until Close. A pipeline
// whose commands go to several nodes is one write to each, and its
// replies come back in the order sent.
//
// A command a node redirects is sent again where it says, and only its
// reply is returned: MOVED (the slot moved: the router learns it and
// reads the map again), ASK (the slot is migrating and the key already
// left: ASKING, then the command, on the target) and TRYAGAIN (a
// migration is moving the key: after a pause). None of those replies
// means the command ran, so sending it again is safe. A redirected
// command goes on a connection of its own, never behind the pipeline's
// other replies; those commands of the pipeline that the node served
// have run by then, so during a migration the commands of one pipeline
// on different keys may run in another order than sent.
//
// CLUSTERDOWN is returned as it comes, for the caller's outage handling
// (see store's Unavailable). Conn is not safe for concurrent use.
type Conn struct {
	r       *Router
	nodes   map[string]*portable.Conn // pipelines
	side    map[string]*portable.Conn // redirected commands, one at a time
	pending []sent
	dirty   []string // nodes sent to since the last Flush
	err     error    // sticky: the connection is done
}

// sent is a command in flight.
type sent struct {
	addr string
	cmd  string
	args []any
}

var (
	_ redis.Conn            = (*Conn)(nil)
	_ redis.ConnWithContext = (*Conn)(nil)
	_ redis.ConnWithTimeout = (*Conn)(nil)
)

// maxRedirects bounds the redirections one command follows.
const maxRedirects = 8

// tryAgainPause is the wait before a command TRYAGAIN refused is sent
// again.
const tryAgainPause = 25 * time.Millisecond

// Conn returns a new routing connection.
func (r *Router) Conn() *Conn {
	return &Conn{r: r, nodes: map[string]*portable.Conn{}, side: map[string]*portable.Conn{}}
}

// keyOf returns the key a command routes by, and false for one without:
// of the portable set, PING and AUTH (the router sends ASKING and
// CLUSTER SLOTS on node connections itself).
func keyOf(cmd string, args []any) (string, bool) {
	switch strings.ToUpper(cmd) {
	case "PING", "AUTH":
		return "", false
	case "EVALSHA", "EVAL":
		if len(args) < 3 || str(args[1]) == "0" {
			return "", false
		}
		return str(args[2]), true
	}
	if len(args) == 0 {
		return "", false
	}
	return str(args[0]), true
}

func str(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// route returns the node for a command.
func (c *Conn) route(ctx context.Context, cmd string, args []any) (string, error) {
	key, ok := keyOf(cmd, args)
	if !ok {
		for a := range c.nodes {
			return a, nil
		}
		return c.r.anyAddr(), nil
	}
	return c.r.Addr(ctx, Slot(key))
}

// node returns the connection to addr in m, dialing it if needed.
func (c *Conn) node(ctx context.Context, m map[string]*portable.Conn, addr string) (*portable.Conn, error) {
	if nc := m[addr]; nc != nil {
		if nc.Err() == nil {
			return nc, nil
		}
		nc.Close()
		delete(m, addr)
	}
	nc, err := c.r.o.Dial(ctx, addr)
	if err != nil {
		if unreachable(err) {
			c.r.failed(addr, err)
		}
		c.r.refreshSoon() // the node may have failed over
		return nil, err
	}
	m[addr] = nc
	return nc, nil
}

// failAt is fail for err, a failure on the connection to addr.
func (c *Conn) failAt(addr string, err error) error {
	if unreachable(err) {
		c.r.failed(addr, err)
	}
	return c.fail(err)
}

// unreachable reports whether err says a node could not be reached or
// broke, rather than that the caller gave up (its context) or a check
// refused a command.
func unreachable(err error) bool {
	return isNetErr(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, portable.ErrNotPortable) && !errors.Is(err, portable.ErrInjected)
}

// clusterDown reports whether re says the cluster cannot serve.
func clusterDown(re redis.Error) bool { return strings.HasPrefix(string(re), "CLUSTERDOWN") }

// fail makes err the connection's: it is done (see Err).
func (c *Conn) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	if isNetErr(err) {
		c.r.refreshSoon()
	}
	return err
}

// Send routes and buffers a command.
func (c *Conn) Send(cmd string, args ...any) error {
	return c.send(context.Background(), cmd, args)
}

func (c *Conn) send(ctx context.Context, cmd string, args []any) error {
	if c.err != nil {
		return c.err
	}
	addr, err := c.route(ctx, cmd, args)
	if err != nil {
		return c.fail(err)
	}
	nc, err := c.node(ctx, c.nodes, addr)
	if err != nil {
		return c.fail(err)
	}
	if err := nc.Send(cmd, args...); err != nil {
		return c.failAt(addr, err)
	}
	c.pending = append(c.pending, sent{addr, cmd, args})
	if !slices.Contains(c.dirty, addr) {
		c.dirty = append(c.dirty, addr)
	}
	return nil
}

// Flush writes the buffered commands, one write per node.
func (c *Conn) Flush() error {
	if c.err != nil {
		return c.err
	}
	dirty := c.dirty
	c.dirty = c.dirty[:0]
	for _, addr := range dirty {
		if err := c.nodes[addr].Flush(); err != nil {
			return c.failAt(addr, err)
		}
	}
	return nil
}

// Receive returns the reply of the oldest command in flight.
func (c *Conn) Receive() (any, error) { return c.ReceiveContext(context.Background()) }

// ReceiveWithTimeout is Receive with a read timeout.
func (c *Conn) ReceiveWithTimeout(d time.Duration) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.ReceiveContext(ctx)
}

// ReceiveContext is Receive bounded by ctx.
func (c *Conn) ReceiveContext(ctx context.Context) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(c.pending) == 0 {
		return nil, errors.New("cluster: receive with no command in flight")
	}
	p := c.pending[0]
	c.pending = c.pending[1:]
	reply, err := c.nodes[p.addr].ReceiveContext(ctx)
	return c.replied(ctx, p, reply, err)
}

// replied reads the reply of p, from its node: an answer, a
// redirection it follows (see redirected), or a failure.
func (c *Conn) replied(ctx context.Context, p sent, reply any, err error) (any, error) {
	if err == nil {
		c.r.answered(p.addr)
		return reply, nil
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return nil, c.failAt(p.addr, err)
	}
	if clusterDown(re) {
		c.r.failed(p.addr, re)
		return nil, re
	}
	c.r.answered(p.addr)
	return c.redirected(ctx, p, re)
}

// redirected follows a command's redirections (see Conn) until it gets
// an answer, and returns it.
func (c *Conn) redirected(ctx context.Context, p sent, re redis.Error) (any, error) {
	for range maxRedirects {
		msg := string(re)
		asking := false
		var addr string
		switch {
		case strings.HasPrefix(msg, "MOVED "), strings.HasPrefix(msg, "ASK "):
			f := strings.Fields(msg)
			if len(f) != 3 {
				return nil, re
			}
			slot, err := strconv.Atoi(f[1])
			if err != nil || slot < 0 || slot >= Slots {
				return nil, re
			}
			addr = f[2]
			if f[0] == "MOVED" {
				c.r.learn(slot, addr)
				c.r.refreshSoon()
			} else {
				asking = true
			}
		case strings.HasPrefix(msg, "TRYAGAIN"):
			t := time.NewTimer(tryAgainPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, c.fail(ctx.Err())
			case <-t.C:
			}
			a, err := c.route(ctx, p.cmd, p.args)
			if err != nil {
				return nil, c.fail(err)
			}
			addr = a
		default:
			return nil, re // an answer: the command's own error, or CLUSTERDOWN
		}
		nc, err := c.node(ctx, c.side, addr)
		if err != nil {
			return nil, c.fail(err) // node told the router
		}
		var reply any
		if asking {
			if err := nc.Send("ASKING"); err != nil {
				return nil, c.failAt(addr, err)
			}
			if err := nc.Send(p.cmd, p.args...); err != nil {
				return nil, c.failAt(addr, err)
			}
			if err := nc.Flush(); err != nil {
				return nil, c.failAt(addr, err)
			}
			if _, err := nc.ReceiveContext(ctx); err != nil {
				return nil, c.failAt(addr, fmt.Errorf("ASKING on %s: %w", addr, err))
			}
			reply, err = nc.ReceiveContext(ctx)
		} else {
			reply, err = nc.DoContext(ctx, p.cmd, p.args...)
		}
		if err == nil {
			c.r.answered(addr)
			return reply, nil
		}
		if !errors.As(err, &re) {
			return nil, c.failAt(addr, err)
		}
		if clusterDown(re) {
			c.r.failed(addr, re)
			return nil, re
		}
	}
	return nil, fmt.Errorf("cluster: %s redirected %d times, the last: %w", p.cmd, maxRedirects, re)
}

// Do sends a command and returns its reply, after reading the replies of
// the commands in flight before it.
func (c *Conn) Do(cmd string, args ...any) (any, error) {
	return c.DoContext(context.Background(), cmd, args...)
}

// DoWithTimeout is Do with a read timeout.
func (c *Conn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.DoContext(ctx, cmd, args...)
}

// DoContext is Do bounded by ctx. With cmd "", it flushes and returns
// the replies of every command in flight, as redigo's Do does.
func (c *Conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	if cmd != "" && len(c.pending) == 0 {
		return c.do(ctx, cmd, args)
	}
	if cmd != "" {
		if err := c.send(ctx, cmd, args); err != nil {
			return nil, err
		}
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	all := make([]any, 0, len(c.pending))
	var last any
	var lastErr error
	for len(c.pending) > 0 {
		last, lastErr = c.ReceiveContext(ctx)
		if c.err != nil {
			return nil, c.err
		}
		if lastErr != nil {
			all = append(all, lastErr)
		} else {
			all = append(all, last)
		}
	}
	if cmd == "" {
		return all, nil
	}
	return last, lastErr
}

// do is DoContext of one command with none in flight: one round trip on
// its node's connection.
func (c *Conn) do(ctx context.Context, cmd string, args []any) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	addr, err := c.route(ctx, cmd, args)
	if err != nil {
		return nil, c.fail(err)
	}
	nc, err := c.node(ctx, c.nodes, addr)
	if err != nil {
		return nil, c.fail(err)
	}
	reply, err := nc.DoContext(ctx, cmd, args...)
	return c.replied(ctx, sent{addr, cmd, args}, reply, err)
}

// Err reports whether the connection is done: a connection to a node
// broke, or a read was cut by its context. A pool discards it.
func (c *Conn) Err() error {
	if c.err != nil {
		return c.err
	}
	for _, m := range []map[string]*portable.Conn{c.nodes, c.side} {
		for _, nc := range m {
			if err := nc.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the connections to every node.
func (c *Conn) Close() error {
	var errs []error
	for _, m := range []map[string]*portable.Conn{c.nodes, c.side} {
		for a, nc := range m {
			errs = append(errs, nc.Close())
			delete(m, a)
		}
	}
	if c.err == nil {
		c.err = errors.New("cluster: connection closed")
	}
	return errors.Join(errs...)
}

// isNetErr reports whether err is a connection's failure, not an answer.
func isNetErr(err error) bool {
	var re redis.Error
	return err != nil && !errors.As(err, &re)
}
