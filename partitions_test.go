package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// waitChange waits until topic's partition count is n with no change
// running.
func waitChange(t *testing.T, c *Client, topic string, n int) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("the change of %s to %d partitions to end", topic, n), func() bool {
		info, err := c.Inspector().Partitions(context.Background(), topic)
		return err == nil && info.Count == n && info.Next == 0
	})
}

// A topic of 4 partitions grows to 16 and shrinks to 8 with two consumers
// running, messages falling due and others waiting an hour (given ids,
// generated ids stored as segments, dead messages). Lookups, deletes,
// reschedules and duplicate checks made during each change do what they
// say; afterwards every message is in its partition of the new count;
// the consumers own exactly the new count's partitions; the messages due
// are each delivered once, never early.
func TestRepartitionGrowShrink(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 3})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 4})
	const topic = "rp"
	var mu sync.Mutex
	delivered := map[string][]time.Time{}
	early := 0
	h := func(_ context.Context, d *Delivery) error {
		now := time.Now()
		mu.Lock()
		delivered[d.ID] = append(delivered[d.ID], now)
		if now.Before(d.Due) {
			early++
		}
		mu.Unlock()
		if strings.HasPrefix(d.ID, "dies-") {
			return errors.New("dies")
		}
		return nil
	}
	opts := ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: 2 * time.Second, moveSettle: 3 * time.Second}
	var ks []*Consumer
	for _, id := range []string{"k1", "k2"} {
		o := opts
		o.ID = id
		ks = append(ks, runConsumer(t, c, o, h))
	}
	owned := func() (n int) {
		for _, k := range ks {
			n += len(k.Stats().Owned)
		}
		return n
	}
	waitFor(t, 10*time.Second, "4 partitions owned", func() bool { return owned() == 4 })

	far := time.Now().Add(time.Hour)
	var soon, ahead []string // ids due within seconds, and in an hour
	var msgs []Message
	for i := range 300 {
		id := fmt.Sprintf("soon-%d", i)
		soon = append(soon, id)
		msgs = append(msgs, Message{Topic: topic, ID: id, Delay: time.Duration(i) * 40 * time.Millisecond})
	}
	for i := range 200 {
		id := fmt.Sprintf("far-%d", i)
		ahead = append(ahead, id)
		msgs = append(msgs, Message{Topic: topic, ID: id, At: far})
	}
	for i := range 3 {
		msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("dies-%d", i), MaxAttempts: 1})
	}
	mustBatch(t, c, msgs)
	gen := make([]Message, 100) // generated ids, due in an hour: segments
	for i := range gen {
		gen[i] = Message{Topic: topic, At: far, Body: []byte("gen")}
	}
	res, err := c.SendBatch(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ahead = append(ahead, r.ID)
	}
	waitFor(t, 10*time.Second, "3 dead messages", func() bool {
		st, err := c.Inspector().Stats(ctx, topic)
		return err == nil && st.Dead == 3
	})

	deleted := map[string]bool{}
	rescheduled := map[string]time.Time{}
	// during runs lookups, deletes, reschedules and enqueues while a
	// change runs, and checks each outcome.
	during := func(round int) {
		t.Helper()
		time.Sleep(2500 * time.Millisecond) // past the start of the moves
		for i := round; i < len(ahead); i += 37 {
			id := ahead[i]
			if deleted[id] {
				continue
			}
			if in, err := c.Get(ctx, topic, id); err != nil || in.State != StateScheduled {
				t.Errorf("get %s during the change: %+v, %v", id, in, err)
			}
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id}); !errors.Is(err, ErrDuplicate) {
				t.Errorf("enqueue of %s again during the change: %v, want ErrDuplicate", id, err)
			}
		}
		for i := round + 5; i < len(ahead); i += 41 {
			id := ahead[i]
			if deleted[id] || rescheduled[id] != (time.Time{}) {
				continue
			}
			if err := c.Delete(ctx, topic, id); err != nil {
				t.Errorf("delete %s during the change: %v", id, err)
			}
			deleted[id] = true
		}
		for i := round + 11; i < len(ahead); i += 43 {
			id := ahead[i]
			if deleted[id] {
				continue
			}
			at := far.Add(time.Duration(round+1) * time.Hour)
			if _, err := c.Reschedule(ctx, topic, id, at); err != nil {
				t.Errorf("reschedule %s during the change: %v", id, err)
				continue
			}
			rescheduled[id] = at
		}
		for i := range 20 {
			id := fmt.Sprintf("new-%d-%d", round, i)
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id, Delay: 500 * time.Millisecond}); err != nil {
				t.Errorf("enqueue %s during the change: %v", id, err)
			}
			soon = append(soon, id)
		}
	}
	// check verifies every message waiting an hour is where the count n
	// puts it, as it should be.
	check := func(n int) {
		t.Helper()
		for _, id := range ahead {
			in, err := c.Get(ctx, topic, id)
			if deleted[id] {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s deleted during a change: %+v, %v", id, in, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s after the change to %d: %v", id, n, err)
				continue
			}
			if want := partition.For(id, n); in.Partition != want {
				t.Errorf("%s in partition %d, want %d of %d", id, in.Partition, want, n)
			}
			want := far
			if at, ok := rescheduled[id]; ok {
				want = at
			}
			if !in.Due.Equal(want.Truncate(time.Millisecond)) && !in.Due.Equal(want.Truncate(time.Millisecond).Add(time.Millisecond)) {
				t.Errorf("%s due %v, want %v", id, in.Due, want)
			}
		}
		dead, err := c.Inspector().ListDead(ctx, topic, 10)
		if err != nil || len(dead) != 3 {
			t.Errorf("dead after the change to %d: %d, %v", n, len(dead), err)
		}
		for _, in := range dead {
			if want := partition.For(in.ID, n); in.Partition != want {
				t.Errorf("dead %s in partition %d, want %d of %d", in.ID, in.Partition, want, n)
			}
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("%d partitions owned", n), func() bool { return owned() == n })
	}

	if _, err := c.Admin().SetPartitions(ctx, topic, 6, PartitionsOptions{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "multiples 8, 12, 16") {
		t.Errorf("set 6 on a topic of 4: %v, want ErrInvalid naming the allowed counts", err)
	}
	start := time.Now()
	info, err := c.Admin().SetPartitions(ctx, topic, 16, PartitionsOptions{})
	if err != nil || info.Count != 4 || info.Next != 16 || len(info.Sources) != 4 {
		t.Fatalf("set 16: %+v, %v", info, err)
	}
	if again, err := c.Admin().SetPartitions(ctx, topic, 16, PartitionsOptions{}); err != nil || again.Next != 16 {
		t.Errorf("set 16 again: %+v, %v", again, err)
	}
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); !errors.Is(err, ErrChangeRunning) {
		t.Errorf("set 8 while growing to 16: %v, want ErrChangeRunning", err)
	}
	during(0)
	waitChange(t, c, topic, 16)
	t.Logf("grew from 4 to 16 partitions in %v", time.Since(start))
	check(16)

	start = time.Now()
	if info, err = c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil || info.Next != 8 || len(info.Sources) != 8 {
		t.Fatalf("set 8: %+v, %v", info, err)
	}
	during(1)
	waitChange(t, c, topic, 8)
	t.Logf("shrank from 16 to 8 partitions in %v", time.Since(start))
	check(8)

	waitFor(t, 20*time.Second, "every message due delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range soon {
			if len(delivered[id]) == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range soon {
		if n := len(delivered[id]); n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	for _, id := range ahead {
		if len(delivered[id]) > 0 {
			t.Errorf("%s, due in an hour or more, delivered", id)
		}
	}
	if early > 0 {
		t.Errorf("%d deliveries before their due time", early)
	}
	moved := int64(0)
	for _, k := range ks {
		moved += k.Stats().Moved
	}
	if moved == 0 {
		t.Error("no message counted as moved")
	}
}

// ledger records the deliveries of a test's consumers.
type ledger struct {
	mu    sync.Mutex
	times map[string][]time.Time
	early []string
}

func (g *ledger) handle(_ context.Context, d *Delivery) error {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.times == nil {
		g.times = map[string][]time.Time{}
	}
	g.times[d.ID] = append(g.times[d.ID], now)
	if now.Before(d.Due) {
		g.early = append(g.early, d.ID)
	}
	return nil
}

func (g *ledger) count(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.times[id])
}

