package delayq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
)

// One SendBatch of several topics: given ids (one of them twice),
// generated ids due far ahead and due now, an invalid message, and a topic
// whose stored partition count differs from the client's (its messages go
// to the stored count's partitions). Each message gets its own outcome in
// its own slot, and exactly the accepted ones are stored, in their
// topics, with their bodies.
func TestEnqueueBatchMixed(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		other := newClient(t, addr, Options{Partitions: 8})
		if _, err := other.Send(ctx, Message{Topic: "mixed-c", Body: []byte("eight")}); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		msgs := []Message{
			{Topic: "mixed-b", Body: []byte("b0"), At: later},
			{Topic: "mixed-a", ID: "x", Body: []byte("a-x")},
			{Topic: "mixed-c", ID: "c1", Body: []byte("c1")},
			{Topic: "mixed-a", ID: "y", Body: []byte("a-y"), At: later},
			{Topic: "mixed-b", Body: []byte("b1")},
			{Topic: "mixed-a", ID: "x", Body: []byte("a-x again")},
			{Topic: "mixed-a", ID: "z", Body: []byte("bad"), Delay: -time.Second},
			{Topic: "mixed-b", Body: []byte("b2"), At: later},
			{Topic: "mixed-b", ID: "x", Body: []byte("b-x")}, // the same id in another topic
			{Topic: "mixed-c", Body: []byte("c2")},
		}
		res, err := c.SendBatch(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(msgs) {
			t.Fatalf("%d results for %d messages", len(res), len(msgs))
		}
		for i, r := range res {
			m := msgs[i]
			switch {
			case i == 5:
				if !errors.Is(r.Err, ErrDuplicate) || !strings.Contains(r.Err.Error(), `"x" twice in one batch`) {
					t.Errorf("message %d (x again): %v, want ErrDuplicate", i, r.Err)
				}
			case i == 6:
				if !errors.Is(r.Err, ErrInvalid) {
					t.Errorf("message %d (negative delay): %v, want ErrInvalid", i, r.Err)
				}
			default:
				if r.Err != nil {
					t.Errorf("message %d: %v", i, r.Err)
					continue
				}
				if m.ID != "" && r.ID != m.ID {
					t.Errorf("message %d: id %q, want %q", i, r.ID, m.ID)
				}
				info, err := c.Get(ctx, m.Topic, r.ID)
				if err != nil {
					t.Errorf("get message %d (%s in %s): %v", i, r.ID, m.Topic, err)
					continue
				}
				if string(info.Body) != string(m.Body) || info.State != StateScheduled {
					t.Errorf("message %d: stored %q in state %v, want %q scheduled", i, info.Body, info.State, m.Body)
				}
				if m.Topic == "mixed-c" && info.Partition >= 8 {
					t.Errorf("message %d in partition %d of a topic of 8", i, info.Partition)
				}
			}
		}
		sent, // Refused before it has an id, a message with none to give is
			// named as such.
			err := c.Send(ctx, Message{Topic: "mixed-a", Body: []byte("bad"), Delay: -time.Second})
		id := sent.ID
		if !errors.Is(err, ErrInvalid) || id != "" || !strings.Contains(err.Error(), "Delay -1s of a message with a generated id is negative") {
			t.Errorf("invalid message with a generated id: %q, %v", id, err)
		}
		for topic, want := range map[string]int64{"mixed-a": 2, "mixed-b": 4, "mixed-c": 3} {
			st, err := c.Inspector().Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if st.Scheduled != want {
				t.Errorf("%s: %d scheduled, want %d", topic, st.Scheduled, want)
			}
			if wantN := map[bool]int{false: 4, true: 8}[topic == "mixed-c"]; len(st.Partitions) != wantN {
				t.Errorf("%s: stats of %d partitions, want %d", topic, len(st.Partitions), wantN)
			}
		}
	})
}

