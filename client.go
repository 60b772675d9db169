package delayq

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// Defaults for Options.
const (
	DefaultNamespace    = store.DefaultNamespace
	DefaultPartitions   = 16
	DefaultMaxBodyBytes = 1 << 20
	DefaultPoolSize     = store.DefaultPoolSize
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = 3 * time.Second
	DefaultWriteTimeout = 3 * time.Second
)

// Options configures a Client. The zero value of each field means its default.
type Options struct {
	// Addr is host:port of a Redis server or of a Codis/Twemproxy proxy. Required.
	Addr string
	// Password is sent with AUTH on every connection when set.
	Password string
	// Namespace prefixes every key. Default DefaultNamespace ("dq").
	Namespace string
	// Partitions is the partition count of topics this client creates, and
	// is checked against the stored count of existing topics.
	// Default DefaultPartitions (16).
	Partitions int
	// MaxBodyBytes caps message bodies. Default DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int
	// PoolSize caps open connections. Default DefaultPoolSize (64).
	PoolSize int
	// DialTimeout, ReadTimeout and WriteTimeout bound each connection's
	// connect, reply and write. Defaults DefaultDialTimeout (2s),
	// DefaultReadTimeout (3s), DefaultWriteTimeout (3s).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Logger receives the client's and its consumers' logs.
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DisableCoalescing makes each Enqueue call write on its own instead of
	// joining the batch of concurrent calls. Default false.
	DisableCoalescing bool

	// hook injects faults in tests (see portable.DialOptions.Hook).
	hook func(cmd string, args []any) error
}

// Client enqueues and manages messages. It is safe for concurrent use.
type Client struct {
	opts  Options
	store *store.Store
	log   *slog.Logger

	mu     sync.Mutex
	topics map[string]bool // topics whose meta was checked

	co coalescer
}

// coalescer is the state that joins concurrent Enqueue and EnqueueAsync
// calls into batches (see coalesce.go).
type coalescer struct {
	coalesceOnce sync.Once
	enq          chan *enqReq
	gathering    chan struct{}  // the turn to gather a batch (capacity 1)
	partial      chan struct{}  // slots for batches written before they are full
	sendMu       sync.Mutex     // orders requests being queued with Close
	senders      sync.WaitGroup // requests being queued
	closed       chan struct{}  // closed by Close: no new request
	shut         chan struct{}  // closed once no request is being queued: flushers drain and stop
	closeOnce    sync.Once
	wg           sync.WaitGroup
}

// New returns a Client. It validates the options but does not connect:
// the first operation does.
func New(opts Options) (*Client, error) {
	if opts.Addr == "" {
		return nil, fmt.Errorf("%w: Options.Addr is empty", ErrInvalid)
	}
	if opts.Partitions == 0 {
		opts.Partitions = DefaultPartitions
	}
	if err := partition.ValidateCount(opts.Partitions); err != nil {
		return nil, fmt.Errorf("%w: Options.Partitions: %v", ErrInvalid, err)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("%w: Options.MaxBodyBytes %d is negative", ErrInvalid, opts.MaxBodyBytes)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if err := partition.ValidateTopic(opts.Namespace); err != nil {
		return nil, fmt.Errorf("%w: Options.Namespace: %v", ErrInvalid, err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	st, err := store.Open(store.Options{
		Addr: opts.Addr, Password: opts.Password, Namespace: opts.Namespace, PoolSize: opts.PoolSize,
		DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout,
		Hook: opts.hook,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &Client{
		opts: opts, store: st, log: opts.Logger.With("component", "delayq"),
		topics: map[string]bool{}, co: coalescer{closed: make(chan struct{}), shut: make(chan struct{})},
	}, nil
}

// Close writes the messages queued by Enqueue and EnqueueAsync calls,
// then releases the client's connections; calls made after it start fail
// with ErrClosed. Consumers made from it must be stopped first. Safe to
// call more than once.
func (c *Client) Close() error {
	first := false
	c.co.closeOnce.Do(func() {
		first = true
		c.co.sendMu.Lock()
		close(c.co.closed)
		c.co.sendMu.Unlock()
		c.co.senders.Wait() // calls already queueing get in (flushers still drain)
		close(c.co.shut)
		c.co.wg.Wait() // the flushers write what is queued, then return
	})
	if !first {
		return nil
	}
	return c.store.Close()
}

// Commands returns the number of Redis commands the client and its
// consumers have sent so far. Safe for concurrent use.
func (c *Client) Commands() int64 { return c.store.Commands() }

// Partitions returns the configured partition count.
func (c *Client) Partitions() int { return c.opts.Partitions }

// ensureTopic checks the topic's name and partition count once per client.
func (c *Client) ensureTopic(ctx context.Context, topic string) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	c.mu.Lock()
	ok := c.topics[topic]
	c.mu.Unlock()
	if ok {
		return nil
	}
	if err := c.store.EnsureTopic(ctx, topic, c.opts.Partitions, c.opts.Now().UnixMilli()); err != nil {
		return err
	}
	c.mu.Lock()
	c.topics[topic] = true
	c.mu.Unlock()
	return nil
}

// validateTopic checks a topic's name.
func validateTopic(topic string) error {
	if err := partition.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// partitionOf validates id and returns its partition.
func (c *Client) partitionOf(id string) (int, error) {
	if err := partition.ValidateID(id); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return partition.For(id, c.opts.Partitions), nil
}
