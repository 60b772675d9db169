package store

import (
	"context"
	"errors"
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
	step := func(at int64, count, target int, wantBegun bool, wantSince int64) {
		t.Helper()
		begun, since, err := s.AutoStep(ctx, topic, count, target, 1000, 500, at)
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
	step(t0+3700, 4, 8, true, t0+2700)
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
	// counts from there.
	for p := range 4 {
		if _, err := s.MarkMoved(ctx, topic, p, l, t0+10000); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = s.ReadAutoState(ctx, topic); err != nil || st.Changed != t0+10000 {
		t.Fatalf("state after the change: %+v, %v; want changed at t0+10000", st, err)
	}
	step(t0+9000, 8, 16, false, t0+9000)
	step(t0+10200, 8, 16, false, t0+9000) // held long enough, but cooling down
	step(t0+10500, 8, 16, true, t0+9000)
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
		begun, _, err := s.AutoStep(ctx, topic, 4, 8, 0, 0, at)
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
