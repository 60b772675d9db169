package portable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// DialOptions configures Dial. The zero value dials with the defaults below.
type DialOptions struct {
	// Password, when set, is sent with AUTH after connecting.
	Password string
	// ConnectTimeout bounds the TCP connect. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ReadTimeout bounds each reply. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Hook, when set, is called before each command is sent, with the
	// command's shape. A non-nil error aborts the command: the commands
	// already pipelined on the connection are flushed and their replies
	// read (as if a process died right after sending them), the connection
	// is closed and the error is returned. Tests use it to inject crashes.
	Hook func(cmd string, args []any) error
	// Cluster allows, besides the portable set, the commands a client
	// of a Redis Cluster sends to route (see CheckCluster). Set only by
	// the cluster router (package cluster).
	Cluster bool
}

// Defaults for DialOptions.
const (
	DefaultConnectTimeout = 2 * time.Second
	DefaultReadTimeout    = 3 * time.Second
	DefaultWriteTimeout   = 3 * time.Second
)

// Dial connects to addr (a Redis server or a proxy) and returns a checking
// connection. It sends nothing but AUTH (when a password is set): never
// HELLO, CLIENT SETNAME or SELECT.
func Dial(ctx context.Context, addr string, o DialOptions) (*Conn, error) {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	var sc *sendConn
	d := net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	c, err := redis.DialContext(ctx, "tcp", addr,
		redis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			sc = &sendConn{Conn: nc, addr: addr}
			return sc, nil
		}),
		redis.DialReadTimeout(o.ReadTimeout),
		redis.DialWriteTimeout(o.WriteTimeout),
	)
	if err != nil {
		return nil, dialErr(addr, err)
	}
	pc := &Conn{c: c, nc: sc, addr: addr, readTimeout: o.ReadTimeout, hook: o.Hook, cluster: o.Cluster}
	if o.Password != "" {
		if _, err := pc.Do("AUTH", o.Password); err != nil {
			pc.Close()
			var re redis.Error
			if errors.As(err, &re) { // any refusal of AUTH is one of the password
				return nil, &AuthError{Addr: addr, Reply: re}
			}
			return nil, fmt.Errorf("auth %s: %w", addr, err)
		}
	}
	return pc, nil
}

// dialErr names addr in a failed dial's error, unless the error names it
// already: the net package's do ("dial tcp 127.0.0.1:1: connect:
// connection refused").
func dialErr(addr string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return err
	}
	return fmt.Errorf("dial %s: %w", addr, err)
}

// Conn is a redis.Conn that sends only portable commands. It is not safe
// for concurrent use, like the connection it wraps.
type Conn struct {
	c           redis.Conn
	nc          *sendConn // under c: closed to interrupt a read when a context ends
	addr        string    // as dialed
	readTimeout time.Duration
	hook        func(cmd string, args []any) error
	pending     int
	broken      error
	cluster     bool // CheckCluster, not Check
}

var (
	_ redis.Conn            = (*Conn)(nil)
	_ redis.ConnWithContext = (*Conn)(nil)
	_ redis.ConnWithTimeout = (*Conn)(nil)
)

// ErrInjected is returned by commands a Hook aborted.
var ErrInjected = errors.New("delayq: injected fault")

func (c *Conn) check(cmd string, args []any) error {
	if c.broken != nil {
		return c.broken
	}
	if cmd == "" { // redigo's flush-and-receive-all form
		return nil
	}
	check := Check
	if c.cluster {
		check = CheckCluster
	}
	shape, err := check(cmd, args...)
	Record(shape, err)
	if err != nil {
		return err
	}
	if c.hook != nil {
		if herr := c.hook(cmd, args); herr != nil {
			// Let what was pipelined reach the server, then die.
			if c.pending > 0 {
				c.c.Flush()
				for ; c.pending > 0; c.pending-- {
					c.c.Receive()
				}
			}
			c.broken = herr
			c.c.Close()
			return herr
		}
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Err reports a fatal error of the connection.
func (c *Conn) Err() error {
	if c.broken != nil {
		return c.broken
	}
	return c.named(c.c.Err())
}

// Do checks and sends a command and returns its reply.
func (c *Conn) Do(cmd string, args ...any) (any, error) {
	if err := c.check(cmd, args); err != nil {
		return nil, err
	}
	c.pending = 0
	r, err := c.c.Do(cmd, args...)
	return r, c.named(err)
}

// DoContext is Do bounded by ctx.
func (c *Conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	if err := c.check(cmd, args); err != nil {
		return nil, err
	}
	c.pending = 0
	r, err := c.bounded(ctx, func(d time.Duration) (any, error) { return redis.DoWithTimeout(c.c, d, cmd, args...) })
	return r, c.named(err)
}

// named returns err naming the connection's address when it is the end
// of the stream (io.EOF says nothing of where it came from); other
// network errors name both ends already, and error replies need no
// address, except a refusal for want of a password (an *AuthError).
func (c *Conn) named(err error) error {
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return fmt.Errorf("%s closed the connection: %w", c.addr, err)
	}
	var re redis.Error
	if errors.As(err, &re) && isAuthReply(re) {
		return &AuthError{Addr: c.addr, Reply: re}
	}
	return err
}

// bounded runs f, a call that reads a reply within its timeout argument,
// bounded by ctx: the timeout is the read timeout or ctx's deadline if
// sooner, and if ctx ends meanwhile the connection is closed under f and
// ctx's error returned; the connection is then broken, as it would be
// after any failed read. redigo's own DoContext and ReceiveContext do the
// same with a goroutine per call: this costs a timer registration instead.
func (c *Conn) bounded(ctx context.Context, f func(time.Duration) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		c.broken = err
		c.c.Close()
		return nil, err
	}
	d := c.readTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < d {
			if left <= 0 {
				c.broken = context.DeadlineExceeded
				c.c.Close()
				return nil, c.broken
			}
			d = left
		}
	}
	if ctx.Done() == nil {
		return f(d)
	}
	stop := context.AfterFunc(ctx, func() { c.nc.Close() })
	r, err := f(d)
	if !stop() { // ctx ended: nc is closed, or about to be
		c.broken = ctx.Err()
		return nil, c.broken
	}
	if err != nil {
		// The read timed out at ctx's deadline, maybe before ctx's own
		// timer said so.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			c.broken = context.DeadlineExceeded
			return nil, c.broken
		}
		if ctx.Err() != nil {
			c.broken = ctx.Err()
			return nil, c.broken
		}
	}
	return r, err
}

