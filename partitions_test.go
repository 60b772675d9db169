package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// waitChange waits until topic's partition count is n with no change
// running.
func waitChange(t *testing.T, c *Client, topic string, n int) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("the change of %s to %d partitions to end", topic, n), func() bool {
		info, err := c.Partitions(context.Background(), topic)
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
	res, err := c.EnqueueBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	gen := make([]Message, 100) // generated ids, due in an hour: segments
	for i := range gen {
		gen[i] = Message{Topic: topic, At: far, Body: []byte("gen")}
	}
	if res, err = c.EnqueueBatch(ctx, gen); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ahead = append(ahead, r.ID)
	}
	waitFor(t, 10*time.Second, "3 dead messages", func() bool {
		st, err := c.Stats(ctx, topic)
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
			if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: id}); !errors.Is(err, ErrDuplicate) {
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
			if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: id, Delay: 500 * time.Millisecond}); err != nil {
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
		dead, err := c.ListDead(ctx, topic, 10)
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

	if _, err := c.SetPartitions(ctx, topic, 6, PartitionsOptions{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "multiples 8, 12, 16") {
		t.Errorf("set 6 on a topic of 4: %v, want ErrInvalid naming the allowed counts", err)
	}
	start := time.Now()
	info, err := c.SetPartitions(ctx, topic, 16, PartitionsOptions{})
	if err != nil || info.Count != 4 || info.Next != 16 || len(info.Sources) != 4 {
		t.Fatalf("set 16: %+v, %v", info, err)
	}
	if again, err := c.SetPartitions(ctx, topic, 16, PartitionsOptions{}); err != nil || again.Next != 16 {
		t.Errorf("set 16 again: %+v, %v", again, err)
	}
	if _, err := c.SetPartitions(ctx, topic, 8, PartitionsOptions{}); !errors.Is(err, ErrChangeRunning) {
		t.Errorf("set 8 while growing to 16: %v, want ErrChangeRunning", err)
	}
	during(0)
	waitChange(t, c, topic, 16)
	t.Logf("grew from 4 to 16 partitions in %v", time.Since(start))
	check(16)

	start = time.Now()
	if info, err = c.SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil || info.Next != 8 || len(info.Sources) != 8 {
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
