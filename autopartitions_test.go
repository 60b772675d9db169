package delayq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

func TestAutoTarget(t *testing.T) {
	d := AutoPartitions{Min: 4, Max: 64}.withDefaults()
	with := func(lo, hi int) AutoPartitions { return AutoPartitions{Min: lo, Max: hi}.withDefaults() }
	grow, shrink := DefaultAutoGrowAfter, DefaultAutoShrinkAfter
	for _, tc := range []struct {
		name              string
		a                 AutoPartitions
		count, live, want int
		after             time.Duration
	}{
		{"within the count, not far below it", d, 4, 3, 0, 0},
		{"one each", d, 4, 4, 0, 0},
		{"more consumers than partitions", d, 4, 5, 8, grow},
		{"doubling, one step at a time", d, 8, 16, 16, grow},
		{"at max", d, 64, 100, 0, 0},
		{"a quarter", d, 16, 4, 8, shrink},
		{"half: each still owns one after the shrink", d, 16, 8, 8, shrink},
		{"more than half", d, 16, 9, 0, 0},
		{"down to min", d, 8, 2, 4, shrink},
		{"at min", d, 4, 0, 0, 0},
		{"below min", d, 2, 1, 4, grow},
		{"below min, to it in one change", with(16, 64), 2, 1, 16, grow},
		{"below min, not a multiple of it", with(4, 6), 3, 1, 6, grow},
		{"even, above max", d, 128, 200, 64, shrink},
		{"even, above max, into it in one change", d, 256, 1, 64, shrink},
		{"even, above max, not a power of two", d, 96, 1, 48, shrink},
		{"odd above max", with(1, 8), 9, 1, 3, shrink},
		{"odd above max, prime", with(1, 8), 13, 20, 1, shrink},
		{"odd within the bounds, halving impossible", with(1, 64), 9, 3, 3, shrink},
		{"odd within the bounds, no divisor keeps one each", with(1, 64), 15, 6, 0, 0},
		{"below min, doubling passes max: down to a divisor with a multiple in range", with(5, 7), 4, 1, 2, shrink},
		{"... then into range", with(5, 7), 2, 1, 6, grow},
		{"below min, no divisor has a multiple in range but 3", with(11, 13), 9, 0, 3, shrink},
		{"below min, prime: down to 1", with(11, 13), 7, 0, 1, shrink},
		{"below min past the ceiling: as far as the ceiling", with(256, 512), 16, 1, 64, grow},
		{"below min at the ceiling: waits for consumers", with(256, 512), 64, 1, 0, 0},
		{"below min, more consumers raise the ceiling", with(256, 512), 64, 8, 256, grow},
		{"below a min past the default ceiling, no consumer", with(128, 128), 16, 0, 64, grow},
		{"grow within max, not past the ceiling", with(1, 4096), 2048, 4000, 4096, grow},
		{"no multiple within max", with(1, 64), 48, 60, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, after := autoTarget(tc.a, tc.count, tc.live)
			if got != tc.want || after != tc.after {
				t.Errorf("autoTarget(%s, %d partitions, %d live) = %d after %v, want %d after %v", tc.a, tc.count, tc.live, got, after, tc.want, tc.after)
			}
		})
	}
}

// A surge of consumers (a rolling deploy starting the new ones before
// stopping the old) doubles the count; once the fleet is back to its
// size, the count comes back too, and stays.
func TestAutoTargetSurge(t *testing.T) {
	a := AutoPartitions{Min: 1, Max: 64}.withDefaults()
	count := 8
	for _, step := range []struct{ live, want int }{{8, 8}, {16, 16}, {8, 8}, {8, 8}, {5, 8}} {
		if to, _ := autoTarget(a, count, step.live); to != 0 {
			count = to
		}
		if count != step.want {
			t.Fatalf("%d live consumers: %d partitions, want %d", step.live, count, step.want)
		}
	}
}

