package delayq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/testenv"
)

func TestLifecycle(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		topic := "life"
		now := time.Now()
		for i := range 20 {
			want := fmt.Sprintf("m%d", i)
			sent, err := c.Send(ctx, Message{Topic: topic, ID: want, Body: []byte(fmt.Sprintf("body %d", i)), Delay: time.Duration(i%5) * 100 * time.Millisecond})
			id := sent.ID
			if err != nil {
				t.Fatal(err)
			}
			if id != want {
				t.Fatalf("enqueue of id %q returned %q", want, id)
			}
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "m3"}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("duplicate enqueue: err = %v, want ErrDuplicate", err)
		}
		if err := c.Delete(ctx, topic, "m4"); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, topic, "m4"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		newDue := now.Add(1500 * time.Millisecond)
		if _, err := c.Reschedule(ctx, topic, "m5", newDue); err != nil {
			t.Fatal(err)
		}
		in, err := c.Get(ctx, topic, "m5")
		if err != nil || in.State != StateScheduled || !in.Due.Equal(clock.CeilMS(newDue)) {
			t.Fatalf("get m5 = %+v, %v", in, err)
		}
		rec := newRecorder()
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 200 * time.Millisecond, Lease: 3 * time.Second}, rec.handle)
		waitFor(t, 10*time.Second, "19 deliveries", func() bool { return rec.total() >= 19 })
		waitFor(t, 5*time.Second, "acks", func() bool { return k.Stats().Acked >= 19 })
		if rec.count("m4") != 0 {
			t.Errorf("deleted m4 was delivered")
		}
		for id, ds := range rec.seen {
			if len(ds) != 1 {
				t.Errorf("%s delivered %d times", id, len(ds))
			}
			if rec.at[id][0].Before(ds[0].Due) {
				t.Errorf("%s delivered at %v, before its due time %v", id, rec.at[id][0], ds[0].Due)
			}
		}
		if at := rec.at["m5"][0]; at.Before(newDue) {
			t.Errorf("rescheduled m5 delivered at %v, before %v", at, newDue)
		}
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.Scheduled != 0 || st.InFlight != 0 || st.Dead != 0 {
			t.Errorf("stats after draining: %+v", st)
		}
		if _, err := c.Get(ctx, topic, "m1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("acked message still found: %v", err)
		}
	})
}

// Consumers split a topic's partitions by fair share, hand them over when
// one joins or leaves, and deliver each message once in the absence of faults.
func TestFairShareAndHandover(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 12})
		topic := "share"
		rec := newRecorder()
		opts := ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: 2 * time.Second}
		var ks []*Consumer
		for i := range 3 {
			o := opts
			o.ID = fmt.Sprintf("c%d", i)
			ks = append(ks, runConsumer(t, c, o, rec.handle))
		}
		owned := func(k *Consumer) int { return len(k.Stats().Owned) }
		waitFor(t, 10*time.Second, "4 partitions each", func() bool {
			return owned(ks[0]) == 4 && owned(ks[1]) == 4 && owned(ks[2]) == 4
		})
		var msgs []Message
		for i := range 300 {
			msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("s%d", i), Delay: time.Duration(i%10) * 50 * time.Millisecond})
		}
		mustBatch(t, c, msgs)
		// One leaves cleanly mid-stream: the other two cover all partitions.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := ks[2].Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "6 partitions each after a leave", func() bool {
			return owned(ks[0]) == 6 && owned(ks[1]) == 6
		})
		waitFor(t, 10*time.Second, "300 deliveries", func() bool { return rec.total() >= 300 })
		for id, ds := range rec.seen {
			if len(ds) != 1 {
				t.Errorf("%s delivered %d times without a fault", id, len(ds))
			}
		}
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Partitions {
			if p.Owner != "c0" && p.Owner != "c1" {
				t.Errorf("partition %d owned by %q", p.Partition, p.Owner)
			}
		}
	})
}

