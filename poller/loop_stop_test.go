package poller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/lease"
)

// TestLoopPauseHoldsBack: a pause (Config.Pause) that begins while the
// loop holds messages claimed ahead returns them to scheduled at their
// own due, with no attempt counted; while it lasts nothing is claimed or
// delivered, due or not. Once the pause ends (its change signalled) the
// loop claims and delivers every message at once.
func TestLoopPauseHoldsBack(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	held := msgIDs("held", 3)
	due := e.enqueue(time.Now().Add(600*time.Millisecond), held...)
	l := e.newLoop("c1", 1)
	l.cfg.PollInterval = time.Second
	sw := newPauseSwitch(false)
	l.cfg.Pause = sw.pause
	l.start()

	waitFor(t, time.Second, "the messages claimed ahead", func() bool { return e.inState(store.StateInFlight, held...) })
	sw.set(true)
	waitFor(t, time.Second, "the held messages back in scheduled", func() bool { return e.inState(store.StateScheduled, held...) })
	for _, id := range held {
		e.scheduledAt(id, due)
	}
	e.enqueue(time.Now(), "now")
	all := append(held[:len(held):len(held)], "now")
	holds(t, time.Until(due.Add(200*time.Millisecond)), "nothing claimed or delivered while paused", func() bool {
		return len(l.deliveries()) == 0 && e.inState(store.StateScheduled, all...)
	})

	resumed := time.Now()
	sw.set(false)
	waitFor(t, time.Second, "every message delivered once the pause ended", func() bool { return l.delivered(all...) })
	got := l.deliveries()
	for _, d := range got {
		if d.at.Sub(resumed) > 500*time.Millisecond || d.attempt != 1 {
			t.Errorf("%s: attempt %d started %v after the pause ended, want the first at once", d.id, d.attempt, d.at.Sub(resumed))
		}
	}
	if len(got) != len(all) {
		t.Errorf("%d deliveries of %d messages: %+v", len(got), len(all), got)
	}
}

// TestLoopExpired: when Config.Valid turns false, Run returns
// ErrExpired at its next turn and starts nothing more: the messages it
// claimed ahead are neither delivered nor returned, but left in flight
// for the partition's next owner.
func TestLoopExpired(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	e.enqueue(time.Now(), "now")
	held := msgIDs("held", 2)
	e.enqueue(time.Now().Add(500*time.Millisecond), held...)
	l := e.newLoop("c1", 1)
	l.cfg.PollInterval = time.Second
	l.start()

	waitFor(t, 2*time.Second, "the due message delivered and the others claimed ahead", func() bool {
		return l.delivered("now") && e.inState(store.StateInFlight, held...)
	})
	l.valid.Store(false)
	if err := l.wait(2 * time.Second); !errors.Is(err, ErrExpired) {
		t.Fatalf("Run returned %v once the lease could not be trusted, want ErrExpired", err)
	}
	if got := l.deliveries(); len(got) != 1 {
		t.Errorf("deliveries %+v, want the due message's alone", got)
	}
	if n := l.event(EventFenced); n != len(held) {
		t.Errorf("%d held messages counted dropped (fenced), want %d", n, len(held))
	}
	for _, id := range held {
		if f := e.get(id); f == nil || f.State != store.StateInFlight {
			t.Errorf("%s: %+v once the loop expired, want it left in flight", id, f)
		}
	}
}

