package delayq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
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

	mu    sync.Mutex
	owned map[int]*owned
	live  int // members seen at the last heartbeat
}

// owned is a partition this consumer holds.
type owned struct {
	lease     *lease.Lease
	stop      chan struct{} // closed to stop the partition gracefully
	releasing bool          // stop was closed to hand the partition over
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
		c: c, opts: opts, h: h,
		log:    c.opts.Logger.With("component", "consumer", "topic", opts.Topic, "consumer", opts.ID),
		stopCh: make(chan struct{}),
		doneCh: make(chan struct{}),
		owned:  map[int]*owned{},
		counters: newCounters(poller.EventAcked, poller.EventRetried, poller.EventDead, poller.EventRedelivered,
			poller.EventRecovered, poller.EventCorrupt, poller.EventFenced, poller.EventTombstone, poller.EventRepaired, eventLeasesGained, eventLeasesLost),
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
// contexts), leaves the topic's members and returns nil. It returns an
// error only if it could not start (bad topic, partition count mismatch,
// Redis unreachable) or was already run.
func (k *Consumer) Run(ctx context.Context) error {
	if !k.running.CompareAndSwap(false, true) {
		return errors.New("delayq: Consumer.Run called twice")
	}
	defer close(k.doneCh)
	if err := k.c.ensureTopic(ctx, k.opts.Topic); err != nil {
		return err
	}
	rs := redsync.New(redigo.NewPool(k.c.store.Pool()))
	d := poller.NewDispatcher(k.opts.Concurrency, k.opts.Prefetch, k.handle)
	work, hardStop := context.WithCancel(context.Background())
	defer hardStop()
	abandon := make(chan struct{})
	var wg sync.WaitGroup
	k.log.Info("consumer started", "partitions", k.c.opts.Partitions, "concurrency", k.opts.Concurrency)

	seen, _ := k.c.store.Changes(ctx, k.opts.Topic)
	joined := false
	tick := time.NewTimer(0)
	defer tick.Stop()
	watch := time.NewTicker(k.opts.ChangePoll)
	defer watch.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-k.stopCh:
			break loop
		case <-watch.C:
			n, err := k.c.store.Changes(ctx, k.opts.Topic)
			if err != nil || n == seen {
				continue
			}
			seen = n
		case <-tick.C:
			tick.Reset(jitter(k.opts.Heartbeat))
		}
		target := k.share(ctx, false)
		if !joined && ctx.Err() == nil {
			joined = true // tell the others to share with us now
			k.changed(ctx)
		}
		k.releaseExtras(target)
		k.acquire(ctx, rs, d, work, abandon, &wg, target)
	}
	k.stop()
	// Leave the fair share first, so that the others' next look counts
	// us out, then hand every partition over; the heartbeats go on, as a
	// leaving member, while running handlers finish.
	bg := context.Background()
	k.share(bg, true)
	k.mu.Lock()
	for _, o := range k.owned {
		if !o.releasing {
			o.releasing = true
			close(o.stop)
		}
	}
	k.mu.Unlock()
	k.log.Info("consumer stopping", "owned", len(k.Stats().Owned))
	hard := time.AfterFunc(k.opts.ShutdownTimeout, func() {
		hardStop()
		time.AfterFunc(time.Second, func() { close(abandon) })
	})
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	beat := time.NewTicker(k.opts.Heartbeat)
	for waiting := true; waiting; {
		select {
		case <-drained:
			waiting = false
		case <-beat.C:
			k.share(bg, true)
		}
	}
	beat.Stop()
	hard.Stop()
	d.Close()
	lctx, cancel := context.WithTimeout(bg, 3*time.Second)
	if err := k.c.store.Leave(lctx, k.opts.Topic, k.opts.ID); err != nil {
		k.log.Warn("leave membership", "err", err)
	}
	k.changed(lctx)
	cancel()
	k.log.Info("consumer stopped")
	return nil
}

// changed bumps the topic's change counter, so that the other consumers
// look at membership and free partitions at once.
func (k *Consumer) changed(ctx context.Context) {
	if err := k.c.store.Changed(ctx, k.opts.Topic); err != nil {
		k.log.Warn("signal a change", "err", err)
	}
}

func jitter(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// share heartbeats this consumer into the topic's members and returns
// its fair share of partitions, ceil(partitions / live members). A
// leaving consumer stays a member, but one that no one counts.
func (k *Consumer) share(ctx context.Context, leaving bool) int {
	now := k.c.opts.Now()
	live, err := k.c.store.Heartbeat(ctx, k.opts.Topic, k.opts.ID, leaving, now.UnixMilli(),
		now.Add(3*k.opts.Heartbeat).UnixMilli(), time.Hour.Milliseconds())
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.log.Warn("heartbeat", "err", err)
		live = k.live // keep the last view
	}
	if !leaving {
		live = max(live, 1)
	}
	if live != k.live && !leaving {
		k.log.Info("members changed", "live", live, "share", lease.Share(k.c.opts.Partitions, live))
	}
	k.live = live
	return lease.Share(k.c.opts.Partitions, max(live, 1))
}

