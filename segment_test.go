package delayq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
)

// Messages with generated ids due beyond the claim-ahead margin are kept
// as segments (keys.SegmentField). Each can still be read, deleted,
// rescheduled and found a duplicate by its id, Stats count each, and a
// consumer delivers each exactly once, never early; the segment itself is
// gone once it was claimed.
func TestSegments(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const n = 2
		topic := "segments"
		// A producer whose clock is an hour behind: its messages, an hour
		// ahead for it, are due in 3 s.
		lag := time.Hour - 3*time.Second
		prod := newClient(t, addr, Options{Partitions: n, Now: func() time.Time { return time.Now().Add(-lag) }})
		c := newClient(t, addr, Options{Partitions: n})
		msgs := make([]Message, 10)
		for i := range msgs {
			msgs[i] = Message{Topic: topic, Body: []byte(fmt.Sprint(i)), Delay: time.Hour}
		}
		res, err := prod.EnqueueBatch(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		prefix := res[0].ID[:store.SegmentPrefixLen]
		p := partition.For(res[0].ID, n)
		for i, r := range res {
			if r.Err != nil || r.ID[:store.SegmentPrefixLen] != prefix {
				t.Fatalf("message %d: %q, %v: want an id beginning %s", i, r.ID, r.Err, prefix)
			}
		}
		// One field for all ten records, none of their own.
		mk := keys.Records(c.store.Namespace(), topic, p)
		conn := c.store.Pool().Get()
		seg, err := redis.Bytes(conn.Do("HGET", mk, keys.SegmentField(prefix)))
		own, err2 := conn.Do("HGET", mk, res[3].ID)
		conn.Close()
		if err != nil || len(seg) == 0 || own != nil || err2 != nil {
			t.Fatalf("segment %q: %d bytes, %v; record of its own: %v, %v", prefix, len(seg), err, own, err2)
		}
		scheduled := func(want int64) {
			t.Helper()
			st, err := c.Stats(ctx, topic)
			if err != nil || st.Scheduled != want {
				t.Fatalf("stats: %+v, %v; want %d scheduled", st, err, want)
			}
		}
		scheduled(10)

		in, err := c.Get(ctx, topic, res[3].ID)
		if err != nil || string(in.Body) != "3" || in.State != StateScheduled || !in.Due.Equal(res[3].Due) {
			t.Fatalf("get: %+v, %v", in, err)
		}
		deleted, moved, held := res[4].ID, res[5].ID, res[6].ID
		if err := c.Delete(ctx, topic, deleted); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, topic, deleted); !errors.Is(err, ErrNotFound) {
			t.Errorf("get after delete: %v, want ErrNotFound", err)
		}
		if err := c.Delete(ctx, topic, deleted); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete again: %v, want ErrNotFound", err)
		}
		scheduled(9)
		newDue := res[5].Due.Add(time.Second)
		if _, err := c.Reschedule(ctx, topic, moved, newDue); err != nil {
			t.Fatal(err)
		}
		if in, err := c.Get(ctx, topic, moved); err != nil || !in.Due.Equal(newDue) || string(in.Body) != "5" {
			t.Errorf("get after reschedule: %+v, %v", in, err)
		}
		scheduled(9)
		for _, id := range []string{held, moved} {
			if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: id, Body: []byte("again")}); !errors.Is(err, ErrDuplicate) {
				t.Errorf("enqueue %s again: %v, want ErrDuplicate", id, err)
			}
		}
		again := time.Now().Add(time.Second)
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: deleted, Body: []byte("again"), At: again}); err != nil {
			t.Errorf("enqueue %s after its delete: %v", deleted, err)
		}
		scheduled(10)

		rec := newRecorder()
		runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond}, rec.handle)
		waitFor(t, 20*time.Second, "all ten delivered and the topic empty", func() bool {
			st, err := c.Stats(ctx, topic)
			return rec.total() >= 10 && err == nil && st.Scheduled == 0 && st.InFlight == 0
		})
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for i, r := range res {
			ds := rec.seen[r.ID]
			if len(ds) != 1 {
				t.Errorf("message %d (%s) delivered %d times, want once", i, r.ID, len(ds))
				continue
			}
			want, due := fmt.Sprint(i), r.Due
			switch r.ID {
			case deleted:
				want, due = "again", clock.CeilMS(again)
			case moved:
				due = newDue
			}
			if string(ds[0].Body) != want || !ds[0].Due.Equal(due) || rec.at[r.ID][0].Before(due) {
				t.Errorf("message %d delivered at %v: body %q due %v, want %q due %v", i,
					rec.at[r.ID][0].Format(time.StampMilli), ds[0].Body, ds[0].Due, want, due)
			}
		}
		conn = c.store.Pool().Get()
		defer conn.Close()
		if v, err := conn.Do("HGET", mk, keys.SegmentField(prefix)); v != nil || err != nil {
			t.Errorf("segment still there after its messages were delivered: %d bytes, %v", len(v.([]byte)), err)
		}
	})
}

