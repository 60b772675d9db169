package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// TestAutoStep checks the damping of the automatic count's script: a
// change begins only after a wish held at every check for its time, and
// the cooldown after the last change ended; a contrary check starts the
// wish again; a running change, or a count other than the one seen,
// clears it.
func TestAutoStep(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const topic, t0 = "auto", int64(1_800_000_000_000)
	if _, err := s.EnsureTopic(ctx, topic, 4, t0); err != nil {
		t.Fatal(err)
	}
	cooldown := int64(500)
	step := func(at int64, count, target int, wantBegun bool, wantSince int64) {
		t.Helper()
		begun, since, err := s.AutoStep(ctx, topic, AutoCheck{Count: count, Target: target, AfterMS: 1000, CooldownMS: cooldown, StepMS: 2000, NowMS: at})
		if err != nil || begun != wantBegun || since != wantSince {
			t.Fatalf("step at t0+%d (%d -> %d): begun %v since %d, %v; want begun %v since %d", at-t0, count, target, begun, since, err, wantBegun, wantSince)
		}
	}
	step(t0, 4, 8, false, t0)
	step(t0+500, 4, 8, false, t0)
	step(t0+600, 4, 0, false, 0)        // a check that wants nothing
	step(t0+700, 4, 8, false, t0+700)   // starts the wish again
	step(t0+1500, 4, 2, false, t0+1500) // another wish starts it again too
	step(t0+1600, 4, 8, false, t0+1600)
	step(t0+2600, 8, 16, false, 0) // a count other than stored
	step(t0+2700, 4, 8, false, t0+2700)
	step(t0+3700, 4, 8, true, t0+2700) // no change ended yet: no cooldown
	l, err := s.ReadLayout(ctx, topic)
	if err != nil || l.Count != 4 || l.Next != 8 || l.Since != t0+3700 {
		t.Fatalf("layout after the step: %+v, %v; want a change from 4 to 8 since t0+3700", l, err)
	}
	step(t0+3800, 4, 8, false, 0) // a change runs: no wish
	st, err := s.ReadAutoState(ctx, topic)
	if err != nil || st.Signal.Target != 0 {
		t.Fatalf("state while the change runs: %+v, %v", st, err)
	}
	// The change ends (every source marked) at t0+10000: the cooldown
	// counts from the first check after it.
	for p := range 4 {
		if _, err := s.MarkMoved(ctx, TopicPartition{Topic: topic, P: p}, l, t0+10000); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = s.ReadAutoState(ctx, topic); err != nil || st.Changed != t0+10000 {
		t.Fatalf("state after the change: %+v, %v; want changed at t0+10000", st, err)
	}
	cooldown = 2000
	step(t0+10100, 8, 16, false, t0+10100)
	step(t0+11100, 8, 16, false, t0+10100) // held long enough, but cooling down
	step(t0+12100, 8, 16, true, t0+10100)
}

// TestAutoStepClocks checks that the automatic count bounds each
// consumer's clock against the others': a consumer whose clock is 5
// minutes ahead or behind (its checks interleaved with those of one
// whose clock is right, every second here) neither begins a change at
// once (the wish, and the cooldown after a change, gain at most a step
// from each of its checks) nor holds one back for minutes.
func TestAutoStepClocks(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const t0, off = int64(1_800_000_000_000), int64(5 * 60 * 1000)
	// A wish must hold 10 s, a cooldown last 10 s; a check adds at most
	// 2 s to either: each must take from 8 s to 11 s of checks a second
	// apart, whatever the clock of one of them says.
	const after, cooldown, stepMS = int64(10_000), int64(10_000), int64(2_000)
	const low, high = 8, 11
	n := 0
	newTopic := func() string {
		n++
		topic := fmt.Sprint("clocks-", n)
		if _, err := s.EnsureTopic(ctx, topic, 4, t0); err != nil {
			t.Fatal(err)
		}
		return topic
	}
	check := func(topic string, at int64, cool int64) bool {
		t.Helper()
		l, err := s.ReadLayout(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		target := 0
		if !l.Changing() {
			target = l.Count * 2
		}
		begun, _, err := s.AutoStep(ctx, topic, AutoCheck{Count: l.Count, Target: target, AfterMS: after, CooldownMS: cool, StepMS: stepMS, NowMS: at})
		if err != nil {
			t.Fatal(err)
		}
		return begun
	}
	// run makes the checks of real time 0, 1, 2, ... seconds on, the
	// first by a consumer whose clock is skew ahead (negative: behind),
	// the others by one whose clock is right, and returns the second at
	// which a check began the change; -1 when none did within limit.
	run := func(topic string, skew int64, cool int64, limit int) int {
		for sec := 0; sec <= limit; sec++ {
			at := t0 + int64(sec)*1000
			if sec == 0 {
				at += skew
			}
			if check(topic, at, cool) {
				return sec
			}
		}
		return -1
	}
	for _, tc := range []struct {
		name string
		skew int64
	}{{"ahead", off}, {"behind", -off}, {"right", 0}} {
		t.Run("wish started by a clock "+tc.name, func(t *testing.T) {
			// Held from the first check on: 10 s, less at most a step
			// from the skewed clock, however far off it is.
			got := run(newTopic(), tc.skew, 0, 60)
			if got < low || got > high {
				t.Errorf("the change began %d s after the wish began, want %d to %d s", got, low, high)
			}
		})
		t.Run("change ended by a clock "+tc.name, func(t *testing.T) {
			topic := newTopic()
			if got := run(topic, 0, cooldown, 60); got < 0 {
				t.Fatal("no change began")
			}
			l, err := s.ReadLayout(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			// The change ends at real time 100 s, on the skewed clock;
			// the checks go on from 101 s on the right one.
			for _, p := range l.Sources() {
				if _, err := s.MarkMoved(ctx, TopicPartition{Topic: topic, P: p}, l, t0+100_000+tc.skew); err != nil {
					t.Fatal(err)
				}
			}
			began := -1
			for sec := 101; sec <= 200 && began < 0; sec++ {
				if check(topic, t0+int64(sec)*1000, cooldown) {
					began = sec - 101
				}
			}
			if began < low || began > high {
				t.Errorf("the next change began %d s after the checks resumed, want %d to %d s", began, low, high)
			}
		})
	}
	// Interleaved all along: a clock ahead checks between every two
	// checks of the right one; the change begins no sooner than the wish
	// held half its time, not at the first check of the clock ahead.
	t.Run("interleaved with a clock ahead", func(t *testing.T) {
		topic := newTopic()
		began := -1
		for sec := 0; sec <= 60 && began < 0; sec++ {
			at := t0 + int64(sec)*1000
			if check(topic, at, 0) || check(topic, at+500+off, 0) {
				began = sec
			}
		}
		if began < int(after/1000/3) {
			t.Errorf("the change began %d s after the wish began, want %d s at least", began, after/1000/3)
		}
	})
}

// While a topic's count is automatic, the scripts that begin and cancel
// a change by hand refuse (ErrAutoPartitions) and write nothing, whatever
// the caller read before; turned off, they work again.
func TestChangeRefusedWhileAuto(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const topic, t0 = "auto-refuse", int64(1_800_000_000_000)
	if _, err := s.EnsureTopic(ctx, topic, 4, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAuto(ctx, topic, Auto{Min: 2, Max: 8}, false); err != nil {
		t.Fatal(err)
	}
	layout := func(want Layout) {
		t.Helper()
		if l, err := s.ReadLayout(ctx, topic); err != nil || l.Count != want.Count || l.Next != want.Next {
			t.Fatalf("layout %+v, %v; want %d -> %d", l, err, want.Count, want.Next)
		}
	}
	if _, err := s.BeginChange(ctx, topic, 8, t0); !errors.Is(err, ErrAutoPartitions) || !strings.Contains(err.Error(), "--auto off") {
		t.Fatalf("begin a change by hand of an automatic count: %v; want ErrAutoPartitions naming --auto off", err)
	}
	layout(Layout{Count: 4})
	// The automatic count's own change, then a cancel by hand.
	step := func(at int64) (bool, error) {
		begun, _, err := s.AutoStep(ctx, topic, AutoCheck{Count: 4, Target: 8, StepMS: 1000, NowMS: at})
		return begun, err
	}
	if _, err := step(t0); err != nil {
		t.Fatal(err)
	}
	if begun, err := step(t0 + 1); err != nil || !begun {
		t.Fatalf("the automatic change: begun %v, %v", begun, err)
	}
	if _, err := s.CancelChange(ctx, topic, Layout{Count: 4, Next: 8}, t0+2); !errors.Is(err, ErrAutoPartitions) {
		t.Fatalf("cancel by hand of an automatic change: %v; want ErrAutoPartitions", err)
	}
	layout(Layout{Count: 4, Next: 8})
	if _, err := s.SetAuto(ctx, topic, Auto{}, false); err != nil {
		t.Fatal(err)
	}
	if l, err := s.CancelChange(ctx, topic, Layout{Count: 4, Next: 8}, t0+3); err != nil || !l.Reversed {
		t.Fatalf("cancel with the automatic count off: %+v, %v", l, err)
	}
	layout(Layout{Count: 8, Next: 4})
}