// TestLoopRequeuesOverrun: a delivery that outlives its visibility
// deadline at a consumer that handed the partition over (stopped while
// its handler ran on, still a member) is returned to scheduled by the
// partition's next loop once the deadline passed, not before, as a
// redelivery (EventRedelivered, not a lost owner's recovery) with an
// attempt counted, and delivered again there; the overrunning handler's
// late ack then brings nothing back.
func TestLoopRequeuesOverrun(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	now := time.Now()
	// The giver stays a member, leaving, while its handler runs: the next
	// owner leaves its deliveries alone rather than recover them at once.
	if _, _, err := e.st.Heartbeat(context.Background(), lease.Beat{Topic: loopTopic, ID: "a", Leaving: true, NowMS: now.UnixMilli(), ExpiresMS: now.Add(time.Minute).UnixMilli(), GCMS: time.Minute.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	e.enqueue(now, "slow")
	short := func(l *testLoop) {
		l.cfg.PollInterval, l.cfg.Timeout, l.cfg.VisibilityMargin = 50*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}
	a := e.newLoop("a", 1)
	short(a)
	a.blocking()
	handedOver := make(chan struct{})
	a.cfg.Release = func() { close(handedOver) }
	a.start()

	waitFor(t, 2*time.Second, "the delivery at a started", func() bool { return a.delivered("slow") })
	f := e.get("slow")
	if f == nil || f.State != store.StateInFlight {
		t.Fatalf("slow: %+v while its handler runs, want in flight", f)
	}
	deadline := time.UnixMilli(f.Score)
	a.stopNow()
	waitFor(t, 2*time.Second, "a handed the partition over", func() bool { return isClosed(handedOver) })
	if a.returned() {
		t.Fatal("a's Run returned while its handler still ran")
	}

	b := e.newLoop("b", 2)
	short(b)
	b.start()
	waitFor(t, 3*time.Second, "the overrunning message delivered again at b", func() bool { return b.delivered("slow") })
	d := b.deliveries()[0]
	if d.at.Before(deadline) {
		t.Errorf("delivered again at b %v before the visibility deadline", deadline.Sub(d.at))
	}
	if d.attempt != 2 || !strings.Contains(d.lastErr, "visibility deadline passed") {
		t.Errorf("delivery at b: attempt %d, last error %q; want attempt 2 after the deadline passed", d.attempt, d.lastErr)
	}
	if r, rec := b.event(EventRedelivered), b.event(EventRecovered); r != 1 || rec != 0 {
		t.Errorf("b counted %d redelivered, %d recovered; want 1, 0", r, rec)
	}
	waitFor(t, time.Second, "b's delivery acked", func() bool { return e.get("slow") == nil })

	a.release()
	if err := a.wait(2 * time.Second); err != nil {
		t.Errorf("a's Run returned %v after its handler finished, want nil", err)
	}
	if f := e.get("slow"); f != nil {
		t.Errorf("slow: %+v after a's late ack, want it gone", f)
	}
	if n := len(a.deliveries()) + len(b.deliveries()); n != 2 {
		t.Errorf("%d deliveries, want 2", n)
	}
}

// TestLoopStop: closing stop returns the messages the loop holds to
// scheduled at once, at their own due and with no attempt counted,
// marks the partition handed over and calls Release, and only then
// waits for the running handler: Run returns nil once it finished, and
// its ack is written.
func TestLoopStop(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	e.enqueue(time.Now(), "run")
	held := msgIDs("held", 3)
	due := e.enqueue(time.Now().Add(time.Second), held...)
	l := e.newLoop("c1", 1)
	l.cfg.PollInterval = 2 * time.Second
	l.blocking()
	handedOver := make(chan struct{})
	l.cfg.Release = func() { close(handedOver) }
	l.start()

	waitFor(t, 2*time.Second, "the due message running, the others claimed ahead", func() bool {
		return l.delivered("run") && e.inState(store.StateInFlight, held...)
	})
	l.stopNow()
	waitFor(t, time.Second, "the partition handed over", func() bool { return isClosed(handedOver) })
	for _, id := range held {
		e.scheduledAt(id, due)
	}
	holds(t, 100*time.Millisecond, "Run waiting for the running handler", func() bool { return !l.returned() })

	l.release()
	if err := l.wait(2 * time.Second); err != nil {
		t.Errorf("Run returned %v after a stop, want nil", err)
	}
	if f := e.get("run"); f != nil {
		t.Errorf("run: %+v after its handler finished, want it acked", f)
	}
	if got := l.deliveries(); len(got) != 1 {
		t.Errorf("deliveries %+v, want the running message's alone", got)
	}
	take, err := e.st.TakeOver(context.Background(), store.TopicPartition{Topic: loopTopic, P: 0}, 2)
	if err != nil || !take.Graceful || !slices.Equal(take.Givers, []string{"c1"}) {
		t.Errorf("the next takeover: %+v, %v; want a graceful one from c1", take, err)
	}
}

// TestLoopUnsteadyLeaseHolds: while Config.Steady is false (the lease's
// extension failed), the loop claims nothing and starts nothing it
// holds; once it is true again, everything is delivered, held messages
// at once.
func TestLoopUnsteadyLeaseHolds(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	held := msgIDs("held", 3)
	due := e.enqueue(time.Now().Add(600*time.Millisecond), held...)
	l := e.newLoop("c1", 1)
	l.cfg.PollInterval = time.Second
	var steady atomic.Bool
	steady.Store(true)
	l.cfg.Steady = steady.Load
	l.start()

	waitFor(t, time.Second, "the messages claimed ahead", func() bool { return e.inState(store.StateInFlight, held...) })
	steady.Store(false)
	later := e.enqueue(time.Now(), "later")
	holds(t, time.Until(due.Add(300*time.Millisecond)), "nothing started, nothing more claimed", func() bool {
		return len(l.deliveries()) == 0 && e.inState(store.StateScheduled, "later")
	})
	back := time.Now()
	steady.Store(true)
	all := append(held[:len(held):len(held)], "later")
	waitFor(t, 2*time.Second, "every message delivered once the lease is steady", func() bool { return l.delivered(all...) })
	for _, d := range l.deliveries() {
		if d.at.Before(later) || d.attempt != 1 {
			t.Errorf("%s: attempt %d at %v, want the first, after its due", d.id, d.attempt, d.at)
		}
		if d.at.Sub(back) > 500*time.Millisecond {
			t.Errorf("%s started %v after the lease was steady again, want within the loop's retry", d.id, d.at.Sub(back))
		}
	}
}
