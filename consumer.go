package delayq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/lease"
	"github.com/delayq/delayq/poller"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/redigo"
)

// Consumer delivers a topic's messages to a Handler. It owns the
// partitions whose leases it can get, and polls each of them. Create it
// with Client.NewConsumer and start it with Run. Its methods are safe for
// concurrent use.
type Consumer struct {
	c    *Client
	opts ConsumerOptions
	h    Handler
	log  *slog.Logger

	stopOnce sync.Once
	stopCh   chan struct{} // Shutdown or Limit: stop gracefully
	doneCh   chan struct{} // closed when Run returned
	running  atomic.Bool

	delivered atomic.Int64
	counters  map[string]*atomic.Int64 // event name -> count; keys fixed by NewConsumer

	mgr    atomic.Pointer[lease.Manager] // set by Run
	layout atomic.Pointer[store.Layout]  // the topic's, as last read
	ctrl   *controls                     // the topic's controls, as last read (see followControls)

	deliverName string // the name of its deliveries' spans
}

// NewConsumer returns a consumer of opts.Topic. It validates the options
// but does not connect.
func (c *Client) NewConsumer(opts ConsumerOptions, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrInvalid)
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Consumer{
		c: c, opts: opts, h: h, deliverName: "delayq.deliver " + opts.Topic,
		log:    c.opts.Logger.With("component", "consumer", "topic", opts.Topic, "consumer", opts.ID),
		stopCh: make(chan struct{}),
		doneCh: make(chan struct{}),
		ctrl:   newControls(),
		counters: newCounters(poller.EventAcked, poller.EventRetried, poller.EventDead, poller.EventRedelivered,
			poller.EventRecovered, poller.EventCorrupt, poller.EventFenced, poller.EventTombstone, poller.EventRepaired, poller.EventStale, poller.EventMoved, poller.EventSuperseded, eventLeasesGained, eventLeasesLost),
	}, nil
}

// ID returns the consumer's id, as shown in stats as partition owner.
func (k *Consumer) ID() string { return k.opts.ID }

func (k *Consumer) stop() { k.stopOnce.Do(func() { close(k.stopCh) }) }