// cancelCheck checks that every id of ids is found by Get in its
// partition of n, due at its due.
func cancelCheck(t *testing.T, c *Client, topic string, n int, due map[string]time.Time) {
	t.Helper()
	ctx := context.Background()
	for id, at := range due {
		in, err := c.Get(ctx, topic, id)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if want := partition.For(id, n); in.Partition != want {
			t.Errorf("%s in partition %d, want %d of %d", id, in.Partition, want, n)
		}
		if d := in.Due.Sub(at); d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("%s due %v, want %v", id, in.Due, at)
		}
	}
}

// A change from 4 to 8 partitions, cancelled once the running consumer
// moved messages: the change ends back at 4 partitions, every message is
// found throughout and ends in its partition of 4, and the messages due
// after the cancel (moved to 8 partitions, then back) are each delivered
// once, at their due time.
func TestRepartitionCancelAfterMoves(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 3})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 4})
	const topic = "rp-cancel"
	var g ledger
	k := runConsumer(t, c, ConsumerOptions{Topic: topic, ID: "k1", PollInterval: 100 * time.Millisecond,
		Lease: 2 * time.Second, moveSettle: 3 * time.Second}, g.handle)
	waitFor(t, 10*time.Second, "4 partitions owned", func() bool { return len(k.Stats().Owned) == 4 })

	// Due past the moves' horizon (30 s), so that they move, after the
	// cancelled change has ended (a settle time, 30 s, after the cancel,
	// and the sweeps of its sources), so that they are still there to be
	// found then, and soon enough to be delivered within the test.
	due := map[string]time.Time{}
	soon := time.Now().Add(55 * time.Second).Truncate(time.Millisecond)
	far := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var msgs []Message
	for i := range 200 {
		id, at := fmt.Sprintf("soon-%d", i), soon.Add(time.Duration(i)*10*time.Millisecond)
		due[id] = at
		msgs = append(msgs, Message{Topic: topic, ID: id, At: at})
	}
	for i := range 200 {
		id := fmt.Sprintf("far-%d", i)
		due[id] = far
		msgs = append(msgs, Message{Topic: topic, ID: id, At: far})
	}
	mustBatch(t, c, msgs)

	if _, err := c.Admin().CancelPartitions(ctx, topic); !errors.Is(err, ErrNoChange) {
		t.Errorf("cancel with no change running: %v, want ErrNoChange", err)
	}
	info, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{})
	if err != nil || info.Next != 8 || info.Consumers != 1 || info.SettleUntil == nil {
		t.Fatalf("set 8: %+v, %v", info, err)
	}
	waitFor(t, 20*time.Second, "messages moved", func() bool {
		info, err = c.Inspector().Partitions(ctx, topic)
		return err == nil && info.MovedMessages > 0
	})
	t.Logf("before the cancel: %+v", info)
	if info.ToMoveExact || info.ToMove > info.Left {
		t.Errorf("growing: to move %d (exact %v) of %d left, want an estimate at most what is left", info.ToMove, info.ToMoveExact, info.Left)
	}
	info, err = c.Admin().CancelPartitions(ctx, topic)
	if err != nil || !info.Cancelled || info.Count != 8 || info.Next != 4 || info.MovedMessages != 0 || len(info.Moved) != 0 {
		t.Fatalf("cancel: %+v, %v; want the reverse change, from 8 to 4, with nothing moved or marked yet", info, err)
	}
	if again, err := c.Admin().CancelPartitions(ctx, topic); err != nil || !again.Cancelled || again.Next != 4 || again.Count != 8 {
		t.Errorf("cancel again: %+v, %v; want the same reverse change", again, err)
	}
	// Another count is refused, saying what ends or undoes the reverse.
	if _, err := c.Admin().SetPartitions(ctx, topic, 16, PartitionsOptions{Force: true}); !errors.Is(err, ErrChangeRunning) ||
		!strings.Contains(err.Error(), "a cancelled change") || !strings.Contains(err.Error(), "--set 8") || strings.Contains(err.Error(), "--cancel") {
		t.Errorf("a count during the reverse: %v; want it refused, naming --set 8 and not --cancel", err)
	}
	for id := range due {
		if _, err := c.Get(ctx, topic, id); err != nil {
			t.Errorf("%s during the cancel: %v", id, err)
		}
	}
	waitChange(t, c, topic, 4)
	if left := time.Until(soon); left < 0 {
		t.Fatalf("the cancelled change ended %v after the first message due soon, which may be gone: the test's margin is too short", -left)
	}
	cancelCheck(t, c, topic, 4, due)
	waitFor(t, 60*time.Second, "the messages due soon delivered", func() bool {
		for i := range 200 {
			if g.count(fmt.Sprintf("soon-%d", i)) == 0 {
				return false
			}
		}
		return true
	})
	for id := range due {
		if n := g.count(id); n != map[bool]int{true: 1, false: 0}[due[id].Before(far)] {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	if len(g.early) > 0 {
		t.Errorf("delivered before their due time: %v", g.early)
	}
}

// A change cancelled with no consumer running (by --set of the old
// count), then one cancelled before any move: both end at the old count
// once a consumer runs, with every message found throughout, those
// written during the change included.
func TestRepartitionCancelIdle(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 4})
	const topic = "rp-cancel-idle"
	far := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	due := map[string]time.Time{}
	add := func(prefix string) {
		var msgs []Message
		for i := range 100 {
			id := fmt.Sprintf("%s-%d", prefix, i)
			due[id] = far
			msgs = append(msgs, Message{Topic: topic, ID: id, At: far})
		}
		mustBatch(t, c, msgs)
	}
	add("before")
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	add("during") // placed in 8 partitions
	info, err := c.Admin().SetPartitions(ctx, topic, 4, PartitionsOptions{})
	if err != nil || !info.Cancelled || info.Count != 8 || info.Next != 4 || info.Consumers != 0 || info.OwnedSources != 0 {
		t.Fatalf("set 4 while growing from 4 to 8: %+v, %v; want the change cancelled, no consumer", info, err)
	}
	beyond := int64(0) // the messages written to partitions 4..7 during the change
	for i := range 100 {
		if partition.For(fmt.Sprintf("during-%d", i), 8) >= 4 {
			beyond++
		}
	}
	if !info.ToMoveExact || info.ToMove != beyond {
		t.Errorf("shrinking back: to move %d (exact %v), want exactly %d, the messages written to 4..7", info.ToMove, info.ToMoveExact, beyond)
	}
	add("cancelled")
	for id := range due {
		if _, err := c.Get(ctx, topic, id); err != nil {
			t.Errorf("%s with the change cancelled: %v", id, err)
		}
	}
	var g ledger
	k := runConsumer(t, c, ConsumerOptions{Topic: topic, ID: "k1", PollInterval: 100 * time.Millisecond,
		Lease: 2 * time.Second, moveSettle: 3 * time.Second}, g.handle)
	waitChange(t, c, topic, 4)
	cancelCheck(t, c, topic, 4, due)

	// Cancelled at once: before any move could start.
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	add("again")
	if info, err = c.Admin().CancelPartitions(ctx, topic); err != nil || !info.Cancelled {
		t.Fatalf("cancel at once: %+v, %v", info, err)
	}
	waitChange(t, c, topic, 4)
	cancelCheck(t, c, topic, 4, due)
	waitFor(t, 10*time.Second, "the consumer owning the 4 partitions only", func() bool { return len(k.Stats().Owned) == 4 })
}