// For every count and fleet, under bounds of every shape, the automatic
// count wants only counts a change can reach (a multiple or a divisor),
// never grows past the ceiling, never wants a change back, and reaches a
// count it keeps within a few changes: within Min and Max, or below Min
// only where the ceiling holds it.
func TestAutoTargetConverges(t *testing.T) {
	bounds := []AutoPartitions{{Min: 1, Max: 64}, {Min: 4, Max: 64}, {Min: 5, Max: 7}, {Min: 11, Max: 13},
		{Min: 3, Max: 3}, {Min: 256, Max: 512}, {Min: 100, Max: 4096}, {Min: 1, Max: 1}}
	for _, a := range bounds {
		a = a.withDefaults()
		for start := 1; start <= 300; start++ {
			for _, live := range []int{0, 1, 2, 3, 5, 8, 9, 16, 33, 100} {
				count, seen := start, map[int]bool{start: true}
				for steps := 0; ; steps++ {
					to, _ := autoTarget(a, count, live)
					if to == 0 {
						break
					}
					switch {
					case to == count:
						t.Fatalf("%s, %d live, %d partitions: wants %d, the count it has", a, live, count, to)
					case to%count != 0 && count%to != 0:
						t.Fatalf("%s, %d live, %d partitions: wants %d, neither a multiple nor a divisor", a, live, count, to)
					case to > count && to > PartitionsCeiling(live):
						t.Fatalf("%s, %d live, %d partitions: grows to %d, past the ceiling %d", a, live, count, to, PartitionsCeiling(live))
					case seen[to]:
						t.Fatalf("%s, %d live, from %d partitions: comes back to %d", a, live, start, to)
					case steps > 8:
						t.Fatalf("%s, %d live, from %d partitions: still changing after %d changes", a, live, start, steps)
					}
					seen[to], count = true, to
				}
				if count > a.Max || count < a.Min && count*2 <= min(a.Max, PartitionsCeiling(live)) {
					t.Errorf("%s, %d live, from %d partitions: keeps %d", a, live, start, count)
				}
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
		moveSettle: 2 * time.Second, autoCheck: 100 * time.Millisecond}
	auto := &AutoPartitions{Min: 2, Max: 8, GrowAfter: 500 * time.Millisecond, ShrinkAfter: time.Second, Cooldown: time.Second}
	start := func(id string) (*Consumer, func()) {
		if _, err := c.Admin().ProposeTopic(ctx, TopicConfig{Topic: topic, AutoPartitions: auto}); err != nil {
			t.Fatal(err)
		}
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
			if info, err := c.Inspector().Partitions(watchCtx, topic); err == nil {
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
	if _, err := c.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "3 consumers growing the count to 4", countIs(c, topic, 4))
	for i := 3; i < 5; i++ {
		_, stop := start(fmt.Sprint("k", i))
		stops = append(stops, stop)
	}
	waitFor(t, 30*time.Second, "5 consumers growing the count to 8", countIs(c, topic, 8))
	info, err := c.Inspector().Partitions(ctx, topic)
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
		Backoff: []time.Duration{1500 * time.Millisecond}, moveSettle: 2 * time.Second, autoCheck: 100 * time.Millisecond}
	auto := &AutoPartitions{Min: 2, Max: 8, GrowAfter: 300 * time.Millisecond, ShrinkAfter: time.Second, Cooldown: 500 * time.Millisecond}
	var stops []func()
	start := func(id string) {
		if _, err := c.Admin().ProposeTopic(ctx, TopicConfig{Topic: topic, AutoPartitions: auto}); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.ID = id
		_, stop := runStoppable(t, c, o, h)
		stops = append(stops, stop)
	}
	start("k0")
	waitFor(t, 10*time.Second, "the topic", func() bool { _, err := c.Inspector().Partitions(ctx, topic); return err == nil })
	if _, err := c.Admin().AddSchedule(ctx, topic, Schedule{Name: "tick", Spec: "@every 1s"}); err != nil {
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
		info, err := c.Inspector().Partitions(context.Background(), topic)
		return err == nil && info.Count == n && info.Next == 0
	}
}

// A person's count wins over the automatic one: on an automatic topic,
// SetPartitions and CancelPartitions are refused with ErrAutoPartitions,
// naming --auto off, and change nothing; once the person turns it off,
// the count they set (or the cancel they asked for) holds, though the
// consumers that would have the automatic count change it keep running,
// and a consumer that starts with the automatic count in its options
// does not turn it back on.
func TestAutoPartitionsPersonWins(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 4})
	const topic = "auto-person"
	opts := ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: 2 * time.Second,
		moveSettle: 3 * time.Second, autoCheck: 100 * time.Millisecond} // a change lasts 3 s: time to cancel it
	auto := &AutoPartitions{Min: 2, Max: 8, GrowAfter: 300 * time.Millisecond, ShrinkAfter: 300 * time.Millisecond, Cooldown: 300 * time.Millisecond}
	nop := func(context.Context, *Delivery) error { return nil }
	start := func(id string) {
		if _, err := c.Admin().ProposeTopic(ctx, TopicConfig{Topic: topic, AutoPartitions: auto}); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.ID = id
		runStoppable(t, c, o, nop)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrAutoPartitions) || !strings.Contains(err.Error(), "--auto off") {
			t.Fatalf("%s on an automatic topic: %v; want ErrAutoPartitions naming --auto off", what, err)
		}
	}
	// holds fails unless cond holds at every look for d: many times the
	// automatic count's checks and its grow_after and shrink_after.
	holds := func(d time.Duration, what string, cond func(*PartitionsInfo) bool) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			info, err := c.Inspector().Partitions(ctx, topic)
			if err != nil || !cond(info) {
				t.Fatalf("%s: %+v, %v", what, info, err)
			}
		}
	}

	// One consumer: the automatic count shrinks 4 to 2 (its min).
	start("k0")
	waitFor(t, 30*time.Second, "one consumer shrinking the count to 2", countIs(c, topic, 2))
	_, err := c.Admin().SetPartitions(ctx, topic, 4, PartitionsOptions{})
	refused("SetPartitions", err)
	_, err = c.Admin().CancelPartitions(ctx, topic)
	refused("CancelPartitions with no change", err)
	holds(time.Second, "the count after a refused set", func(i *PartitionsInfo) bool { return i.Count == 2 && i.Next == 0 })

	// Three: it grows 2 to 4; a cancel of that change is refused, and
	// the change goes on.
	start("k1")
	start("k2")
	waitFor(t, 30*time.Second, "three consumers growing the count", func() bool {
		info, err := c.Inspector().Partitions(ctx, topic)
		return err == nil && info.Count == 2 && info.Next == 4
	})
	info, err := c.Admin().CancelPartitions(ctx, topic)
	refused("CancelPartitions of an automatic change", err)
	if info != nil {
		t.Errorf("a refused cancel returned %+v", info)
	}
	if info, err = c.Inspector().Partitions(ctx, topic); err != nil || info.Next != 4 || info.Cancelled {
		t.Fatalf("after a refused cancel: %+v, %v; want the change to 4 running, not cancelled", info, err)
	}

	// Turned off, the person's cancel works, and the count stays 2
	// though three consumers are more than 2 partitions.
	if err := c.Admin().SetAutoPartitions(ctx, topic, nil); err != nil {
		t.Fatal(err)
	}
	if info, err = c.Admin().CancelPartitions(ctx, topic); err != nil || !info.Cancelled {
		t.Fatalf("cancel with the automatic count off: %+v, %v", info, err)
	}
	waitFor(t, 30*time.Second, "the cancelled change back at 2", countIs(c, topic, 2))
	holds(3*time.Second, "2 partitions, as the person's cancel left them, with 3 consumers", func(i *PartitionsInfo) bool {
		return i.Count == 2 && i.Next == 0 && i.Auto == nil
	})

	// The person's count: 8 holds with 3 consumers (the automatic count
	// would halve it), and a consumer starting with the automatic count
	// in its options leaves it off.
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	start("k3")
	waitFor(t, 30*time.Second, "the count set by hand, 8", countIs(c, topic, 8))
	holds(3*time.Second, "8 partitions, as the person set them, with 4 consumers", func(i *PartitionsInfo) bool {
		return i.Count == 8 && i.Next == 0 && i.Auto == nil
	})
}