// Shutdown makes Run stop gracefully and waits until it returned or ctx
// is done. Safe to call more than once, and before or without Run.
func (k *Consumer) Shutdown(ctx context.Context) error {
	k.stop()
	if !k.running.Load() {
		return nil
	}
	select {
	case <-k.doneCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run consumes until ctx is done, Shutdown is called or Limit deliveries
// have started, then shuts down gracefully: it stops claiming, returns
// held messages to scheduled and hands every partition over at once, waits
// up to ShutdownTimeout for running handlers (then cancels their
// contexts), leaves the topic's members and returns nil. Started while
// Redis cannot be reached, it waits for Redis as a running consumer rides
// out an outage (logged once by the client; see docs/proxies.md, "Proxy
// outages"). It returns an error only if it could not start (a topic
// Redis refuses) or was already run. It creates a missing topic with
// the client's Options.Partitions; to declare a topic's count and
// settings, see Admin.ProposeTopic.
func (k *Consumer) Run(ctx context.Context) error {
	if !k.running.CompareAndSwap(false, true) {
		return errors.New("delayq: Consumer.Run called twice")
	}
	defer close(k.doneCh)
	outage := k.c.store.Outage()
	defer outage.Wait(k.opts.Lease)()
	l, err := k.start(ctx)
	if err != nil || l == nil {
		return err
	}
	changes, unwatch := k.c.watch.subscribe(k.opts.Topic, k.opts.ChangePoll)
	defer unwatch()
	defer background(k.followControls, k.followAuto)()
	// The limits' slots held are given back once every loop returned.
	lim := newLimiter(k)
	defer background(lim.run)()
	// Acks the loops could not write before they lost their leases are
	// written once Redis answers, until the consumer stops.
	kept := newKeptAcks(k)
	defer background(kept.run)()
	r := k.newRun(outage, lim, kept)
	defer r.hardStop()
	m, err := lease.NewManager(r.managerOptions(l, changes))
	if err != nil {
		return err
	}
	k.mgr.Store(m)
	k.log.Info("consumer started", "partitions", l.Count, "changing_to", l.Next, "concurrency", k.opts.Concurrency)
	k.manage(ctx, m)
	r.end()
	k.log.Info("consumer stopped")
	return nil
}

// background runs each of fs in a goroutine of its own, under one
// context, and returns the function that cancels it and waits until
// every one returned.
func background(fs ...func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx)
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// consumerRun is what one Run shares with the callbacks of its lease
// manager: the parts every partition loop uses, and the hard stop.
type consumerRun struct {
	k      *Consumer
	outage *store.Outage
	lim    *limiter
	kept   *keptAcks
	d      *poller.Dispatcher // the handler workers the loops share
	// work is the context the handlers run under, which the run owns:
	// hardStop cancels it ShutdownTimeout after the stop began, and
	// abandon is closed a second later, when the loops stop waiting for
	// handlers that ignore it. hard is that timer, once the stop began.
	work     context.Context
	hardStop context.CancelFunc
	abandon  chan struct{}
	hard     *time.Timer
}

// newRun returns the parts of a run the loops share: the dispatcher of
// the consumer's handlers and the context they run under.
func (k *Consumer) newRun(outage *store.Outage, lim *limiter, kept *keptAcks) *consumerRun {
	r := &consumerRun{k: k, outage: outage, lim: lim, kept: kept}
	r.d = poller.NewDispatcher(k.opts.Concurrency, k.opts.Prefetch, k.handle)
	r.work, r.hardStop = context.WithCancel(context.Background())
	r.abandon = make(chan struct{})
	return r
}

// managerOptions returns the options of the lease manager of a topic
// whose layout start read as l, and whose change counter's moves come on
// changes.
func (r *consumerRun) managerOptions(l *store.Layout, changes <-chan struct{}) lease.ManagerOptions {
	k := r.k
	topic, ns := k.opts.Topic, k.c.opts.Namespace
	return lease.ManagerOptions{
		Topic: topic, ID: k.opts.ID, Partitions: l.Span(), Span: k.readLayout,
		Expiry: k.opts.Lease, Heartbeat: k.opts.Heartbeat, Changes: changes,
		Members: k.c.store, Redsync: redsync.New(redigo.NewPool(k.c.store.Pool())),
		Name:  func(p int) string { return keys.Lease(ns, topic, p) },
		Value: func() string { return keys.LeaseValue(k.opts.ID, NewID(time.Now())) },
		Work:  r.loop, Stopping: r.stopping, Gained: r.gained, Lost: r.lost,
		Logger: k.log, Now: k.c.opts.Now, Errors: k.c.errLog, Quiet: r.outage.Quiet,
	}
}

// loop is the lease manager's Work: it runs the partition loop of p
// (poller.Run) under its lease l until stop, woken by the partition's
// wake-ups, paused with the topic, its claims granted by the limiter, and
// its acks kept when it loses the lease with some unwritten.
func (r *consumerRun) loop(p int, l *lease.Lease, stop <-chan struct{}, handedOver func()) error {
	k := r.k
	wake, unwatch := k.c.watch.subscribe(keys.WakeField(k.opts.Topic, p), k.opts.ChangePoll)
	defer unwatch()
	cfg := k.pollerConfig(p, l, r.d, r.work, r.abandon)
	cfg.Release, cfg.Wake, cfg.Pause, cfg.Gate = handedOver, wake, k.ctrl.pause, r.lim
	cfg.Keep = func(acks []store.Acked) { r.kept.keep(p, acks) }
	return poller.Run(l.Ctx(), stop, cfg)
}

// stopping is called once when the lease manager begins to stop: it arms
// the hard stop. Past ShutdownTimeout, running handlers are cancelled; a
// second later, loops stop waiting for those that ignore it.
func (r *consumerRun) stopping() {
	r.k.log.Info("consumer stopping", "owned", len(r.k.Stats().Owned))
	r.hard = time.AfterFunc(r.k.opts.ShutdownTimeout, func() {
		r.hardStop()
		time.AfterFunc(time.Second, func() { close(r.abandon) })
	})
}

// gained counts a lease gained, and tells the outage.
func (r *consumerRun) gained(int) {
	r.k.count(eventLeasesGained, 1)
	r.outage.LeaseGained()
}

// lost counts a lease lost, and tells the outage.
func (r *consumerRun) lost(int) {
	r.k.count(eventLeasesLost, 1)
	r.outage.LeaseLost()
}

// manage runs the lease manager m until ctx is done or Shutdown is
// called (or Limit deliveries started), and its graceful stop.
func (k *Consumer) manage(ctx context.Context, m *lease.Manager) {
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-k.stopCh:
			cancel()
		case <-mctx.Done():
		}
	}()
	m.Run(mctx)
}

// end ends the run once the manager returned: the consumer is stopped
// (when ctx ended it, a later Shutdown has nothing to stop), the hard
// stop is disarmed and the dispatcher closed.
func (r *consumerRun) end() {
	r.k.stop()
	if r.hard != nil {
		r.hard.Stop()
	}
	r.d.Close()
}

// start creates the topic (or reads its layout) and reads its controls.
// While Redis cannot be reached it tries again with backoff (see
// whileUnreachable). It returns a nil layout when ctx ended or Shutdown
// was called first, and the error of anything else. The layout read is
// the consumer's from then on.
func (k *Consumer) start(ctx context.Context) (*store.Layout, error) {
	var l store.Layout
	err := k.c.whileUnreachable(ctx, k.stopCh, "start: waiting for redis", []any{"component", "consumer", "topic", k.opts.Topic}, func(ctx context.Context) error {
		var err error
		if l, err = k.c.ensureTopic(ctx, k.opts.Topic); err != nil {
			return err
		}
		k.layout.Store(&l)
		// A paused topic's loops must not claim before the pause is known.
		ctrl, _, err := k.c.store.ReadControls(ctx, k.opts.Topic)
		if err == nil {
			k.setControls(ctrl)
		}
		return err
	})
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case err != nil:
		return nil, err
	}
	select {
	case <-k.stopCh:
		return nil, nil
	default:
	}
	return &l, nil
}

