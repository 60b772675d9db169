package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/lease"
	"github.com/delayq/delayq/poller"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/redigo"
)

// NewConsumer returns a consumer of opts.Topic. It validates the options
// but does not connect.
func (c *Client) NewConsumer(opts ConsumerOptions, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrInvalid)
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if err := c.checkSchedules(opts.Schedules); err != nil {
		return nil, fmt.Errorf("ConsumerOptions.Schedules: %w", err)
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
// out an outage (logged once by the client; see the README's "Proxy
// outages"). It returns an error only if it could not start (a topic or
// schedule Redis refuses) or was already run.
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
	fctx, stopFollow := context.WithCancel(context.Background())
	followed, autoDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(followed)
		k.followControls(fctx)
	}()
	go func() {
		defer close(autoDone)
		k.followAuto(fctx)
	}()
	defer func() {
		stopFollow()
		<-followed
		<-autoDone
	}()
	// The limits' slots held are given back once every loop returned.
	fl := newFlow(k)
	flowCtx, stopFlow := context.WithCancel(context.Background())
	flowDone := make(chan struct{})
	go func() {
		defer close(flowDone)
		fl.run(flowCtx)
	}()
	defer func() {
		stopFlow()
		<-flowDone
	}()
	// Acks the loops could not write before they lost their leases are
	// written once Redis answers, until the consumer stops.
	kept := newKeptAcks(k)
	keptCtx, stopKept := context.WithCancel(context.Background())
	keptDone := make(chan struct{})
	go func() {
		defer close(keptDone)
		kept.run(keptCtx)
	}()
	defer func() {
		stopKept()
		<-keptDone
	}()
	d := poller.NewDispatcher(k.opts.Concurrency, k.opts.Prefetch, k.handle)
	work, hardStop := context.WithCancel(context.Background())
	defer hardStop()
	abandon := make(chan struct{})
	var hard *time.Timer
	topic, ns := k.opts.Topic, k.c.opts.Namespace
	m, err := lease.NewManager(lease.ManagerOptions{
		Topic: topic, ID: k.opts.ID, Partitions: l.Span(), Span: k.readLayout,
		Expiry: k.opts.Lease, Heartbeat: k.opts.Heartbeat, Changes: changes,
		Members: k.c.store, Redsync: redsync.New(redigo.NewPool(k.c.store.Pool())),
		Name:  func(p int) string { return keys.Lease(ns, topic, p) },
		Value: func() string { return keys.LeaseValue(k.opts.ID, NewID(time.Now())) },
		Work: func(p int, l *lease.Lease, stop <-chan struct{}, handedOver func()) error {
			wake, unwatch := k.c.watch.subscribe(keys.WakeField(topic, p), k.opts.ChangePoll)
			defer unwatch()
			cfg := k.pollerConfig(p, l, d, work, abandon)
			cfg.Release, cfg.Wake, cfg.Pause, cfg.Gate = handedOver, wake, k.ctrl.pause, fl
			cfg.Keep = func(ids []string, headers [][]byte) { kept.keep(p, ids, headers) }
			return poller.Run(l.Ctx(), stop, cfg)
		},
		Stopping: func() {
			k.log.Info("consumer stopping", "owned", len(k.Stats().Owned))
			// Past ShutdownTimeout, running handlers are cancelled; a
			// second later, loops stop waiting for those that ignore it.
			hard = time.AfterFunc(k.opts.ShutdownTimeout, func() {
				hardStop()
				time.AfterFunc(time.Second, func() { close(abandon) })
			})
		},
		Gained: func(int) {
			k.count(eventLeasesGained, 1)
			outage.LeaseGained()
		},
		Lost: func(int) {
			k.count(eventLeasesLost, 1)
			outage.LeaseLost()
		},
		Logger: k.log, Now: k.c.opts.Now, Errors: k.c.errLog, Quiet: outage.Quiet,
	})
	if err != nil {
		return err
	}
	k.mgr.Store(m)
	k.log.Info("consumer started", "partitions", l.Count, "changing_to", l.Next, "concurrency", k.opts.Concurrency)
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
	k.stop()
	if hard != nil {
		hard.Stop()
	}
	d.Close()
	k.log.Info("consumer stopped")
	return nil
}

// Backoff of a consumer's start while Redis cannot be reached.
const (
	startRetryMin = 100 * time.Millisecond
	startRetryMax = 2 * time.Second
)