// A message due now, sent to an idle topic, wakes its partition's owner:
// with the defaults (an idle partition looks every 10 s), two consumers start 50 such
// messages within 100 ms of their due, p99, through Twemproxy.
func TestWakeDueNow(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	c := newClient(t, env.Proxy, Options{})
	late := dueNow(t, c, c, "wake", 50)
	p99 := late[len(late)*99/100-1]
	testenv.Figure(t, "scenario=due-now messages=50 consumers=2 lateness_ms p50=%.1f p99=%.1f max=%.1f",
		ms(late[len(late)/2]), ms(p99), ms(late[len(late)-1]))
	if p99 > 100*time.Millisecond {
		t.Errorf("p99 lateness %v of messages due now, want within 100 ms", p99)
	}
}

// A producer whose wake-ups never arrive (killed between its write and
// the wake-up, or a proxy error then) delays its messages due now by at
// most an idle partition's poll interval (10 s, with 10% jitter): none is
// lost.
func TestWakeLost(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	changes := keys.Changes(DefaultNamespace)
	var mu sync.Mutex
	refused := 0
	producer := newClient(t, env.Proxy, Options{hook: func(cmd string, args []any) error {
		if (cmd == "EVALSHA" || cmd == "EVAL") && len(args) > 2 && args[2] == changes {
			mu.Lock()
			refused++
			mu.Unlock()
			return fmt.Errorf("crash before the wake-up: %w", portable.ErrInjected)
		}
		return nil
	}})
	consumers := newClient(t, env.Proxy, Options{})
	late := dueNow(t, producer, consumers, "wake-lost", 20)
	mu.Lock()
	defer mu.Unlock()
	if refused < 20 {
		t.Errorf("%d wake-ups refused, want one per message (20)", refused)
	}
	worst := late[len(late)-1]
	testenv.Figure(t, "scenario=due-now-lost-wakeups messages=20 lateness_ms p50=%.1f max=%.1f", ms(late[len(late)/2]), ms(worst))
	if bound := DefaultIdlePollInterval*11/10 + 300*time.Millisecond; worst > bound { // the look, its jitter, a claim
		t.Errorf("max lateness %v without wake-ups, want within an idle poll interval (%v)", worst, bound)
	}
}

