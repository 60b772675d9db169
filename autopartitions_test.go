package delayq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

func TestAutoTarget(t *testing.T) {
	a := AutoPartitions{Min: 4, Max: 64}.withDefaults()
	for _, tc := range []struct {
		count, live, want int
		after             time.Duration
	}{
		{4, 2, 0, 0},                           // within the count, not far below it
		{4, 4, 0, 0},                           // one each
		{4, 5, 8, DefaultAutoGrowAfter},        // more consumers than partitions
		{8, 16, 16, DefaultAutoGrowAfter},      // doubling, one step at a time
		{64, 100, 0, 0},                        // at max
		{16, 4, 8, DefaultAutoShrinkAfter},     // a quarter or fewer
		{16, 5, 0, 0},                          // more than a quarter
		{8, 2, 4, DefaultAutoShrinkAfter},      // down to min
		{4, 0, 0, 0},                           // at min
		{2, 1, 4, DefaultAutoGrowAfter},        // below min
		{128, 200, 64, DefaultAutoShrinkAfter}, // above max
	} {
		got, after := autoTarget(a, tc.count, tc.live)
		if got != tc.want || after != tc.after {
			t.Errorf("autoTarget(%d partitions, %d live) = %d after %v, want %d after %v", tc.count, tc.live, got, after, tc.want, tc.after)
		}
		// A change never leads to its reverse: the fair share after it
		// does not want the count back.
		if got != 0 && got >= a.Min && got <= a.Max && tc.count >= a.Min && tc.count <= a.Max {
			if back, _ := autoTarget(a, got, tc.live); back == tc.count {
				t.Errorf("%d partitions, %d live: %d, which wants %d again", tc.count, tc.live, got, back)
			}
		}
	}
}

func TestAutoPartitionsValidate(t *testing.T) {
	for _, a := range []AutoPartitions{{Min: -1}, {Min: 8, Max: 4}, {Max: 100000}, {Cooldown: -time.Second}} {
		if err := a.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", a, err)
		}
	}
	if err := (AutoPartitions{}).Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// A topic of 2 partitions on an automatic count (min 2, max 8) follows
