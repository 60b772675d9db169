package delayq

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
	"github.com/delayq/delayq/poller"
	"go.opentelemetry.io/otel/trace"
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
	DefaultRetryFor     = 5 * time.Second
)

// Options configures a Client. The zero value of each field means its default.
type Options struct {
	// Addr is host:port of a Redis server or of a Codis/Twemproxy proxy,
	// or a comma-separated list of proxies in front of the same backends.
	// Addr or Addrs is required.
	Addr string
	// Addrs lists proxies in front of the same backends, as Addr's list
	// does. New connections go to each healthy proxy in turn; one that
	// fails is skipped and tried again with backoff, and logged once per
	// outage. Client.Proxies reports their health.
	Addrs []string
	// Password is sent with AUTH on every connection when set.
	Password string
	// Namespace prefixes every key. Default DefaultNamespace ("dq").
	Namespace string
	// Partitions is the partition count of topics this client creates.
	// An existing topic keeps the count stored in Redis, which every
	// client and consumer reads: a different value set here is logged as
	// a warning that names both, and changes nothing (see
	// Admin.SetPartitions for changing a topic's count).
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
	// Cluster says Addr (or Addrs) lists seed nodes of a Redis Cluster,
	// not proxies: the client reads the slot map from the first that
	// answers, sends each command to the master that serves its key's
	// slot, and follows the cluster's redirections (docs/cluster.md).
	Cluster bool
	// Logger receives the client's and its consumers' logs.
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DisableCoalescing makes each Send call write on its own instead of
	// joining the batch of concurrent calls. Default false.
	DisableCoalescing bool
	// RetryFor bounds how long a write of messages (Send,
	// SendBatch, SendAsync, Import) waits for Redis while no
	// address answers (an outage): it dials again with backoff until one
	// does, then writes; past RetryFor it fails with an error that wraps
	// ErrUnavailable and says how long it tried and the last dial's
	// error. A round trip whose connection broke under it (a proxy or a
	// backend restarting) runs again within the same bound, in ways that
	// never store a message twice: a given id the lost run stored counts
	// as created, generated ids are not written again (see
	// docs/proxies.md); a send with Replace or Debounce runs again too,
	// and reports what its lost run did ("created" for a message it
	// created), leaving what it wrote as it is.
	// The last dial may add up to DialTimeout.
	// Default DefaultRetryFor (5s); negative: no retry.
	RetryFor time.Duration
	// TracerProvider makes the spans of enqueues and deliveries (see the
	// docs/tracing.md). Default the global provider
	// (otel.GetTracerProvider), which follows whatever an application
	// sets with otel.SetTracerProvider, before or after New: a program
	// that has set up OpenTelemetry traces with no change here, and one
	// that has not pays a look-up per enqueue and a non-recording span
	// per delivery. Set it to trace with a provider of its own, as the
	// worker does, or to keep delayq's spans out of the global one; a
	// noop.TracerProvider starts no span at all (the trace context of
	// messages enqueued under one is still stored and passed on).
	TracerProvider trace.TracerProvider

	// hook injects faults in tests (see portable.DialOptions.Hook).
	hook func(cmd string, args []any) error
}

// Client enqueues and manages messages. It is safe for concurrent use.
type Client struct {
	opts  Options
	store *store.Store
	log   *slog.Logger

	// partitionsSet: Options.Partitions was given, not defaulted, so a
	// topic stored with another count is worth a warning.
	partitionsSet bool

	mu     sync.Mutex
	topics map[string]topicLayout // the topics' layouts, as last read
	warned map[string]bool        // topic and configured count warned about

	inspector *Inspector // see Client.Inspector
	admin     *Admin     // see Client.Admin

	co      coalescer            // joins concurrent Send and SendAsync calls into batches
	watch   watcher              // the change counters of the consumers' topics
	errLog  *poller.ErrLog       // the errors of the consumers' partition loops
	tracer  trace.Tracer         // of Options.TracerProvider
	tracing bool                 // the provider may record: spans are started (see newTracer)
	standIn trace.TracerProvider // the global stand-in the tracer came from, if so (see tracingNow)

	// exportRead, set only by tests before an export, is called by Export
	// after each read of partition p in its scan number scan (1, or 2 when
	// it scans again: see Export), last telling whether the read ended
	// that scan. A test holds the export there to move messages under it.
	exportRead func(p, scan int, last bool)
}

