package delayq

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// TestUniqueFor follows ids through their uniqueness windows with a real
// consumer: after the ack, every send of a windowed id is refused as
// finished (Reject, Replace, Debounce, single and batch), Get reports it
// done, a Delete frees it, and once the window ends it is sent again and
// delivered again. The topic's default applies to given ids only.
func TestUniqueFor(t *testing.T) {
	t.Parallel() // measures no lateness
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		topic := "unique"
		const window = 2 * time.Second
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "w", UniqueFor: window, Body: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "del", UniqueFor: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "plain"}); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		k := runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
		waitFor(t, 10*time.Second, "three acks", func() bool { return k.Stats().Acked >= 3 })
		acked := time.Now()

		in, err := c.Get(ctx, topic, "w")
		if err != nil || in.State != StateDone || in.Finished.IsZero() || in.UniqueUntil.Sub(in.Finished) != window {
			t.Fatalf("get of an acked windowed id: %+v, %v", in, err)
		}
		if _, err := c.Get(ctx, topic, "plain"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get of an acked id without a window: %v, want ErrNotFound", err)
		}
		for _, p := range []OnDuplicate{Reject, Replace, Debounce} {
			res, err := c.Send(ctx, Message{Topic: topic, ID: "w", OnDuplicate: p, Body: []byte("again")})
			var fe *FinishedError
			if !errors.As(err, &fe) || !errors.Is(err, ErrDuplicate) || res.Outcome != OutcomeFinished || fe.Done.Until != in.UniqueUntil.UnixMilli() {
				t.Errorf("send %q of a finished id within its window: %+v, %v", p, res, err)
			}
		}
		res, err := c.SendBatch(ctx, []Message{{Topic: topic, ID: "w", Delay: time.Hour}, {Topic: topic, ID: "fresh", Delay: time.Hour}})
		if err != nil || !errors.Is(res[0].Err, ErrDuplicate) || res[0].Outcome != OutcomeFinished || res[1].Err != nil {
			t.Errorf("batch with a finished id: %+v, %v", res, err)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "plain"}); err != nil {
			t.Errorf("send of an acked id without a window: %v", err)
		}
		if err := c.Delete(ctx, topic, "del"); err != nil {
			t.Errorf("delete of a finished id: %v", err)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "del"}); err != nil {
			t.Errorf("send after a delete freed the id: %v", err)
		}

		waitFor(t, window+5*time.Second, "the window to end", func() bool {
			_, err := c.Get(ctx, topic, "w")
			return errors.Is(err, ErrNotFound)
		})
		if time.Since(acked) < window-100*time.Millisecond {
			t.Errorf("the window ended %v after the ack, want %v", time.Since(acked), window)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "w", Body: []byte("2")}); err != nil {
			t.Fatalf("send after the window: %v", err)
		}
		waitFor(t, 10*time.Second, "the second delivery", func() bool { return rec.count("w") == 2 })

		// The topic's default: for given ids, not for generated ones.
		if err := c.Admin().SetUniqueFor(ctx, topic, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Inspector().UniqueFor(ctx, topic); err != nil || got != time.Hour {
			t.Fatalf("UniqueFor after SetUniqueFor: %v, %v", got, err)
		}
		c.forget(topic)
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "given"}); err != nil {
			t.Fatal(err)
		}
		gen, err := c.Send(ctx, Message{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "both delivered", func() bool { return rec.count("given") == 1 && rec.count(gen.ID) == 1 })
		waitFor(t, 10*time.Second, "given done", func() bool {
			in, err := c.Get(ctx, topic, "given")
			return err == nil && in.State == StateDone
		})
		waitFor(t, 10*time.Second, "the generated id acked", func() bool {
			_, err := c.Get(ctx, topic, gen.ID)
			return errors.Is(err, ErrNotFound)
		})
	})
}

// TestUniqueForPartitionChange checks that finished ids move with their
// partitions: after a change from 2 to 8 partitions, each is done in its
// new partition and gone from its old one, and its sends are still
// refused.
func TestUniqueForPartitionChange(t *testing.T) {
	t.Parallel() // measures no lateness
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	topic := "unique-change"
	var ids []string
	for i := range 40 {
		id := IDFrom("change", strconv.Itoa(i))
		ids = append(ids, id)
		if _, err := c.Send(ctx, Message{Topic: topic, ID: id, UniqueFor: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	k := runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
	waitFor(t, 10*time.Second, "40 acks", func() bool { return k.Stats().Acked >= 40 })
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, c, topic, 8)
	moved := 0
	for _, id := range ids {
		from, to := partition.For(id, 2), partition.For(id, 8)
		if from == to {
			continue
		}
		moved++
		if f, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: to}, id); err != nil || f.State != store.StateDone {
			t.Errorf("%s in its new partition %d: %+v, %v; want done", id, to, f, err)
		}
		if _, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: from}, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s still in its old partition %d: %v", id, from, err)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: id}); !errors.Is(err, ErrDuplicate) {
			t.Errorf("send of %s after the change: %v, want refused as finished", id, err)
		}
	}
	if moved == 0 {
		t.Fatal("no id changed partition: the test checks nothing")
	}
	if n := rec.total(); n != len(ids) {
		t.Errorf("%d deliveries of %d messages", n, len(ids))
	}
}