// holding returns how many partitions are owned and not being handed over.
func (k *Consumer) holding() int {
	n := 0
	for _, o := range k.owned {
		if !o.releasing {
			n++
		}
	}
	return n
}

// releaseExtras hands over partitions above target: each is stopped
// gracefully (held messages returned, handlers finished) and its lease
// released, for a consumer below its share to take.
func (k *Consumer) releaseExtras(target int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	extra := k.holding() - target
	if extra <= 0 {
		return
	}
	ps := make([]int, 0, len(k.owned))
	for p, o := range k.owned {
		if !o.releasing {
			ps = append(ps, p)
		}
	}
	rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	for _, p := range ps[:extra] {
		o := k.owned[p]
		o.releasing = true
		close(o.stop)
		k.log.Info("handing partition over", "partition", p, "share", target)
	}
}

// acquire tries, once each, partitions this consumer does not own until it
// holds target, and starts a partition loop for each one it gets.
func (k *Consumer) acquire(ctx context.Context, rs *redsync.Redsync, d *poller.Dispatcher, work context.Context, abandon chan struct{}, wg *sync.WaitGroup, target int) {
	topic, ns := k.opts.Topic, k.c.opts.Namespace
	for _, p := range rand.Perm(k.c.opts.Partitions) {
		if ctx.Err() != nil || k.stopping() {
			return
		}
		k.mu.Lock()
		_, mine := k.owned[p]
		full := k.holding() >= target
		k.mu.Unlock()
		if full {
			return
		}
		if mine {
			continue
		}
		l, err := lease.Acquire(ctx, rs, keys.Lease(ns, topic, p), lease.Options{
			Expiry: k.opts.Lease,
			Value:  store.LeaseValue(k.opts.ID, NewID(time.Now())),
			Token: func(ctx context.Context) (int64, error) {
				return k.c.store.NextToken(ctx, topic, p)
			},
			Logger: k.c.opts.Logger,
		})
		if err != nil {
			if !errors.Is(err, lease.ErrTaken) {
				k.log.Warn("acquire partition", "partition", p, "err", err)
			}
			continue
		}
		o := &owned{lease: l, stop: make(chan struct{})}
		k.mu.Lock()
		if k.stopping() { // Run is shutting down: do not start
			k.mu.Unlock()
			l.Release(ctx)
			return
		}
		k.owned[p] = o
		k.mu.Unlock()
		k.count(eventLeasesGained, 1)
		k.log.Info("partition acquired", "partition", p, "token", l.Token())
		wg.Add(1)
		go func() {
			defer wg.Done()
			var released sync.Once
			release := func(signal bool) {
				released.Do(func() {
					rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					l.Release(rctx)
					k.mu.Lock()
					if k.owned[p] == o {
						delete(k.owned, p)
					}
					k.mu.Unlock()
					if signal {
						k.changed(rctx)
					}
				})
			}
			cfg := k.pollerConfig(p, l, d, work, abandon)
			cfg.Release = func() {
				release(true)
				k.log.Info("partition handed over", "partition", p, "token", l.Token())
			}
			err := poller.Run(l.Ctx(), o.stop, cfg)
			release(false)
			if err != nil {
				k.count(eventLeasesLost, 1)
				k.log.Warn("partition lost", "partition", p, "token", l.Token(), "err", err)
			}
		}()
	}
}

func (k *Consumer) stopping() bool {
	select {
	case <-k.stopCh:
		return true
	default:
		return false
	}
}

func (k *Consumer) pollerConfig(p int, l *lease.Lease, d *poller.Dispatcher, work context.Context, abandon chan struct{}) poller.Config {
	return poller.Config{
		Topic: k.opts.Topic, Partition: p, Token: l.Token(), Consumer: k.opts.ID,
		Store: k.c.store, Dispatch: d, Valid: l.Valid, Work: work, Abandon: abandon,
		PollInterval: k.opts.PollInterval, Timeout: k.opts.Timeout,
		VisibilityMargin:  visibilityMargin(k.opts.Timeout),
		ReconcileInterval: k.opts.ReconcileInterval, ReconcileBatch: k.opts.ReconcileBatch,
		ClaimBatch: k.opts.ClaimBatch, MaxAttempts: k.opts.MaxAttempts, Backoff: k.opts.Backoff,
		Now: k.c.opts.Now, Logger: k.c.opts.Logger.With("consumer", k.opts.ID), Count: k.count,
	}
}

// visibilityMargin is added to a message's due time plus the handler
// timeout to make its visibility deadline.
func visibilityMargin(timeout time.Duration) time.Duration {
	return max(time.Second, timeout/10)
}

// handle runs one delivery (called by the dispatcher's workers).
func (k *Consumer) handle(ctx context.Context, m *poller.Msg) (started bool, err error) {
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
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
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
		LeasesGained: k.counter(eventLeasesGained),
		LeasesLost:   k.counter(eventLeasesLost),
	}
	k.mu.Lock()
	for p := range k.owned {
		s.Owned = append(s.Owned, p)
	}
	k.mu.Unlock()
	sort.Ints(s.Owned)
	return s
}
