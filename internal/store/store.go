package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/cluster"
	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// Conn says where the queue's Redis is and how to reach it: the
// connection options of every configuration that talks to Redis (Open's
// Options, the dashboard's ui.Options, the worker's [redis] table, and
// the fields of the same names of delayq.Options, which a client passes
// on here). Zero values take the defaults of whoever reads them: Open's
// are named here; the others name theirs.
type Conn struct {
	// Addr is host:port of a Redis server, or of a Twemproxy or Codis
	// proxy; or a comma-separated list of proxies in front of the same
	// backends (see proxies.go).
	Addr string
	// Password is sent with AUTH on each new connection when set.
	Password string
	// Namespace prefixes every key. Default DefaultNamespace.
	Namespace string
	// PoolSize caps open connections. Default DefaultPoolSize.
	PoolSize int
	// DialTimeout, ReadTimeout, WriteTimeout bound each connection's
	// connect, reply and write. Default: see portable.DialOptions.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Cluster says Addr lists seed nodes of a Redis Cluster: commands go
	// to the master that serves their key's slot (see package cluster).
	Cluster bool
}

// Options configures Open. Zero values take the defaults named.
type Options struct {
	Conn
	// Hook is passed to every connection (fault injection in tests).
	Hook func(cmd string, args []any) error
	// Logger receives the proxies' ups and downs, and what a write stored
	// but could not signal (see SetLimits). Default: discarded.
	Logger *slog.Logger
}

// Defaults for Options.
const (
	DefaultNamespace = "dq"
	DefaultPoolSize  = 64
)

// Store runs delayq's operations on one Redis server or proxy.
// It is safe for concurrent use.
type Store struct {
	pool    *redis.Pool
	ns      string
	cmds    atomic.Int64
	proxies *proxies
	router  *cluster.Router // in cluster mode (Conn.Cluster), else nil
	// seedsDown: in cluster mode, no seed gave the slot map at the last
	// try (an outage that began before any map was read).
	seedsDown atomic.Bool
	log       *slog.Logger
}

// Open returns a Store. It does not connect: the first operation does.
func Open(o Options) (*Store, error) {
	addrs, err := portable.SplitAddrs(o.Addr)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.PoolSize <= 0 {
		o.PoolSize = DefaultPoolSize
	}
	st := &Store{ns: o.Namespace, log: o.Logger}
	do := portable.DialOptions{
		Password: o.Password, ConnectTimeout: o.DialTimeout,
		ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		Hook: func(cmd string, args []any) error {
			if o.Hook != nil {
				if err := o.Hook(cmd, args); err != nil {
					return err
				}
			}
			st.cmds.Add(1)
			return nil
		},
	}
	probeTimeout := o.DialTimeout + o.ReadTimeout
	if probeTimeout <= 0 {
		probeTimeout = portable.DefaultConnectTimeout + portable.DefaultReadTimeout
	}
	st.proxies = newProxies(addrs, o.Logger, func(ctx context.Context, addr string) error {
		c, err := portable.Dial(ctx, addr, do)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.DoContext(ctx, "PING")
		return err
	})
	dial := func(ctx context.Context) (redis.Conn, error) {
		return st.proxies.dial(ctx, func(ctx context.Context, addr string) (*portable.Conn, error) {
			return portable.Dial(ctx, addr, do)
		})
	}
	if o.Cluster {
		cdo := do
		cdo.Cluster = true
		st.proxies.outage.cluster = true
		r, err := cluster.New(cluster.Options{
			Seeds:  addrs,
			Dial:   func(ctx context.Context, addr string) (*portable.Conn, error) { return portable.Dial(ctx, addr, cdo) },
			Logger: o.Logger,
			Down:   func(_ string, err error) { st.proxies.outage.begin(err) },
			Up:     st.proxies.outage.end,
		})
		if err != nil {
			return nil, err
		}
		st.router = r
		dial = st.clusterConn
	}
	pool := &redis.Pool{
		MaxIdle:     o.PoolSize,
		MaxActive:   o.PoolSize,
		Wait:        true,
		IdleTimeout: 4 * time.Minute,
		DialContext: dial,
		TestOnBorrow: func(c redis.Conn, t time.Time) error {
			st.proxies.probeDown(probeTimeout)
			if !st.proxies.usable(c) {
				return errors.New("its proxy is down")
			}
			if time.Since(t) < 5*time.Second {
				return nil
			}
			_, err := c.Do("PING")
			return err
		},
	}
	st.pool = pool
	return st, nil
}