// dueNow sends n messages due at once, one at a time and 20-100 ms apart
// at random (a fixed spacing would meet the owners' reads of the wake-up
// counters at a fixed phase), to
// an idle topic that two consumers with the defaults (an idle partition
// looks every 5 s) run, and returns each one's lateness: from its own due to its handler's
// start, on this process's clock.
func dueNow(t *testing.T, producer *Client, consumers *Client, topic string, n int) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	late := map[string]time.Duration{}
	h := func(_ context.Context, d *Delivery) error {
		at := time.Now()
		mu.Lock()
		late[d.ID] = at.Sub(d.Due)
		mu.Unlock()
		return nil
	}
	var ks []*Consumer
	for i := range 2 {
		ks = append(ks, runConsumer(t, consumers, ConsumerOptions{Topic: topic, ID: fmt.Sprintf("%s-%d", topic, i)}, h))
	}
	waitFor(t, 10*time.Second, "the partitions shared by the two consumers", func() bool {
		return len(ks[0].Stats().Owned) == 8 && len(ks[1].Stats().Owned) == 8
	})
	time.Sleep(1500 * time.Millisecond) // idle: past the polls of the start, into the idle looks
	ctx := context.Background()
	for i := range n {
		if _, err := producer.Send(ctx, Message{Topic: topic, ID: fmt.Sprintf("now-%d", i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20*time.Millisecond + rand.N(80*time.Millisecond))
	}
	waitFor(t, 10*time.Second, "every message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(late) == n
	})
	mu.Lock()
	defer mu.Unlock()
	out := make([]time.Duration, 0, n)
	for _, d := range late {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// ms is d in milliseconds, for figures.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
		res, err := prod.SendBatch(ctx, msgs)
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
			st, err := c.Inspector().Stats(ctx, topic)
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
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id, Body: []byte("again")}); !errors.Is(err, ErrDuplicate) {
				t.Errorf("enqueue %s again: %v, want ErrDuplicate", id, err)
			}
		}
		again := time.Now().Add(time.Second)
		if _, err := c.Send(ctx, Message{Topic: topic, ID: deleted, Body: []byte("again"), At: again}); err != nil {
			t.Errorf("enqueue %s after its delete: %v", deleted, err)
		}
		scheduled(10)

		rec := newRecorder()
		runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond}, rec.handle)
		waitFor(t, 20*time.Second, "all ten delivered and the topic empty", func() bool {
			st, err := c.Inspector().Stats(ctx, topic)
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
		fs, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}, Hook: h.hook})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if _, err := fs.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: cs.p}, tok, time.Now().UnixMilli(), 10); !errors.Is(err, portable.ErrInjected) {
			t.Fatalf("crashed claim: %v", err)
		}
		if got := scheduled(); got != -1 {
			t.Fatalf("scheduled after the crashed claim: %d, want -1 (the segment out of the index)", got)
		}
		reconcileSweep(t, c, topic, cs.p)
		if got := scheduled(); got != 0 {
			t.Errorf("scheduled after the reconciler: %d, want 0", got)
		}
		if cl, err := c.store.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: cs.p}, tok, time.Now().UnixMilli(), 10); err != nil || len(cl) != 0 {
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
	st, err := c.Inspector().Stats(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return st.Scheduled
}

// reconcileSweep runs the reconciler over all of partition p once.
func reconcileSweep(t *testing.T, c *Client, topic string, p int) {
	t.Helper()
	for cursor := "0"; ; {
		next, _, err := c.store.Reconcile(context.Background(), store.TopicPartition{Topic: topic, P: p}, cursor, 100, nil, time.Now().UnixMilli())
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

// During a change of the count, a send with a policy (replace, debounce)
// of an id that lives in its old partition is written there, and wakes
// that partition's owner, who delivers it: not the owner of the id's
// partition in the new count, who has nothing to claim (the message
// would then wait for an idle poll, up to 5.5 s). A send of a new id goes
// to the new count and wakes that partition's owner.
func TestWakePutDuringChange(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 4})
	const topic = "wake-change"
	movedID := func(prefix string) string { // an id whose partition in 8 is not its partition in 4
		for i := 0; ; i++ {
			if id := fmt.Sprint(prefix, i); partition.For(id, 8) >= 4 {
				return id
			}
		}
	}
	old := movedID("old-")
	if _, err := c.Send(ctx, Message{Topic: topic, ID: old, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// No consumer runs: the change stays started, the message stays put.
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	counters := func(ps ...int) []int64 {
		t.Helper()
		var fields []string
		for _, p := range ps {
			fields = append(fields, keys.WakeField(topic, p))
		}
		got, err := c.store.Changes(ctx, fields)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, policy := range []OnDuplicate{Replace, Debounce} {
		from, to := partition.For(old, 4), partition.For(old, 8)
		before := counters(from, to)
		r, err := c.SendBatch(ctx, []Message{{Topic: topic, ID: old, OnDuplicate: policy}})
		if err != nil || r[0].Err != nil {
			t.Fatalf("%s: %v, %v", policy, err, r)
		}
		if info, err := c.Get(ctx, topic, old); err != nil || info.Partition != from {
			t.Fatalf("%s: %+v, %v; want the message in its old partition %d", policy, info, err, from)
		}
		after := counters(from, to)
		if after[0] != before[0]+1 || after[1] != before[1] {
			t.Errorf("%s of an id in old partition %d (new %d): wake-ups %v -> %v; want the old partition's owner woken, once, and not the new one's",
				policy, from, to, before, after)
		}
	}
	fresh := movedID("new-")
	before := counters(partition.For(fresh, 4), partition.For(fresh, 8))
	if _, err := c.Send(ctx, Message{Topic: topic, ID: fresh, OnDuplicate: Replace}); err != nil {
		t.Fatal(err)
	}
	if after := counters(partition.For(fresh, 4), partition.For(fresh, 8)); after[0] != before[0] || after[1] != before[1]+1 {
		t.Errorf("replace of a new id: wake-ups %v -> %v; want the new partition's owner woken, once", before, after)
	}
}