// A segment whose messages were all deleted still accounts for its index
// entry. If a claim removes that entry and dies before exploding the
// segment, the reconciler indexes the empty segment again, and the next
// claim removes it: Stats do not stay one short, and no field is left.
func TestEmptiedSegmentReconciled(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const n = 2
		topic := "segment-emptied"
		c := newClient(t, addr, Options{Partitions: n})
		if _, err := c.ensureTopic(ctx, topic); err != nil { // creates the topic
			t.Fatal(err)
		}
		cs := &crashCase{topic: topic, p: 0, c: c}
		cs.id, cs.sibling = segmentPair(t, cs.p, n)
		due := time.Now().UnixMilli()
		if _, err := c.store.AddMany(ctx, []store.Group{cs.segmentGroup(due)}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{cs.id, cs.sibling} {
			if err := c.Delete(ctx, topic, id); err != nil {
				t.Fatal(err)
			}
		}
		scheduled := func() int64 { return scheduledOf(t, c, topic) }
		if got := scheduled(); got != 0 {
			t.Fatalf("scheduled after deleting both: %d, want 0", got)
		}
		tok := takeFence(t, c.store, topic, cs.p)
		h := &crashHook{failAt: 2} // the claim script runs, the explosion does not
		fs, err := store.Open(store.Options{Addr: addr, Hook: h.hook})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if _, err := fs.ClaimIndexOnly(ctx, topic, cs.p, tok, time.Now().UnixMilli(), 10); !errors.Is(err, portable.ErrInjected) {
			t.Fatalf("crashed claim: %v", err)
		}
		if got := scheduled(); got != -1 {
			t.Fatalf("scheduled after the crashed claim: %d, want -1 (the segment out of the index)", got)
		}
		reconcileSweep(t, c, topic, cs.p)
		if got := scheduled(); got != 0 {
			t.Errorf("scheduled after the reconciler: %d, want 0", got)
		}
		if cl, err := c.store.ClaimIndexOnly(ctx, topic, cs.p, tok, time.Now().UnixMilli(), 10); err != nil || len(cl) != 0 {
			t.Fatalf("claim: %+v, %v; want nothing", cl, err)
		}
		conn := c.store.Pool().Get()
		defer conn.Close()
		mk := keys.Records(c.store.Namespace(), topic, cs.p)
		if v, err := conn.Do("HGET", mk, keys.SegmentField(cs.id[:store.SegmentPrefixLen])); v != nil || err != nil {
			t.Errorf("emptied segment still there: %v, %v", v, err)
		}
		if got := scheduled(); got != 0 {
			t.Errorf("scheduled at the end: %d, want 0", got)
		}
	})
}

// A write that dies after the HMSET of a segment, before the script that
// counts it, leaves the segment uncounted (Stats see one message for it)
// and unindexed. The reconciler indexes and counts it, with the messages
// it holds by then; deleting from it before that does not make the count
// go wrong; and counting twice cannot happen.
func TestUncountedSegmentCounted(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		for _, deleteFirst := range []bool{false, true} {
			ctx := context.Background()
			const n = 2
			topic := fmt.Sprintf("segment-uncounted-%t", deleteFirst)
			c := newClient(t, addr, Options{Partitions: n})
			if _, err := c.ensureTopic(ctx, topic); err != nil { // creates the topic
				t.Fatal(err)
			}
			cs := &crashCase{topic: topic, p: 0, c: c}
			cs.id, cs.sibling = segmentPair(t, cs.p, n)
			fs := storeDyingBefore(t, addr, "EVALSHA")
			_, err := fs.AddMany(ctx, []store.Group{cs.segmentGroup(time.Now().Add(time.Hour).UnixMilli())})
			fs.Close()
			if !errors.Is(err, portable.ErrInjected) {
				t.Fatalf("crashed write: %v, want the injected fault", err)
			}
			want := int64(2)
			if deleteFirst {
				if err := c.Delete(ctx, topic, cs.id); err != nil {
					t.Fatal(err)
				}
				want = 1
			}
			if got := scheduledOf(t, c, topic); got != 0 {
				t.Fatalf("scheduled after the crashed write: %d, want 0 (not indexed yet)", got)
			}
			for sweep := range 2 {
				reconcileSweep(t, c, topic, cs.p)
				if got := scheduledOf(t, c, topic); got != want {
					t.Fatalf("delete first %t: scheduled after reconciler sweep %d: %d, want %d", deleteFirst, sweep+1, got, want)
				}
			}
			if err := c.Delete(ctx, topic, cs.sibling); err != nil {
				t.Fatal(err)
			}
			if got := scheduledOf(t, c, topic); got != want-1 {
				t.Errorf("delete first %t: scheduled after deleting the sibling: %d, want %d", deleteFirst, got, want-1)
			}
		}
	})
}

