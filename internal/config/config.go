package config

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/delayq/delayq"
)

// Defaults that delayq's library does not define.
const (
	// DefaultAddr is the default of [redis] addr.
	DefaultAddr = "127.0.0.1:6379"
	// DefaultLogFormat is the default of [log] format.
	DefaultLogFormat = "text"
	// DefaultLogLevel is the default of [log] level.
	DefaultLogLevel = "info"
	// DefaultMaxBodyBytes is the default of [http] max_body_bytes.
	DefaultMaxBodyBytes = 1 << 20
)

// Handler types, the values of [topic.handler] type.
const (
	HandlerHTTP = "http" // POST the body to a URL; 2xx acks
	HandlerExec = "exec" // run a command with the body on stdin; exit 0 acks
)

// Config is the worker's configuration. Parse and Load return it with the
// defaults filled in. A Config is a plain value: not safe for concurrent
// mutation, safe to read from many goroutines.
type Config struct {
	Redis  Redis
	Worker Worker
	HTTP   HTTP
	Log    Log
	// Tracing is the [tracing] table: OpenTelemetry traces, exported when
	// it has an endpoint.
	Tracing Tracing
	Topics  []Topic // the [[topic]] tables, in file order
	// Source is the file name the config was read from, used in errors.
	Source string
}

// Redis is the [redis] table: where the queue lives, with the keys addr
// (host:port of Redis or of a Twemproxy/Codis proxy, or several proxies'
// separated by commas: the TOML key takes a string or an array; default
// DefaultAddr), password (sent with AUTH when set), namespace (the key
// prefix; default delayq.DefaultNamespace, "dq"), pool_size (connections
// per client; default delayq.DefaultPoolSize) and dial_timeout,
// read_timeout and write_timeout (defaults delayq.DefaultDialTimeout,
// DefaultReadTimeout and DefaultWriteTimeout), and cluster (true: addr
// lists seed nodes of a Redis Cluster; default false).
type Redis struct {
	Addr                                   string
	Password                               string
	Namespace                              string
	PoolSize                               int
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	Cluster                                bool
}

// Worker is the [worker] table: this process's consumers.
type Worker struct {
	ID           string        // names this worker in leases and stats. Default host-pid.
	Lease        time.Duration // partition lease expiry. Default delayq.DefaultLease.
	PollInterval time.Duration // longest pause between two polls of a partition. Default delayq.DefaultPollInterval.
	// IdlePollInterval is the longest pause of a partition that had
	// nothing to claim (see delayq.ConsumerOptions.IdlePollInterval).
	// Default and at most delayq.DefaultIdlePollInterval.
	IdlePollInterval time.Duration
	ShutdownTimeout  time.Duration // time running deliveries get on shutdown. Default delayq.DefaultShutdownTimeout.
}

// HTTP is the [http] table: the API for producers, /metrics, /healthz
// and /readyz.
type HTTP struct {
	Listen       string // host:port to serve on; "" serves nothing (the default).
	Token        string // bearer token the API requires; "" requires none.
	MaxBodyBytes int    // requests above are refused with 413. Default DefaultMaxBodyBytes (1 MiB).
}

// Log is the [log] table.
type Log struct {
	Format string // "text" (the default) or "json".
	Level  string // "debug", "info" (the default), "warn" or "error".
}

