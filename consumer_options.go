package delayq

import (
	"fmt"
	"os"
	"time"

	"github.com/delayq/delayq/lease"
)

// Defaults for ConsumerOptions.
const (
	DefaultConcurrency       = 16
	DefaultPrefetch          = 1024
	DefaultTimeout           = 30 * time.Second
	DefaultLease             = 10 * time.Second
	DefaultPollInterval      = time.Second
	DefaultIdlePollInterval  = 10 * time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultReconcileInterval = 5 * time.Second
	DefaultReconcileBatch    = 256
	DefaultClaimBatch        = 256
	DefaultChangePoll        = lease.DefaultChangePoll
)

// DefaultBackoff is the retry ladder: after the n-th failed attempt a
// message is due again DefaultBackoff[n-1] later (the last step repeats).
var DefaultBackoff = []time.Duration{
	10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute,
	4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute,
	9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// DefaultMaxAttempts is one first delivery plus one retry per step of
// DefaultBackoff.
const DefaultMaxAttempts = 17

// ConsumerOptions configures a Consumer. The zero value of each field
// means its default.
type ConsumerOptions struct {
	// Topic to consume. Required.
	Topic string
	// ID names this consumer in leases and stats. Default "host-pid-xxxx".
	ID string
	// Concurrency is the number of handlers run at once. Default DefaultConcurrency (16).
	Concurrency int
	// Prefetch is how many messages may be claimed beyond the free handler
	// slots: messages claimed ahead of their due time (held in memory until
	// due) and due ones waiting for a slot. Claim-ahead keeps lateness low
	// only while Prefetch exceeds the messages due within 1.5 poll
	// intervals (about 1.5 × rate × PollInterval); the next owner of a
	// partition whose consumer died holding them returns them at takeover.
	// A held message's delivery starts in Redis 5 ms before its due, or up
	// to 5 s before when many fall due with it, so that a burst claimed
	// ahead starts on time: a Delete or Reschedule after that start gets
	// ErrRunning (see docs/guarantees.md). Default DefaultPrefetch (1024).
	Prefetch int
	// Timeout bounds one handler call (the topic's time to run): its
	// context ends Timeout after its start, or up to 10 ms later, since
	// the deliveries of a partition that start within 10 ms share one
	// deadline. The message's visibility deadline is its due time plus
	// Timeout plus a margin, the safety net for a handler that hangs. A
	// change of owner does not wait for it. Default DefaultTimeout (30s).
	Timeout time.Duration
	// MaxAttempts caps deliveries of messages that do not set their own.
	// Default DefaultMaxAttempts (17).
	MaxAttempts int
	// Backoff is the retry ladder. Default DefaultBackoff.
	Backoff []time.Duration
	// Lease is the partition lease's expiry; it is extended every Lease/3,
	// or every Lease/2 while its partition is idle (nothing held, running
	// or due within the poll's reach). While quiet, idle with nothing due
	// within 4 × Lease, it is extended to 4 × Lease every 2 × Lease, and
	// the consumer's membership to match (see docs/guarantees.md): a
	// consumer that dies then keeps its quiet partitions up to 4 × Lease,
	// which delays only messages written after it died, never one due
	// when it died. Default DefaultLease (10s).
	Lease time.Duration
	// Heartbeat is how often the consumer renews its membership of the
	// topic (which expires after 3 heartbeats), recomputes its fair share
	// and tries to acquire partitions it lacks. Default Lease/3.
	Heartbeat time.Duration
	// ChangePoll is how often the topic's change counter is read, which
	// consumers bump when they join, leave or give a partition up: on a
	// change the consumer recomputes its fair share and takes free
	// partitions at once, so a partition handed over waits about
	// ChangePoll for its next owner, not a heartbeat. Each tick of the
	// shortest ChangePoll among the client's consumers reads the
	// namespace's change version (one HGET), and the counters of every
	// topic they run (one HMGET) only when it moved.
	// Default DefaultChangePoll (35ms).
	ChangePoll time.Duration
	// PollInterval is the longest sleep between two polls of a partition;
	// messages due within the next PollInterval are claimed ahead and held
	// until due. Default DefaultPollInterval (1s). Above 40s, claims reach
	// more than a minute ahead, where messages are written index and
	// record at once (see Message.ID): a claim that meets such an index
	// entry before its record has landed drops it, and that message comes
	// a reconciler pass late (never lost); one that meets the entry an
	// enqueue of a duplicate id added, in the moment before the enqueue
	// removes it, delivers the existing message once more.
	PollInterval time.Duration
	// IdlePollInterval is the longest sleep of a partition whose last poll
	// found nothing to claim. Its look (one ZRANGEBYSCORE) also learns
	// when the earliest message there falls due, and the partition polls
	// again a PollInterval before that. Producers wake the owner when they
	// write a message due within WakeAhead (12s), so a message due sooner
	// than the next look starts on time; one whose wake-up was lost (its
	// producer died between the write and the wake-up, or the wake-up's
	// command failed) starts at most IdlePollInterval late. Shorter costs
	// more Redis commands: with the defaults, a quiet partition's lease
	// extensions and looks cost 0.25 commands a second (see Lease).
	// Default and at most DefaultIdlePollInterval (10s).
	IdlePollInterval time.Duration
	// ShutdownTimeout bounds how long Run waits for running handlers after
	// its context is done. Default DefaultShutdownTimeout (30s).
	ShutdownTimeout time.Duration
	// ReconcileInterval is the pause between two reconciler passes over a
	// partition's records; after a pass that completes a sweep of every
	// record, the next sweep starts 12 intervals later. A record a crash
	// left out of every index is re-indexed within
	// (12 + ceil(records/ReconcileBatch)) × ReconcileInterval.
	// Default DefaultReconcileInterval (5s).
	ReconcileInterval time.Duration
	// ReconcileBatch is about how many records one reconciler pass reads.
	// Default DefaultReconcileBatch (256).
	ReconcileBatch int
	// ClaimBatch caps the ids one claim takes. When Concurrency+Prefetch
	// slots are all taken, a partition waits up to 3 ms after slots come
	// back for min(ClaimBatch, (Concurrency+Prefetch)/4) of them before it
	// claims (at once when a handler would idle meanwhile: a Prefetch
	// below Concurrency and no claimed message waiting), and a partition's
	// outcomes (acks, retries) wait up to 1 ms for as many while more of
	// its deliveries run, so that busy partitions claim and ack a hundred
	// messages or more per round trip.
	// Default DefaultClaimBatch (256).
	ClaimBatch int
	// Limit, when positive, stops the consumer after that many deliveries
	// have started: Run then shuts down gracefully and returns nil.
	Limit int

	// moveSettle shortens poller.DefaultMoveSettle in tests of the
	// library that change the partition count; the end-to-end tests run
	// with the default.
	moveSettle time.Duration
	// autoCheck shortens AutoCheckEvery in tests of the library.
	autoCheck time.Duration
}

func (o *ConsumerOptions) setDefaults() error {
	if o.ID == "" {
		host, _ := os.Hostname()
		o.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), NewID(time.Now())[22:])
	}
	def := func(d *time.Duration, v time.Duration, name string) error {
		if *d == 0 {
			*d = v
		}
		if *d < 0 {
			return fieldErr("ConsumerOptions."+name, *d, "is negative")
		}
		return nil
	}
	defInt := func(n *int, v int, name string) error {
		if *n == 0 {
			*n = v
		}
		if *n < 0 {
			return fieldErr("ConsumerOptions."+name, *n, "is negative")
		}
		return nil
	}
	for _, err := range []error{
		defInt(&o.Concurrency, DefaultConcurrency, "Concurrency"),
		defInt(&o.Prefetch, DefaultPrefetch, "Prefetch"),
		defInt(&o.MaxAttempts, DefaultMaxAttempts, "MaxAttempts"),
		defInt(&o.ReconcileBatch, DefaultReconcileBatch, "ReconcileBatch"),
		defInt(&o.ClaimBatch, DefaultClaimBatch, "ClaimBatch"),
		def(&o.Timeout, DefaultTimeout, "Timeout"),
		def(&o.Lease, DefaultLease, "Lease"),
		def(&o.PollInterval, DefaultPollInterval, "PollInterval"),
		def(&o.IdlePollInterval, DefaultIdlePollInterval, "IdlePollInterval"),
		def(&o.ShutdownTimeout, DefaultShutdownTimeout, "ShutdownTimeout"),
		def(&o.ReconcileInterval, DefaultReconcileInterval, "ReconcileInterval"),
		def(&o.Heartbeat, o.Lease/3, "Heartbeat"),
		def(&o.ChangePoll, DefaultChangePoll, "ChangePoll"),
	} {
		if err != nil {
			return err
		}
	}
	if o.IdlePollInterval > DefaultIdlePollInterval {
		return fieldErr("ConsumerOptions.IdlePollInterval", o.IdlePollInterval, "is longer than %v: producers wake owners for messages due within %v only", DefaultIdlePollInterval, WakeAhead)
	}
	if o.Lease < 30*time.Millisecond {
		return fieldErr("ConsumerOptions.Lease", o.Lease, "is shorter than 30ms")
	}
	if o.Limit < 0 {
		return fieldErr("ConsumerOptions.Limit", o.Limit, "is negative")
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if len(o.Backoff) == 0 {
		return fmt.Errorf("%w: ConsumerOptions.Backoff is empty", ErrInvalid)
	}
	for i, b := range o.Backoff {
		if b < 0 {
			return fieldErr(fmt.Sprintf("ConsumerOptions.Backoff[%d]", i), b, "is negative")
		}
	}
	return nil
}