// clusterConn returns a routing connection (cluster.Conn), once the
// slot map is known: until a seed node answers, it fails with an
// *UnreachableError, as a dial of a proxy does when none answers.
func (s *Store) clusterConn(ctx context.Context) (redis.Conn, error) {
	if err := s.router.Ready(ctx); err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrAuth) || errors.Is(err, ErrNotRedis) {
			return nil, err
		}
		err = &UnreachableError{Errs: []error{err}}
		s.seedsDown.Store(true)
		s.proxies.outage.begin(err)
		return nil, err
	}
	if s.seedsDown.CompareAndSwap(true, false) {
		s.proxies.outage.end(strings.Join(s.proxies.addrs, ","))
	}
	return s.router.Conn(), nil
}

// Commands returns the number of commands sent so far (AUTH included).
func (s *Store) Commands() int64 { return s.cmds.Load() }

// Pool returns the connection pool, for redsync.
func (s *Store) Pool() *redis.Pool { return s.pool }

// Namespace returns the key prefix.
func (s *Store) Namespace() string { return s.ns }

// Close closes the pool's idle connections, once the probes of proxies
// that are down have ended, and writes the summary of an outage that
// ended if it waits (see Outage).
func (s *Store) Close() error {
	s.proxies.probes.Wait()
	s.proxies.outage.close()
	return s.pool.Close()
}

// Outage returns the store's outage tracker (see Outage).
func (s *Store) Outage() *Outage { return s.proxies.outage }

// Unavailable reports whether err is a failure to reach Redis rather
// than an answer: no address answered a dial (ErrUnreachable), or a
// connection broke (reset, closed, timed out) or its proxy is not ready.
// Such a failure may end by itself.
func Unavailable(err error) bool {
	return err != nil && (errors.Is(err, ErrUnreachable) || isNetErr(err))
}

// retryKey is the context key of WithRetry.
type retryKey struct{}

// retry is a WithRetry bound.
type retry struct {
	start time.Time
	d     time.Duration
}

// WithRetry returns a context under which the store's operations dial
// again, with backoff, while no address answers (ErrUnreachable), for up
// to d from now; it registers them with the store's Outage meanwhile. A
// dial that failed sent nothing, so this is safe for any operation. A
// round trip whose connection broke once sent runs again only where it
// is safe to (see retry.go), within the same bound.
func WithRetry(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, retryKey{}, retry{start: time.Now(), d: d})
}

// Backoff of the dials of WithRetry.
const (
	retryDialMin = 50 * time.Millisecond
	retryDialMax = time.Second
)

func (s *Store) conn(ctx context.Context) (redis.Conn, error) {
	c, err := s.pool.GetContext(ctx)
	if err == nil {
		return c, nil
	}
	r, ok := ctx.Value(retryKey{}).(retry)
	if !ok || !errors.Is(err, ErrUnreachable) {
		return nil, fmt.Errorf("redis connection: %w", err)
	}
	done := s.proxies.outage.Wait(0)
	defer done()
	tries, wait := 1, retryDialMin
	for {
		left := time.Until(r.start.Add(r.d))
		if left <= 0 {
			return nil, fmt.Errorf("redis connection: no address answered for %v (%d dials); the last: %w", r.d, tries, err)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("redis connection: %w (%v after %d dials; last: %v)", ctx.Err(), time.Since(r.start).Round(time.Millisecond), tries, err)
		case <-t.C:
		}
		wait = min(2*wait, retryDialMax)
		tries++
		if c, err = s.pool.GetContext(ctx); err == nil {
			return c, nil
		}
		if !errors.Is(err, ErrUnreachable) {
			return nil, fmt.Errorf("redis connection: %w", err)
		}
	}
}
