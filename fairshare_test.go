package delayq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

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
		res, err := c.EnqueueBatch(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
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
		st, err := c.Stats(ctx, topic)
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
