package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// Bounds of TestAutoPartitionsFleet.
const (
	autoGrowBound  = 2 * time.Minute // from the 14 joins to 16 partitions, each owned
	autoShrinkWait = 15 * time.Second
)

// TestAutoPartitionsFleet runs a topic on an automatic count (min 4, max
// 64, the default grow_after and cooldown, shrink_after 15 s) through
// Twemproxy with the defaults: 2 subs, then 14 more: within 2 minutes
// the count is 16 and every sub owns a partition, reached in two
// doublings no closer than the cooldown; then 11 leave: the count halves
// to 8 once the 5 left have been at most half of it for shrink_after,
// and stays (5 are more than half of 8). Messages fall due all along:
// none lost, early or delivered twice. Their lateness is reported, not
// asserted: the test runs beside the other parallel scenarios, and a
// change moves messages as one by hand does, whose bounds
// TestRepartitionLive asserts running alone.
func TestAutoPartitionsFleet(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.auto"
	c := faultClient(t, addr, 4)
	l := newLedger()
	args := func(i int) []string {
		return handoverSubArgs(addr, topic, 4, fmt.Sprint("au-", i), "--concurrency", "8")
	}
	subs := []*sub{startSub(t, l, 0, args(0)...), startSub(t, l, 1, args(1)...)}
	waitOwners(t, c, topic, time.Now(), faultSettle, "2 subs owning 2 of 4 partitions each", func(o ownership) bool {
		return o.ownedExactlyBy(4, 2, 2, "au-0", "au-1")
	})
	mustCLI(t, "", "partitions", "--addr", addr, "--topic", topic, "--auto", "--min", "4", "--max", "64", "--shrink-after", autoShrinkWait.String())

	// Every change, as Partitions shows it (a change lasts 30 s at least).
	type change struct {
		from, to    int
		began, done time.Time
	}
	var mu sync.Mutex
	var changes []change
	wctx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for wctx.Err() == nil {
			info, err := c.Inspector().Partitions(wctx, topic)
			if err == nil {
				mu.Lock()
				n := len(changes)
				switch {
				case info.Next != 0 && (n == 0 || !changes[n-1].done.IsZero()):
					changes = append(changes, change{from: info.Count, to: info.Next, began: *info.Since})
				case info.Next == 0 && n > 0 && changes[n-1].done.IsZero():
					changes[n-1].done = time.Now()
				}
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		stopWatch()
		<-watched
	}()

	// The first messages fall due once the 14 subs have started: 14
	// processes starting at once on 2 cores are no change of the count.
	const n = 4000
	start := time.Now().Add(6 * time.Second)
	span := autoGrowBound + 30*time.Second // past the shrink's beginning
	sendSpread(t, l, addr, topic, 0, "au", n, start, span)

	joined := time.Now()
	var ids []string
	for i := range 16 {
		ids = append(ids, fmt.Sprint("au-", i))
		if i >= 2 {
			subs = append(subs, startSub(t, l, i, args(i)...))
		}
	}
	waitFor(t, time.Until(start), func() bool {
		u, err := c.Inspector().TopicUsage(context.Background(), topic)
		return err == nil && len(u.Consumers) == 16
	}, "16 subs live before the first due time")
	// The count is 16 (the change ended: while it runs, the subs own the
	// partitions of both counts) and each sub owns one.
	took := waitOwners(t, c, topic, joined, autoGrowBound, "16 partitions, one owned by each of 16 subs", func(o ownership) bool {
		info, err := c.Inspector().Partitions(context.Background(), topic)
		return err == nil && info.Count == 16 && info.Next == 0 && len(o.owner) == 16 && o.ownedExactlyBy(16, 1, 1, ids...)
	})
	t.Logf("16 partitions, one owned by each of 16 subs, %v after 14 joined", took.Round(time.Second))

	left := time.Now()
	stopAllSubs(t, subs[5:])
	subs = subs[:5]
	shrunk := waitOwners(t, c, topic, left, autoShrinkWait+2*time.Minute, "8 partitions, 1 or 2 owned by each of 5 subs", func(o ownership) bool {
		info, err := c.Inspector().Partitions(context.Background(), topic)
		return err == nil && info.Count == 8 && info.Next == 0 && len(o.owner) == 8 && o.ownedFairlyBy(8, ids[:5]...)
	})
	waitFor(t, faultDrain+span, func() bool { return len(l.missing()) == 0 }, "every message delivered")
	stopWatch()
	<-watched
	stopAllSubs(t, subs)

	mu.Lock()
	defer mu.Unlock()
	var desc []string
	for _, ch := range changes {
		desc = append(desc, fmt.Sprintf("%d->%d", ch.from, ch.to))
	}
	if got := fmt.Sprint(desc); got != "[4->8 8->16 16->8]" {
		t.Errorf("changes %s, want [4->8 8->16 16->8]", got)
	}
	for i := 1; i < len(changes); i++ {
		if gap := changes[i].began.Sub(changes[i-1].done); gap < 10*time.Second-time.Second { // the watch sees an end up to 100 ms late
			t.Errorf("change %d->%d began %v after the end of the one before, within the cooldown of 10s", changes[i].from, changes[i].to, gap)
		}
	}
	if len(changes) == 3 && changes[2].began.Sub(left) < autoShrinkWait {
		t.Errorf("the shrink began %v after 11 subs left, before shrink_after (%v)", changes[2].began.Sub(left), autoShrinkWait)
	}
	rep := checkFaultLedger(t, l, topic)
	if rep.duplicates > 0 {
		t.Errorf("%d duplicates", rep.duplicates)
	}
	p99, worst := l.firstLateness()
	testenv.Figure(t, "scenario=auto-partitions grow_4_16_s=%.1f shrink_16_8_s=%.1f changes=%d messages=%d lost=%d duplicates=%d lateness_ms p99=%.1f max=%.1f",
		took.Seconds(), shrunk.Seconds(), len(changes), rep.messages, rep.lost, rep.duplicates,
		float64(p99.Microseconds())/1000, float64(worst.Microseconds())/1000)
}

// TestAutoPartitionsPersonWins drives delayq partitions against an
// automatic count that one sub (the defaults: a check every 5 s, changes
// of 30 s at least) runs, min 2, max 8: with one consumer it halves 4 to
// 2. While that change runs, --set and --cancel are refused, exit 1,
// naming --auto off, and change nothing. After --auto off, --cancel
// brings the count back to 4, and --set 8 then takes it to 8: each
// count holds for three checks' worth, though the automatic count, were
// it on, would halve it within two.
func TestAutoPartitionsPersonWins(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.auto-person"
	c := faultClient(t, addr, 4)
	ctx := context.Background()
	base := []string{"--addr", addr, "--topic", topic}
	partitions := func(args ...string) result {
		return cli(t, "", append(append([]string{"partitions"}, base...), args...)...)
	}
	layout := func() (count, next int, cancelled bool) {
		info, err := c.Inspector().Partitions(ctx, topic)
		if err != nil {
			return -1, -1, false
		}
		return info.Count, info.Next, info.Cancelled
	}
	// holds fails unless the count is want, with no change, at every look
	// for 3 checks of the automatic count.
	holds := func(want int, what string) {
		t.Helper()
		for end := time.Now().Add(3 * delayq.AutoCheckEvery); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if count, next, _ := layout(); count != want || next != 0 {
				t.Fatalf("%s: %d partitions, changing to %d; want %d, as the person left them", what, count, next, want)
			}
		}
	}

	l := newLedger()
	s := startSub(t, l, 0, handoverSubArgs(addr, topic, 4, "ap-0")...)
	defer stopAllSubs(t, []*sub{s})
	waitFor(t, faultSettle, func() bool { count, _, _ := layout(); return count == 4 }, "the topic")
	mustCLI(t, "", append(append([]string{"partitions"}, base...), "--auto", "--min", "2", "--max", "8",
		"--grow-after", "1s", "--shrink-after", "1s", "--cooldown", "1s")...)
	waitFor(t, 4*delayq.AutoCheckEvery, func() bool { count, next, _ := layout(); return count == 4 && next == 2 },
		"the automatic count halving 4 to 2 for its one consumer")

	for _, args := range [][]string{{"--set", "8"}, {"--set", "4"}, {"--cancel"}} {
		r := partitions(args...)
		wantExit(t, r, 1, "automatic", "--auto off")
		if count, next, cancelled := layout(); count != 4 || next != 2 || cancelled {
			t.Fatalf("after a refused partitions %v: %d -> %d (cancelled %v); want the automatic change from 4 to 2 running", args, count, next, cancelled)
		}
	}

	mustCLI(t, "", append(append([]string{"partitions"}, base...), "--auto", "off")...)
	r := mustCLI(t, "", append(append([]string{"partitions"}, base...), "--cancel")...)
	if !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("--cancel with the automatic count off: %s", r)
	}
	waitFor(t, 3*time.Minute, func() bool { count, next, _ := layout(); return count == 4 && next == 0 }, "the cancelled change back at 4")
	holds(4, "after --cancel")

	mustCLI(t, "", append(append([]string{"partitions"}, base...), "--set", "8")...)
	waitFor(t, 3*time.Minute, func() bool { count, next, _ := layout(); return count == 8 && next == 0 }, "the count set, 8")
	holds(8, "after --set 8")
	if r := partitions(); r.code != 0 || strings.Contains(r.stdout, topic+": auto") {
		t.Errorf("partitions after --auto off: %s; want no automatic count", r)
	}
}