// Ten consumers join a topic of 16 partitions one by one, in an order
// that is not the order of their ids. After each join every consumer owns
// floor(16/live) or ceil(16/live) partitions, all 16 are owned, and once
// shared, the split stays as it is (no handovers at steady state).
func TestFairShareFloorOrCeil(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	c := newClient(t, env.Proxy, Options{Partitions: 16})
	opts := ConsumerOptions{Topic: "share10", Lease: 2 * time.Second}
	var ks []*Consumer
	for _, i := range []int{7, 2, 9, 0, 5, 3, 8, 1, 6, 4} {
		o := opts
		o.ID = fmt.Sprintf("c%d", i)
		ks = append(ks, runConsumer(t, c, o, func(context.Context, *Delivery) error { return nil }))
		live := len(ks)
		lo, hi := 16/live, (16+live-1)/live
		waitFor(t, 15*time.Second, fmt.Sprintf("%d consumers owning %d or %d partitions each", live, lo, hi), func() bool {
			total := 0
			for _, k := range ks {
				n := len(k.Stats().Owned)
				total += n
				if n < lo || n > hi {
					return false
				}
			}
			return total == 16
		})
	}
	gained := func() (n int64) {
		for _, k := range ks {
			n += k.Stats().LeasesGained
		}
		return n
	}
	before := gained()
	// Three heartbeats (Lease/3 each): every consumer recomputes its share.
	time.Sleep(3 * opts.Lease / 3)
	if after := gained(); after != before {
		t.Errorf("%d leases changed hands at steady state", after-before)
	}
	big := 0
	for _, k := range ks {
		if len(k.Stats().Owned) == 2 {
			big++
		}
	}
	if big != 6 {
		t.Errorf("%d consumers own 2 partitions, want 6 (and 4 owning 1)", big)
	}
}

// A consumer owning P idle partitions looks at each once per idle poll
// interval, not once per poll interval: P looks per IdlePollInterval, P
// lease extensions per Lease/2, plus the client's read of the change and
// wake-up counters every ChangePoll, a heartbeat and a reconciler pass.
func TestIdleCost(t *testing.T) {
	t.Parallel() // counts commands, bounded above: runs beside the other parallel tests
	forEachTarget(t, func(t *testing.T, addr string) {
		const P, poll, idle = 16, 100 * time.Millisecond, time.Second
		c := newClient(t, addr, Options{Partitions: P})
		k := runConsumer(t, c, ConsumerOptions{Topic: "idle", PollInterval: poll, IdlePollInterval: idle}, func(context.Context, *Delivery) error { return nil })
		waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
		// Let the start-up burst (acquisitions, fences, first claims) pass.
		time.Sleep(2 * idle)
		before, start := c.Commands(), time.Now()
		waitFor(t, 10*time.Second, "4 s of idling", func() bool { return time.Since(start) >= 4*time.Second })
		secs := time.Since(start).Seconds()
		perSec := float64(c.Commands()-before) / secs
		want := P/idle.Seconds() + P/(DefaultLease/2).Seconds() + 1/DefaultChangePoll.Seconds()
		t.Logf("idle: %.1f commands a second for %d partitions, about %.0f expected", perSec, P, want)
		// Polling each partition every poll interval would cost P/poll
		// (160 a second) more.
		if perSec > 1.5*want {
			t.Errorf("idle consumer sends %.1f commands a second for %d partitions, want about %.0f", perSec, P, want)
		}
	})
}

// An idle poll interval longer than what producers' wake-ups cover is
// refused, naming the value.
func TestIdlePollIntervalBound(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	c := newClient(t, env.Backends[0], Options{})
	h := func(context.Context, *Delivery) error { return nil }
	_, err := c.NewConsumer(ConsumerOptions{Topic: "t", IdlePollInterval: 11 * time.Second}, h)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "IdlePollInterval 11s") {
		t.Fatalf("IdlePollInterval 11s: got %v, want ErrInvalid naming it", err)
	}
	if _, err := c.NewConsumer(ConsumerOptions{Topic: "t", IdlePollInterval: DefaultIdlePollInterval}, h); err != nil {
		t.Fatalf("IdlePollInterval %v: %v", DefaultIdlePollInterval, err)
	}
}

// A consumer's start and stop are a few INFO lines, not two per
// partition: per-partition events are logged at DEBUG.
func TestConsumerLogsSummaries(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	const P = 16
	c := newClient(t, env.Backends[0], Options{Partitions: P, Logger: log})
	k, err := c.NewConsumer(ConsumerOptions{Topic: "quiet"}, func(context.Context, *Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(context.Background()) }()
	waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Logf("%d lines:\n%s", len(lines), out.String())
	if len(lines) > 8 {
		t.Errorf("a consumer of %d partitions logged %d lines at INFO for a start and a stop, want a few:\n%s", P, len(lines), out.String())
	}
	if !strings.Contains(out.String(), "partitions acquired") {
		t.Errorf("no summary of the partitions acquired:\n%s", out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