// its consumers: 3 consumers grow it to 4, 5 to 8; down to 1 consumer
// it shrinks to 4, then to 2. Every change is one the settings allow,
// and messages falling due meanwhile are each delivered once.
func TestAutoPartitionsFollowConsumers(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 2})
	const topic = "auto"
	var mu sync.Mutex
	delivered := map[string]int{}
	h := func(_ context.Context, d *Delivery) error {
		mu.Lock()
		delivered[d.ID]++
		mu.Unlock()
		return nil
	}
	opts := ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: 2 * time.Second,
		moveSettle: 2 * time.Second, autoCheck: 100 * time.Millisecond,
		AutoPartitions: &AutoPartitions{Min: 2, Max: 8, GrowAfter: 500 * time.Millisecond, ShrinkAfter: time.Second, Cooldown: time.Second}}
	start := func(id string) (*Consumer, func()) {
		o := opts
		o.ID = id
		return runStoppable(t, c, o, h)
	}
	var changes []string
	var chMu sync.Mutex
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		last := ""
		for watchCtx.Err() == nil {
			if info, err := c.Partitions(watchCtx, topic); err == nil {
				now := fmt.Sprintf("%d->%d", info.Count, info.Next)
				if info.Next != 0 && now != last {
					chMu.Lock()
					changes = append(changes, now)
					chMu.Unlock()
				}
				last = now
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var msgs []Message
	for i := range 300 {
		msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("m-%d", i), Delay: time.Duration(i) * 10 * time.Millisecond})
	}
	var stops []func()
	for i := range 3 {
		_, stop := start(fmt.Sprint("k", i))
		stops = append(stops, stop)
	}
	if _, err := c.EnqueueBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "3 consumers growing the count to 4", countIs(c, topic, 4))
	for i := 3; i < 5; i++ {
		_, stop := start(fmt.Sprint("k", i))
		stops = append(stops, stop)
	}
	waitFor(t, 30*time.Second, "5 consumers growing the count to 8", countIs(c, topic, 8))
	info, err := c.Partitions(ctx, topic)
	if err != nil || info.Auto == nil || info.Auto.Settings.Max != 8 || info.Auto.LastChange == nil {
		t.Fatalf("Partitions: %+v, %v; want the auto settings and the last change", info, err)
	}
	for _, stop := range stops[1:] {
		stop()
	}
	waitFor(t, 60*time.Second, "1 consumer shrinking the count to 2", countIs(c, topic, 2))
	waitFor(t, 30*time.Second, "every message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == len(msgs)
	})
	stopWatch()
	chMu.Lock()
	got := fmt.Sprint(changes)
	chMu.Unlock()
	if want := "[2->4 4->8 8->4 4->2]"; got != want {
		t.Errorf("changes %s, want %s", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}

// A schedule firing every second through automatic changes of the count
// (2 -> 4 -> 8 -> 4 -> 2) as consumers join and leave, half of its
// occurrences failing their first attempt so that they are delivered
// again, across a change: every occurrence comes once (one id per time,
// one success), none is skipped. The schedule's mark moves with each
// change, and a chain step during one also reads it in its old place.
func TestAutoPartitionsSchedule(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 2})
	const topic = "auto-sched"
	var mu sync.Mutex
	ids := map[int64]map[string]bool{} // occurrence time -> ids delivered
	ok := map[int64]int{}              // occurrence time -> successful deliveries
	h := func(_ context.Context, d *Delivery) error {
		_, _, at, isOcc := ParseScheduleID(d.ID)
		if !isOcc {
			return nil
		}
		ms := at.UnixMilli()
		mu.Lock()
		defer mu.Unlock()
		if ids[ms] == nil {
			ids[ms] = map[string]bool{}
		}
		ids[ms][d.ID] = true
		if d.Attempt == 1 && ms/1000%2 == 0 {
			return errors.New("first attempt fails")
		}
		ok[ms]++
		return nil
	}
	opts := ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: 2 * time.Second,
		Backoff: []time.Duration{1500 * time.Millisecond}, moveSettle: 2 * time.Second, autoCheck: 100 * time.Millisecond,
		AutoPartitions: &AutoPartitions{Min: 2, Max: 8, GrowAfter: 300 * time.Millisecond, ShrinkAfter: time.Second, Cooldown: 500 * time.Millisecond}}
	var stops []func()
	start := func(id string) {
		o := opts
		o.ID = id
		_, stop := runStoppable(t, c, o, h)
		stops = append(stops, stop)
	}
	start("k0")
	waitFor(t, 10*time.Second, "the topic", func() bool { _, err := c.Partitions(ctx, topic); return err == nil })
	if _, err := c.AddSchedule(ctx, topic, Schedule{Name: "tick", Spec: "@every 1s"}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	start("k1")
	start("k2")
	waitFor(t, 30*time.Second, "3 consumers growing the count to 4", countIs(c, topic, 4))
	start("k3")
	start("k4")
	waitFor(t, 30*time.Second, "5 consumers growing the count to 8", countIs(c, topic, 8))
	for _, stop := range stops[1:] {
		stop()
	}
	waitFor(t, 60*time.Second, "1 consumer shrinking the count to 2", countIs(c, topic, 2))
	ended := time.Now()
	// The occurrences up to the end of the changes, their retries done.
	waitFor(t, 10*time.Second, "the retries of the occurrences due before the end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for ms := range ids {
			if ms < ended.UnixMilli() && ok[ms] == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	var times []int64
	for ms := range ids {
		if ms >= began.UnixMilli() && ms < ended.UnixMilli() {
			times = append(times, ms)
		}
	}
	slices.Sort(times)
	if len(times) < 10 {
		t.Fatalf("%d occurrences between the first change and the last, want a dozen or more", len(times))
	}
	for i, ms := range times {
		if len(ids[ms]) != 1 || ok[ms] != 1 {
			t.Errorf("occurrence at %v: ids %v, %d successful deliveries; want one id and one success", time.UnixMilli(ms).UTC(), ids[ms], ok[ms])
		}
		if i > 0 && ms-times[i-1] != 1000 {
			t.Errorf("occurrences at %v and %v: one skipped", time.UnixMilli(times[i-1]).UTC(), time.UnixMilli(ms).UTC())
		}
	}
}

// countIs returns a condition for waitFor: topic's partition count is n,
// and no change runs.
func countIs(c *Client, topic string, n int) func() bool {
	return func() bool {
		info, err := c.Partitions(context.Background(), topic)
		return err == nil && info.Count == n && info.Next == 0
	}
}