// DoWithTimeout is Do with a read timeout.
func (c *Conn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	if err := c.check(cmd, args); err != nil {
		return nil, err
	}
	c.pending = 0
	r, err := redis.DoWithTimeout(c.c, d, cmd, args...)
	return r, c.named(err)
}

// Send checks and buffers a command.
func (c *Conn) Send(cmd string, args ...any) error {
	if err := c.check(cmd, args); err != nil {
		return err
	}
	c.pending++
	return c.c.Send(cmd, args...)
}

// Flush writes the buffered commands.
func (c *Conn) Flush() error {
	if c.broken != nil {
		return c.broken
	}
	if err := c.c.Flush(); err != nil {
		return err
	}
	if err := c.nc.send(); err != nil {
		c.broken = err
		c.c.Close()
		return err
	}
	return nil
}

// sendConn is the network connection under redigo's. It keeps what redigo
// writes and sends it in one write, when Conn.Flush says so or when a
// reply is read (redigo's Do reads right after its own flush). redigo's
// writer sends every 4 KiB, and a pipeline's large argument (a batch's
// segment) straight away: a pipeline of a few KiB would otherwise take
// two or three writes, and the proxy would read it in as many parts.
// A pipeline larger than sendMax goes in writes of up to sendMax bytes,
// so that the buffer, kept from one pipeline to the next, never grows
// past it: a batch of a few hundred messages does not allocate its bytes
// again in every write. What was written is sent with the write deadline
// redigo set for it.
type sendConn struct {
	net.Conn
	addr string // as dialed
	buf  []byte
	read bool // a byte was read: the first was checked (see Read)
}

// sendMax is the most bytes kept before a write.
const sendMax = 64 << 10

func (s *sendConn) Write(p []byte) (int, error) {
	if len(s.buf)+len(p) > sendMax {
		if err := s.send(); err != nil {
			return 0, err
		}
		if len(p) >= sendMax {
			return s.Conn.Write(p)
		}
	}
	if need := len(s.buf) + len(p); need > cap(s.buf) {
		grown := make([]byte, len(s.buf), min(max(2*cap(s.buf), need, 4<<10), sendMax))
		copy(grown, s.buf)
		s.buf = grown
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

// send writes what is kept.
func (s *sendConn) send() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.Conn.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

// Read reads the peer's bytes. The first byte a peer sends must begin a
// RESP2 reply (we send no HELLO, so nothing of RESP3 comes): when it
// does not, the peer is something else (an HTTP server, TLS, SSH) and
// Read fails with a *NotRedisError, where redigo would say "bad response
// line terminator" or worse.
func (s *sendConn) Read(p []byte) (int, error) {
	if err := s.send(); err != nil {
		return 0, err
	}
	n, err := s.Conn.Read(p)
	if !s.read && n > 0 {
		s.read = true
		switch p[0] {
		case '+', '-', ':', '$', '*':
		default:
			return 0, &NotRedisError{Addr: s.addr, Start: string(p[:min(n, 40)])}
		}
	}
	return n, err
}

// Receive reads one reply.
func (c *Conn) Receive() (any, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if c.pending > 0 {
		c.pending--
	}
	r, err := c.c.Receive()
	return r, c.named(err)
}

// ReceiveContext reads one reply, bounded by ctx.
func (c *Conn) ReceiveContext(ctx context.Context) (any, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if c.pending > 0 {
		c.pending--
	}
	r, err := c.bounded(ctx, func(d time.Duration) (any, error) { return redis.ReceiveWithTimeout(c.c, d) })
	return r, c.named(err)
}

// ReceiveWithTimeout reads one reply with a read timeout.
func (c *Conn) ReceiveWithTimeout(d time.Duration) (any, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if c.pending > 0 {
		c.pending--
	}
	r, err := redis.ReceiveWithTimeout(c.c, d)
	return r, c.named(err)
}

// The audit log: one line per distinct shape per process.
var audit struct {
	once sync.Once
	mu   sync.Mutex
	f    *os.File
	seen map[string]bool
}

// Record adds a command's shape, and the checker's verdict, to the audit
// log named by DELAYQ_COMMAND_AUDIT (once per distinct line per process).
// Dial's connections call it for every command; code that speaks RESP by
// other means must call it too. Safe for concurrent use.
func Record(shape Shape, err error) {
	audit.once.Do(func() {
		if path := os.Getenv("DELAYQ_COMMAND_AUDIT"); path != "" {
			f, ferr := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if ferr == nil {
				audit.f = f
				audit.seen = map[string]bool{}
			}
		}
	})
	if audit.f == nil {
		return
	}
	line := string(shape) + "\tok"
	if err != nil {
		line = string(shape) + "\tREFUSED: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if audit.seen[line] {
		return
	}
	audit.seen[line] = true
	audit.f.WriteString(line + "\n")
}