// A move pass of a change cancelled while the pass runs, after it wrote
// its copies and before it removed the sources, here with the reverse
// change's pass run in between (as a stalled pass could meet it): the
// pass stops, undoes what it wrote, and the message is in its old
// partition only, once. Without the check, the pass would remove the
// only copy left.
func TestMoveCancelledMidPass(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		topic := "cancel-mid-" + portOf(t, addr)
		c := newClient(t, addr, Options{Partitions: 2})
		ids := moveSetup(t, c, topic, "scheduled")
		id := ids[0]
		p, q := partition.For(id, 2), partition.For(id, 4)
		tokP, tokQ := takeFence(t, c.store, topic, p), takeFence(t, c.store, topic, q)
		l, err := c.store.BeginChange(ctx, topic, 4, time.Now().Add(-time.Minute).UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		horizon := time.Now().Add(30 * time.Second).UnixMilli()
		var once sync.Once
		var hookErr error
		fs, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}, Hook: func(cmd string, args []any) error {
			// The pass's read of the layout before it removes the sources.
			if cmd == "HMGET" && len(args) == 6 && args[0] == keys.Meta(DefaultNamespace, topic) { // the layout's fields
				once.Do(func() {
					rev, err := c.store.CancelChange(ctx, topic, l, time.Now().UnixMilli())
					if err != nil {
						hookErr = err
						return
					}
					_, hookErr = c.store.MoveScan(ctx, store.TopicPartition{Topic: topic, P: q}, store.MoveSweep{Layout: rev, Token: tokQ, Cursor: "0", Count: 256, HorizonMS: horizon})
				})
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		_, err = fs.MoveScan(ctx, store.TopicPartition{Topic: topic, P: p}, store.MoveSweep{Layout: l, Token: tokP, Cursor: "0", Count: 256, HorizonMS: horizon})
		if hookErr != nil {
			t.Fatalf("cancel and reverse pass: %v", hookErr)
		}
		if !errors.Is(err, store.ErrChangeReplaced) {
			t.Errorf("pass of the cancelled change: %v, want ErrChangeReplaced", err)
		}
		if in, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: p}, id); err != nil || in == nil {
			t.Errorf("%s not in its old partition %d: %v", id, p, err)
		}
		if _, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: q}, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s in partition %d, where the cancelled pass put it: %v", id, q, err)
		}
		in, err := c.Get(ctx, topic, id)
		if err != nil || in.State != StateScheduled || in.Partition != p {
			t.Errorf("%s after the cancelled pass: %+v, %v", id, in, err)
		}
	})
}
