package delayq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// TestDeleteMany deletes messages in every state and storage at once:
// records of their own, messages of a segment (the others of the segment
// stay), in flight and dead, and ids never there; directly and through
// Twemproxy, and during a change of the partition count.
func TestDeleteMany(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const n = 2
		c := newClient(t, addr, Options{Partitions: n})
		topic := "del-many"
		far := time.Now().Add(time.Hour)
		var batch []Message
		for i := range 10 { // generated ids: one segment, or a few
			batch = append(batch, Message{Topic: topic, Body: []byte(fmt.Sprint(i)), At: far})
		}
		for i := range 10 {
			batch = append(batch, Message{Topic: topic, ID: fmt.Sprintf("own-%d", i), At: far})
		}
		res, err := c.SendBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			ids = append(ids, r.ID)
		}
		kept := ids[1] // of the segment, not deleted
		flight, dead := samePartition("f", 0, n), samePartition("d", 0, n)
		soon := time.Now().Add(10 * time.Millisecond)
		recs := beginAll(t, c, topic, Message{Topic: topic, ID: flight, At: soon}, Message{Topic: topic, ID: dead, At: soon})
		makeDead(t, c, topic, dead, recs[1], time.Now())
		del := append([]string{ids[0]}, ids[2:]...)
		del = append(del, flight, dead, "never-1", "never-2")
		found, err := c.DeleteMany(ctx, topic, del)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range del {
			if want := id != "never-1" && id != "never-2"; found[i] != want {
				t.Errorf("%q: found %v, want %v", id, found[i], want)
			}
			if _, err := c.Get(ctx, topic, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("%q after DeleteMany: %v", id, err)
			}
		}
		if in, err := c.Get(ctx, topic, kept); err != nil || string(in.Body) != "1" {
			t.Fatalf("the message of the segment left alone: %+v, %v", in, err)
		}
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.Scheduled != 1 || st.InFlight != 0 || st.Dead != 0 {
			t.Fatalf("after DeleteMany: %d scheduled, %d in flight, %d dead; want 1, 0, 0", st.Scheduled, st.InFlight, st.Dead)
		}
		// During a change of the count: found in the old partition.
		if _, err := c.Admin().SetPartitions(ctx, topic, 4, PartitionsOptions{}); err != nil {
			t.Fatal(err)
		}
		found, err = c.DeleteMany(ctx, topic, []string{kept})
		if err != nil || !found[0] {
			t.Fatalf("DeleteMany during a change: %v, %v", found, err)
		}
		if _, err := c.Get(ctx, topic, kept); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%q after DeleteMany during a change: %v", kept, err)
		}
	})
}

// A message deleted while its delivery runs stays deleted when the
// delivery then fails: the retry must not write its record back.
func TestDeleteDuringDeliveryStaysDeleted(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic := "delrace"
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "x"}); err != nil {
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
		err := c.Delete(ctx, topic, "x")
		close(release)
		if !errors.Is(err, ErrRunning) {
			t.Fatalf("delete of a running delivery: %v, want ErrRunning", err)
		}
		waitFor(t, 10*time.Second, "the failed delivery's outcome", func() bool { return k.Stats().Tombstones >= 1 })
		if _, err := c.Get(ctx, topic, "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted message found again: %v", err)
		}
		st, err := c.Inspector().Stats(ctx, topic)
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
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "y"}); err != nil {
			t.Fatal(err)
		}
		st := c.store
		tok := takeFence(t, st, topic, 0)
		raced := false
		var raceErr error
		hooked := newClient(t, addr, Options{Partitions: 1, hook: func(cmd string, args []any) error {
			if (cmd == "EVALSHA" || cmd == "EVAL") && !raced { // the record write of Reschedule
				raced = true
				got, err := st.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: 0}, tok, time.Now().UnixMilli(), 10)
				if err == nil && len(got) != 1 {
					err = errors.New("claimed nothing")
				}
				var recs []*store.Record
				if err == nil {
					recs, err = st.Begin(ctx, store.TopicPartition{Topic: topic, P: 0}, []string{"y"}, []int64{time.Now().Add(time.Minute).UnixMilli()})
				}
				if err == nil {
					_, err = st.Ack(ctx, store.TopicPartition{Topic: topic, P: 0}, []store.Acked{{ID: "y", Header: recs[0].Header()}}, time.Now().UnixMilli())
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