// New returns a Client. It validates the options but does not connect:
// the first operation does.
func New(opts Options) (*Client, error) {
	switch {
	case opts.Addr == "" && len(opts.Addrs) == 0:
		return nil, fmt.Errorf("%w: Options.Addr is empty", ErrInvalid)
	case opts.Addr != "" && len(opts.Addrs) > 0:
		return nil, fmt.Errorf("%w: Options.Addr %q and Options.Addrs %q are both set; set one", ErrInvalid, opts.Addr, opts.Addrs)
	case opts.Addr == "":
		opts.Addr = strings.Join(opts.Addrs, ",")
	}
	if _, err := portable.SplitAddrs(opts.Addr); err != nil {
		// An address that cannot be one would fail every dial, alike an
		// outage: refused here, named.
		return nil, fieldErr("Options.Addr", strconv.Quote(opts.Addr), "%v", err)
	}
	partitionsSet := opts.Partitions != 0
	if !partitionsSet {
		opts.Partitions = DefaultPartitions
	}
	if err := partition.ValidateCount(opts.Partitions); err != nil {
		return nil, fieldErr("Options.Partitions", opts.Partitions, "is out of range 1..%d", partition.MaxPartitions)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fieldErr("Options.MaxBodyBytes", opts.MaxBodyBytes, "is negative")
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
	if opts.RetryFor == 0 {
		opts.RetryFor = DefaultRetryFor
	}
	st, err := store.Open(store.Options{
		Conn: store.Conn{
			Addr: opts.Addr, Password: opts.Password, Namespace: opts.Namespace, PoolSize: opts.PoolSize,
			DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout,
			Cluster: opts.Cluster,
		},
		Hook: opts.hook, Logger: opts.Logger.With("component", "redis"),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c := &Client{
		opts: opts, store: st, log: opts.Logger.With("component", "delayq"), partitionsSet: partitionsSet,
		topics: map[string]topicLayout{}, warned: map[string]bool{}, co: coalescer{closed: make(chan struct{}), shut: make(chan struct{})},
	}
	c.co.c, c.watch.c = c, c
	c.inspector, c.admin = &Inspector{c}, &Admin{c}
	c.tracer, c.tracing, c.standIn = newTracer(opts.TracerProvider)
	c.errLog = poller.NewErrLog(opts.Logger, st.Outage().Quiet)
	return c, nil
}

// Close writes the messages queued by Send and SendAsync calls,
// then releases the client's connections; calls made after it start fail
// with ErrClosed. Consumers made from it must be stopped first. Safe to
// call more than once.
func (c *Client) Close() error {
	if !c.co.close() {
		return nil
	}
	return c.store.Close()
}

// ProxyHealth is the state of one of a client's addresses.
type ProxyHealth struct {
	Addr    string `json:"addr"`
	Up      bool   `json:"up"`
	LastErr string `json:"last_error,omitempty"` // why it is down
}

// Proxies returns the health of each address the client was given, as
// its last connection attempt to each found it. Safe for concurrent use.
func (c *Client) Proxies() []ProxyHealth {
	var out []ProxyHealth
	for _, h := range c.store.Health() {
		out = append(out, ProxyHealth{Addr: h.Addr, Up: h.Up, LastErr: h.LastErr})
	}
	return out
}

// Commands returns the number of Redis commands the client and its
// consumers have sent so far. Safe for concurrent use.
func (c *Client) Commands() int64 { return c.store.Commands() }
