package poller

import (
	"testing"
	"time"
)

// TestMovePassWaitsForStart: a pass of a change's moves does not run
// when a held message is to start before it would end (the last pass's
// length, at least passGuess); it waits for that start, for passWaitMax
// at most, and never for a start already past (held back).
func TestMovePassWaitsForStart(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	p := &part{startCost: startCostGuess}
	// lead is a lone held message's: startLead and one start.
	lead := startLead + startCostGuess
	hold := func(due time.Time) {
		p.held = waiting{}
		p.held.push(&Msg{ID: "m", Due: due})
	}
	check := func(what string, at time.Time, wantWait bool, wantAt time.Time) {
		t.Helper()
		got, wait := p.waitForStart(at)
		if wait != wantWait || (wait && !got.Equal(wantAt)) {
			t.Errorf("%s: waitForStart = %v, %v; want %v, %v", what, got, wait, wantAt, wantWait)
		}
	}

	check("nothing held", now, false, time.Time{})
	hold(now.Add(passGuess + lead + time.Millisecond))
	check("a start beyond passGuess", now, false, time.Time{})
	start := now.Add(20*time.Millisecond - lead)
	hold(now.Add(20 * time.Millisecond))
	check("a start within passGuess", now, true, start)

	p.mv.took = 200 * time.Millisecond
	hold(now.Add(150 * time.Millisecond))
	check("a start within the last pass's length", now, true, now.Add(150*time.Millisecond-lead))
	later := now.Add(passWaitMax - time.Millisecond) // the next start, still within the pass's length
	hold(later.Add(100 * time.Millisecond))
	check("still waiting", later, true, later.Add(100*time.Millisecond-lead))
	check("waited passWaitMax", now.Add(passWaitMax), false, time.Time{})

	p.mv = mover{}
	hold(now.Add(-time.Second))
	check("a start already past (held back)", now, false, time.Time{})
}