// start creates the topic (or reads its layout) and applies the
// schedules. While Redis cannot be reached (store.Unavailable) it tries
// again with backoff: the outage is logged once, by the store's Outage,
// and other failures through the client's error log. It returns a nil
// layout when ctx ended or Shutdown was called first, and the error of
// anything else. The layout read is the consumer's from then on.
func (k *Consumer) start(ctx context.Context) (*store.Layout, error) {
	proposed, set := k.opts.Partitions, k.opts.Partitions != 0
	if !set {
		proposed, set = k.c.opts.Partitions, k.c.partitionsSet
	}
	if a := k.opts.AutoPartitions; a != nil && k.opts.Partitions == 0 {
		// A topic created on an automatic count starts within its bounds.
		b := a.withDefaults()
		proposed, set = min(max(proposed, b.Min), b.Max), false
	}
	wait := startRetryMin
	for {
		l, err := k.c.ensureTopicAs(ctx, k.opts.Topic, proposed, set)
		if err == nil {
			k.layout.Store(&l)
			err = k.applySchedules(ctx)
		}
		if err == nil && k.opts.Limits != nil {
			err = k.proposeLimits(ctx)
		}
		if err == nil && k.opts.AutoPartitions != nil {
			err = k.proposeAuto(ctx)
		}
		if err == nil {
			// A paused topic's loops must not claim before the pause is known.
			var ctrl store.Controls
			if ctrl, _, err = k.c.store.ReadControls(ctx, k.opts.Topic); err == nil {
				k.setControls(ctrl)
			}
		}
		switch {
		case err == nil:
			return &l, nil
		case ctx.Err() != nil:
			return nil, nil
		case !store.Unavailable(err):
			return nil, err
		}
		k.c.errLog.Log("start: waiting for redis", err, "component", "consumer", "topic", k.opts.Topic)
		t := time.NewTimer(clock.Jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-k.stopCh:
			t.Stop()
			return nil, nil
		case <-t.C:
		}
		wait = min(2*wait, startRetryMax)
	}
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
		Store: k.c.store, Dispatch: d, Valid: l.Valid, Idle: l.SetIdle, Work: work, Abandon: abandon,
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

// handle runs one delivery (called by the dispatcher's workers). An
// occurrence of a schedule first writes the schedule's next one, and is
// acked without its handler when it is stale or skipped (see
// Client.occurrence).
func (k *Consumer) handle(ctx context.Context, m *poller.Msg) (started bool, err error) {
	if k.ctrl.pausedAt(k.c.opts.Now()) {
		// Dequeued as the topic's pause began: not started, back to
		// scheduled at its due, no attempt spent (see Client.Pause).
		return false, nil
	}
	if m.Record.First != 0 {
		// Written by a Replace or Debounce send: it starts only if it is
		// still the record claimed, and a send from now on opens a new
		// window (see store.Start).
		sctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
		ok, err := k.c.store.Start(sctx, k.opts.Topic, m.Partition, m.ID, m.Record)
		cancel()
		if err != nil {
			k.c.errLog.Log("start a delivery", err, "component", "consumer", "topic", k.opts.Topic)
			return false, nil
		}
		if !ok {
			k.count(poller.EventSuperseded, 1)
			return false, nil // a newer send replaced it: that one is delivered at its due
		}
	}
	if strings.HasPrefix(m.ID, ScheduleIDPrefix) {
		cctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
		run, err := k.c.occurrence(cctx, k.opts.Topic, m.ID, m.Attempt())
		cancel()
		if err != nil {
			// Not started: back to scheduled at its due, tried again at
			// the next poll, without spending an attempt (a schedule of
			// max attempts 1 must not lose its chain to a Redis error).
			k.log.Warn("schedule step failed; the occurrence goes back to be tried again", "id", m.ID, "err", err)
			return false, nil
		}
		if !run {
			return true, nil
		}
	}
	if k.opts.Limit > 0 {
		n := k.delivered.Add(1)
		if n > int64(k.opts.Limit) {
			k.delivered.Add(-1)
			k.stop()
			return false, nil
		}
		if n == int64(k.opts.Limit) {
			defer k.stop()
		}
	} else {
		k.delivered.Add(1)
	}
	hctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
	defer cancel()
	d := &Delivery{
		Topic: k.opts.Topic, ID: m.ID, Partition: m.Partition, Token: m.Token,
		Attempt: m.Attempt(), Due: m.Due, Body: m.Record.Body,
	}
	hctx, span := k.startDelivery(hctx, m)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
		k.endDelivery(span, m, err)
	}()
	err = k.h(hctx, d)
	if err != nil && hctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("handler timed out after %v: %w", k.opts.Timeout, err)
	}
	return true, err
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
