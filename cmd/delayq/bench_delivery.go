package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
)

// lateness records handler start - due of every delivery. The ids the
// bench sends are a letter and the message's number (numbered), so a
// delivery is recorded without a lock, in arrays of a slot a message
// that hold no pointers: the bench's own handler then costs the drain it
// measures little, however many messages it counts. A map of the ids
// under a mutex, which every handler shared and every collection
// scanned, cost the consumer more a message the more messages it held.
// Any other id is counted under mu.
type lateness struct {
	target int
	first  []atomic.Bool  // per message number: its first start was recorded
	lates  []atomic.Int64 // per message number: its first start - due (ns)
	got    atomic.Int64   // distinct messages recorded
	dups   atomic.Int64   // deliveries of a message recorded already
	last   atomic.Int64   // the latest first start (unix ns)
	done   chan struct{}

	mu    sync.Mutex
	other map[string]time.Duration // ids without a message number
}

// newLateness returns a lateness that is done once n distinct ids were
// delivered.
func newLateness(n int) *lateness {
	return &lateness{target: n, first: make([]atomic.Bool, n), lates: make([]atomic.Int64, n),
		other: map[string]time.Duration{}, done: make(chan struct{})}
}

// handle is the consumers' handler: it records the lateness of d, or
// counts a duplicate when its id was delivered already.
func (l *lateness) handle(ctx context.Context, d *delayq.Delivery) error {
	l.record(d.ID, d.Due, time.Now())
	return nil
}

// number returns the message number of id (a letter, then digits), and
// whether it has one below the target.
func (l *lateness) number(id string) (int, bool) {
	if len(id) < 2 || id[1] < '0' || id[1] > '9' {
		return 0, false
	}
	i, err := strconv.Atoi(id[1:])
	return i, err == nil && i >= 0 && i < l.target
}

// record records the start of id, due at due, at start.
func (l *lateness) record(id string, due, start time.Time) {
	late := start.Sub(due)
	if i, ok := l.number(id); ok {
		if l.first[i].Swap(true) {
			l.dups.Add(1)
			return
		}
		l.lates[i].Store(int64(late))
	} else {
		l.mu.Lock()
		_, seen := l.other[id]
		if !seen {
			l.other[id] = late
		}
		l.mu.Unlock()
		if seen {
			l.dups.Add(1)
			return
		}
	}
	for ns := start.UnixNano(); ; {
		cur := l.last.Load()
		if ns <= cur || l.last.CompareAndSwap(cur, ns) {
			break
		}
	}
	if l.got.Add(1) == int64(l.target) {
		close(l.done)
	}
}

// lastStart is the latest first start of a message.
func (l *lateness) lastStart() time.Time { return time.Unix(0, l.last.Load()) }

// isDone reports whether every message was delivered.
func (l *lateness) isDone() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// summary formats the lateness's median, 99th percentile and maximum,
// in milliseconds.
func (l *lateness) summary() string {
	s := make([]time.Duration, 0, l.got.Load())
	for i := range l.first {
		if l.first[i].Load() {
			s = append(s, time.Duration(l.lates[i].Load()))
		}
	}
	l.mu.Lock()
	for _, late := range l.other {
		s = append(s, late)
	}
	l.mu.Unlock()
	slices.Sort(s)
	q := func(p float64) float64 {
		if len(s) == 0 {
			return math.NaN()
		}
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return float64(s[max(i, 0)]) / float64(time.Millisecond)
	}
	return fmt.Sprintf("lateness_ms p50=%.1f p99=%.1f max=%.1f", q(0.50), q(0.99), q(1))
}

// consume runs a consumer of topic with a no-op handler until stop.
func consume(ctx context.Context, cfg benchConfig, c *delayq.Client, topic string, l *lateness) (*delayq.Consumer, func(), error) {
	k, err := c.NewConsumer(delayq.ConsumerOptions{
		Topic: topic, Concurrency: cfg.concurrency, Prefetch: cfg.prefetch, ClaimBatch: cfg.claimBatch,
		PollInterval: cfg.poll,
	}, l.handle)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		k.Shutdown(sctx)
		<-done
	}
	// Wait until it owns every partition, so the run measures delivery.
	for {
		if info, err := c.Inspector().Partitions(ctx, topic); err == nil && len(k.Stats().Owned) >= info.Count {
			break
		}
		if err := waitFor(ctx, 10*time.Millisecond); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return k, stop, nil
}

// waitDone waits until l is done, ctx is done or timeout has passed.
func waitDone(ctx context.Context, l *lateness, timeout time.Duration) error {
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("only %d of %d messages delivered after %v", l.got.Load(), l.target, timeout)
	}
}

// delivery is a running burst, spread or duenow: a producer client, a consumer
// client with its consumer running, and the lateness of each delivery.
type delivery struct {
	topic      string
	prod, cons *delayq.Client
	l          *lateness
	stop       func()
}

// startDelivery starts a delivery of n messages to a new topic of cfg's
// workload, and returns once its consumer owns every partition.
func startDelivery(ctx context.Context, cfg benchConfig, n int) (*delivery, error) {
	r := &delivery{topic: benchTopic(cfg.workload), l: newLateness(n)}
	var err error
	if r.prod, err = cfg.client(r.topic); err != nil {
		return nil, err
	}
	if r.cons, err = cfg.client(r.topic); err != nil {
		r.prod.Close()
		return nil, err
	}
	if _, r.stop, err = consume(ctx, cfg, r.cons, r.topic, r.l); err != nil {
		r.prod.Close()
		r.cons.Close()
		return nil, errors.Join(err, dropTopic(ctx, cfg, r.topic))
	}
	return r, nil
}

// withDelivery starts a delivery of n messages, runs run with it, then
// closes it, whatever run returned.
func withDelivery(ctx context.Context, cfg benchConfig, n int, run func(r *delivery) (string, error)) (line string, err error) {
	r, err := startDelivery(ctx, cfg, n)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, r.close(ctx, cfg)) }()
	return run(r)
}

// close stops the consumer, closes both clients and drops the topic.
func (r *delivery) close(ctx context.Context, cfg benchConfig) error {
	r.stop()
	r.cons.Close()
	r.prod.Close()
	return dropTopic(ctx, cfg, r.topic)
}

// enqueue sends n messages due at due(i) with the batch API.
func (r *delivery) enqueue(ctx context.Context, cfg benchConfig, n int, prefix string, due func(i int) time.Time) error {
	_, err := fill(ctx, cfg, r.prod, numbered(r.topic, prefix, n, cfg.body(), due))
	return err
}