// readLayout reads the topic's layout, for the manager's rounds and the
// partition loops, and returns how many partitions may hold messages.
func (k *Consumer) readLayout(ctx context.Context) (int, error) {
	l, err := k.c.store.ReadLayout(ctx, k.opts.Topic)
	if err != nil {
		return 0, err
	}
	if l.Count < 1 {
		return 0, fmt.Errorf("%w: it was deleted while this consumer runs (stop the topic's consumers before deleting it)", store.NoTopic(k.opts.Topic))
	}
	if old := k.layout.Swap(&l); old == nil || *old != l {
		k.log.Info("partition layout", "partitions", l.Count, "changing_to", l.Next)
	}
	return l.Span(), nil
}

func (k *Consumer) pollerConfig(p int, l *lease.Lease, d *poller.Dispatcher, work context.Context, abandon chan struct{}) poller.Config {
	return poller.Config{
		Topic: k.opts.Topic, Partition: p, Token: l.Token(), Consumer: k.opts.ID,
		Store: k.c.store, Dispatch: d, Valid: l.Valid, Steady: l.Steady, Idle: l.SetIdle, Work: work, Abandon: abandon,
		PollInterval: k.opts.PollInterval, IdlePollInterval: k.opts.IdlePollInterval, Timeout: k.opts.Timeout,
		VisibilityMargin:  visibilityMargin(k.opts.Timeout),
		ReconcileInterval: k.opts.ReconcileInterval, ReconcileBatch: k.opts.ReconcileBatch,
		ClaimBatch: k.opts.ClaimBatch, MaxAttempts: k.opts.MaxAttempts, Backoff: k.opts.Backoff,
		Now: k.c.opts.Now, Logger: k.c.opts.Logger.With("consumer", k.opts.ID), Count: k.count,
		Layout: func() store.Layout { return *k.layout.Load() }, MoveSettle: k.opts.moveSettle,
		Errors: k.c.errLog,
	}
}

// visibilityMargin is added to a message's due time plus the handler
// timeout to make its visibility deadline.
func visibilityMargin(timeout time.Duration) time.Duration {
	return max(time.Second, timeout/10)
}

// Events the consumer counts besides the poller's.
const (
	eventLeasesGained = "leases_gained"
	eventLeasesLost   = "leases_lost"
)

func newCounters(events ...string) map[string]*atomic.Int64 {
	m := make(map[string]*atomic.Int64, len(events))
	for _, e := range events {
		m[e] = new(atomic.Int64)
	}
	return m
}

// count adds n to an event's counter. The map is only read after
// NewConsumer, so concurrent calls need no lock.
func (k *Consumer) count(event string, n int) { k.counters[event].Add(int64(n)) }

func (k *Consumer) counter(event string) int64 { return k.counters[event].Load() }

// Stats returns a snapshot of the consumer's counters.
func (k *Consumer) Stats() ConsumerStats {
	s := ConsumerStats{
		Delivered:    k.delivered.Load(),
		Acked:        k.counter(poller.EventAcked),
		Retried:      k.counter(poller.EventRetried),
		Dead:         k.counter(poller.EventDead),
		Redelivered:  k.counter(poller.EventRedelivered),
		Recovered:    k.counter(poller.EventRecovered),
		Corrupt:      k.counter(poller.EventCorrupt),
		Fenced:       k.counter(poller.EventFenced),
		Tombstones:   k.counter(poller.EventTombstone),
		Repaired:     k.counter(poller.EventRepaired),
		Stale:        k.counter(poller.EventStale),
		Moved:        k.counter(poller.EventMoved),
		Superseded:   k.counter(poller.EventSuperseded),
		LeasesGained: k.counter(eventLeasesGained),
		LeasesLost:   k.counter(eventLeasesLost),
	}
	if m := k.mgr.Load(); m != nil {
		s.Owned = m.Owned()
	}
	return s
}

// ConsumerStats counts what a consumer did since it started.
type ConsumerStats struct {
	Delivered    int64 // handler calls started
	Acked        int64
	Retried      int64
	Dead         int64
	Redelivered  int64 // in-flight messages requeued after their visibility deadline (a handler overran)
	Recovered    int64 // in-flight messages of a lost owner (died, paused, cut off) returned to scheduled at takeover
	Corrupt      int64 // records that could not be decoded, moved to the dead set
	Fenced       int64 // claims refused by the fence, and held messages dropped because their lease ran out
	Tombstones   int64 // claimed ids whose record was gone (deleted meanwhile)
	Repaired     int64 // records re-indexed by the reconciler
	Stale        int64 // claims by an index entry due before its record (see the poller): delivered at the record's due
	Moved        int64 // messages moved to their partition in a new partition count (see Admin.SetPartitions)
	Superseded   int64 // claimed messages that a newer send or a reschedule replaced before their delivery started (not started) or while it ran: the newer version is delivered at its own due (see Message.OnDuplicate)
	LeasesGained int64
	LeasesLost   int64
	Owned        []int // partitions owned now
}