// scheduledOf is the Scheduled count of Stats.
func scheduledOf(t *testing.T, c *Client, topic string) int64 {
	t.Helper()
	st, err := c.Stats(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return st.Scheduled
}

// reconcileSweep runs the reconciler over all of partition p once.
func reconcileSweep(t *testing.T, c *Client, topic string, p int) {
	t.Helper()
	for cursor := "0"; ; {
		next, _, err := c.store.Reconcile(context.Background(), topic, p, cursor, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		if next == "0" {
			return
		}
		cursor = next
	}
}

// segmentPair returns two ids of partition p of n that share a segment
// prefix, as Client.steer makes them.
func segmentPair(t *testing.T, p, n int) (string, string) {
	t.Helper()
	prefix := NewID(time.Now())[:store.SegmentPrefixLen]
	a, okA := steerID(prefix+"0000", p, n)
	b, okB := steerID(prefix+"0100", p, n)
	if !okA || !okB {
		t.Fatalf("no segment ids in partition %d of %d", p, n)
	}
	return a, b
}

// segmentGroup is a Fresh group of id (due at due) and its sibling (due
// 100ms later): written as one segment.
func (cs *crashCase) segmentGroup(due int64) store.Group {
	return store.Group{Topic: cs.topic, P: cs.p, Fresh: true, Msgs: []store.NewMessage{
		{ID: cs.id, Record: newRecord(time.UnixMilli(due), 0)},
		{ID: cs.sibling, Record: newRecord(time.UnixMilli(due+100), 0)},
	}}
}

// writeSegment puts id and its sibling on the topic as a segment, id due
// in d, and the witness after them.
func (cs *crashCase) writeSegment(t *testing.T, d time.Duration) {
	t.Helper()
	cs.due = clock.CeilMS(time.Now().Add(d)).UnixMilli()
	if _, err := cs.c.store.AddMany(cs.ctx(), []store.Group{cs.segmentGroup(cs.due)}); err != nil {
		t.Fatalf("%s: write segment: %v", cs.name(), err)
	}
	cs.enqueue(t, time.Until(time.UnixMilli(cs.due))+200*time.Millisecond, 0, false)
}

// The operations above on a message held by a segment (see keys.SegmentField).
var segmentCrashOps = []*crashOp{
	{
		// store.AddMany of a Fresh group sharing a prefix: the segment
		// script and the ZADD of its member, in one pipeline.
		name: "enqueue-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 300*time.Millisecond, 0, false) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
			_, err := fs.AddMany(ctx, []store.Group{cs.segmentGroup(cs.due)})
			return err
		},
		after: afterByRecord,
	},
	{
		// poller.poll meeting a segment: the claim script, the explode
		// script, the ZADD of the sibling (not due yet), ZADD in flight + HMGET.
		name: "claim-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) {
			cs.writeSegment(t, 0)
			cs.fence(t)
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := claimAndBegin(ctx, fs, cs)
			return err
		},
		after: afterKept("claim", outDelivered),
	},
	{
		// store.Delete: the script that rewrites the segment without the
		// message, then ZREM of each index.
		name: "delete-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) { cs.writeSegment(t, 300*time.Millisecond) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Delete(ctx, cs.topic, cs.p, cs.id)
		},
		after: afterByRecord,
	},
	{
		// store.Reschedule: HGET + ZSCORE + HGET of the segment, the
		// move-out script, ZADD.
		name: "reschedule-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) {
			cs.writeSegment(t, 300*time.Millisecond)
			cs.newDue = clock.CeilMS(time.Now().Add(1200 * time.Millisecond)).UnixMilli()
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Reschedule(ctx, cs.topic, cs.p, cs.id, cs.newDue, time.Now().UnixMilli())
		},
		after: afterRescheduled,
	},
}