// Topic is one [[topic]] table: a topic this worker consumes and the
// handler its messages go to.
type Topic struct {
	Name string // required: [A-Za-z0-9._-]{1,100}
	// Partitions is the count the topic gets if this worker creates it;
	// an existing topic keeps its stored count (a different value here is
	// logged as a warning). 0 when not set: delayq.DefaultPartitions (16).
	Partitions  int
	Concurrency int             // handlers this worker runs at once ([topic.limits] caps the fleet). Default delayq.DefaultConcurrency.
	Timeout     time.Duration   // time one handler call may take. Default delayq.DefaultTimeout.
	MaxAttempts int             // deliveries before a message is dead. Default delayq.DefaultMaxAttempts.
	Backoff     []time.Duration // retry ladder. Default delayq.DefaultBackoff.
	Handler     Handler         // required
	// Limits is the [topic.limits] table: the fleet-wide limits the topic
	// gets if its stored limits were never set nor cleared (see
	// delayq.TopicConfig.Limits); nil when the table is absent. The
	// stored limits are the truth: after the first worker set them,
	// change them with "delayq limits" (a worker whose file differs
	// warns), so a rolling deploy with two versions of the file never
	// flips them.
	Limits *delayq.Limits
	// AutoPartitions is set by partitions = "auto", with the optional
	// [topic.auto_partitions] table (min, max, grow_after, shrink_after,
	// cooldown): the topic's count then follows its live consumers (see
	// delayq.TopicConfig.AutoPartitions). As with Limits, the stored
	// settings are the truth once set; change them with "delayq
	// partitions --auto". nil with a count, or no key.
	AutoPartitions *delayq.AutoPartitions
	Schedules      []Schedule // the [[topic.schedule]] tables, in file order
	// OnDuplicate is what an enqueue of the worker's HTTP API to this
	// topic does with an id that exists when its body does not say
	// (delayq.Message.OnDuplicate). Default delayq.Reject (a 409).
	OnDuplicate delayq.OnDuplicate
	// MaxWait bounds a debounce window (delayq.Message.MaxWait), for a
	// body that sets no max_wait; only with OnDuplicate delayq.Debounce.
	// 0 when not set: no bound.
	MaxWait time.Duration
	// UniqueFor is the unique_for key: the default uniqueness window
	// (delayq.Admin.SetUniqueFor) the topic gets if its window was never
	// set, 0 for none; nil when the key is absent. As with Limits, the
	// stored window is the truth once set: change it with "delayq
	// unique-for" (a worker whose file differs warns).
	UniqueFor *time.Duration
}

// Handler is a [topic.handler] table.
type Handler struct {
	Type string // HandlerHTTP or HandlerExec

	// http
	URL     string            // http:// or https:// URL to POST to
	Secret  string            // when set, the body is signed: X-Delayq-Signature: sha256=<hex HMAC-SHA256>
	Headers map[string]string // extra request headers

	// exec
	Command []string // program and arguments
}

// Default returns the configuration of an empty file.
func Default() *Config {
	return &Config{
		Redis: Redis{
			Addr:         DefaultAddr,
			Namespace:    delayq.DefaultNamespace,
			PoolSize:     delayq.DefaultPoolSize,
			DialTimeout:  delayq.DefaultDialTimeout,
			ReadTimeout:  delayq.DefaultReadTimeout,
			WriteTimeout: delayq.DefaultWriteTimeout,
		},
		Worker: Worker{
			ID:               defaultWorkerID(),
			Lease:            delayq.DefaultLease,
			PollInterval:     delayq.DefaultPollInterval,
			IdlePollInterval: delayq.DefaultIdlePollInterval,
			ShutdownTimeout:  delayq.DefaultShutdownTimeout,
		},
		HTTP:    HTTP{MaxBodyBytes: DefaultMaxBodyBytes},
		Log:     Log{Format: DefaultLogFormat, Level: DefaultLogLevel},
		Tracing: Tracing{ServiceName: DefaultServiceName, SampleRatio: DefaultSampleRatio},
	}
}

// defaultTopic returns a topic with the defaults and no name or handler.
func defaultTopic() Topic {
	return Topic{
		Concurrency: delayq.DefaultConcurrency,
		Timeout:     delayq.DefaultTimeout,
		MaxAttempts: delayq.DefaultMaxAttempts,
		Backoff:     append([]time.Duration(nil), delayq.DefaultBackoff...),
	}
}

// defaultWorkerID returns "host-pid".
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Topic returns the configured topic called name, or nil.
func (c *Config) Topic(name string) *Topic {
	for i := range c.Topics {
		if c.Topics[i].Name == name {
			return &c.Topics[i]
		}
	}
	return nil
}

// SlogLevel returns the slog level of Level (info when Level is invalid).
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
