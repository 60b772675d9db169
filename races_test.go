package delayq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// A message deleted while its delivery runs stays deleted when the
// delivery then fails: the retry must not write its record back.
func TestDeleteDuringDeliveryStaysDeleted(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic := "delrace"
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "x"}); err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		release := make(chan struct{})
		rec := newRecorder()
		rec.fail = func(d *Delivery) error {
			if d.Attempt == 1 {
				close(started)
				<-release
			}
			return errors.New("fail after the delete")
		}
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 50 * time.Millisecond, Lease: 3 * time.Second,
			Backoff: []time.Duration{0}}, rec.handle)
		<-started
		if err := c.Delete(ctx, topic, "x"); err != nil {
			t.Fatal(err)
		}
		close(release)
		waitFor(t, 10*time.Second, "the failed delivery's outcome", func() bool { return k.Stats().Tombstones >= 1 })
		if _, err := c.Get(ctx, topic, "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted message found again: %v", err)
		}
		st, err := c.Stats(ctx, topic)
		if err != nil || st.Scheduled+st.InFlight+st.Dead != 0 {
			t.Fatalf("stats after delete = %+v, %v", st, err)
		}
		if n := rec.count("x"); n != 1 {
			t.Errorf("delivered %d times, want 1", n)
		}
	})
}

// A reschedule that loses the race with a claim and an ack (they happen
// between its read and its write) must not write the acked record back.
func TestRescheduleAfterAckDoesNotResurrect(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "reschrace"
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "y"}); err != nil {
			t.Fatal(err)
		}
		st := c.store
		tok := takeFence(t, st, topic, 0)
		raced := false
		var raceErr error
		hooked := newClient(t, addr, Options{Partitions: 1, hook: func(cmd string, args []any) error {
			if (cmd == "EVALSHA" || cmd == "EVAL") && !raced { // the record write of Reschedule
				raced = true
				got, err := st.ClaimIndexOnly(ctx, topic, 0, tok, time.Now().UnixMilli(), 10)
				if err == nil && len(got) != 1 {
					err = errors.New("claimed nothing")
				}
				var recs []*store.Record
				if err == nil {
					recs, err = st.Begin(ctx, topic, 0, []string{"y"}, []int64{time.Now().Add(time.Minute).UnixMilli()})
				}
				if err == nil {
					_, err = st.Ack(ctx, topic, 0, []string{"y"}, [][]byte{recs[0].Header()})
				}
				raceErr = err
			}
			return nil
		}})
		_, err := hooked.Reschedule(ctx, topic, "y", time.Now().Add(time.Hour))
		if !raced || raceErr != nil {
			t.Fatalf("the claim and ack did not run inside the reschedule: raced %v, %v", raced, raceErr)
		}
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("reschedule that lost the race: %v, want ErrNotFound", err)
		}
		if _, err := c.Get(ctx, topic, "y"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("acked message found again: %v", err)
		}
	})
}

// I3: once a newer owner raised the fence, claims under the older token
// are refused by storage, and the older token cannot lower the fence.
func TestFenceRefusesSupersededToken(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "fence"
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "f"}); err != nil {
			t.Fatal(err)
		}
		st := c.store
		old, _ := st.NextToken(ctx, topic, 0, time.Now().UnixMilli())
		newer, _ := st.NextToken(ctx, topic, 0, time.Now().UnixMilli())
		if err := st.RaiseFence(ctx, topic, 0, old); err != nil {
			t.Fatal(err)
		}
		if err := st.RaiseFence(ctx, topic, 0, newer); err != nil {
			t.Fatal(err)
		}
		var fe *store.FencedError
		got, err := st.ClaimIndexOnly(ctx, topic, 0, old, time.Now().UnixMilli(), 10)
		if !errors.As(err, &fe) || fe.Newest != newer || len(got) != 0 {
			t.Fatalf("claim under the superseded token: %v, %v; want FencedError at %d", got, err, newer)
		}
		if err := st.RaiseFence(ctx, topic, 0, old); !errors.As(err, &fe) {
			t.Fatalf("raising the fence back to the old token: %v, want FencedError", err)
		}
		got, err = st.ClaimIndexOnly(ctx, topic, 0, newer, time.Now().UnixMilli(), 10)
		if err != nil || len(got) != 1 || got[0].ID != "f" {
			t.Fatalf("claim under the newest token: %v, %v", got, err)
		}
		s, err := c.Stats(ctx, topic)
		if err != nil || s.Partitions[0].Token != newer || s.Scheduled != 0 {
			t.Fatalf("stats: %+v, %v", s, err)
		}
	})
}
