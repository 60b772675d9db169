package poller

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// TestStartsABurstAhead: a loop holding more messages due at one
// instant than it starts within startLead starts them ahead of their
// due, by the time its starts take for them all (lead), a whole batch a
// turn once the first batch's lead came (not as each one's own lead
// comes), and hands them to the dispatcher only at their due. A delete
// of one started ahead is told its delivery started, and the wait until
// the next burst is not counted as a start's cost. Run against a real
// redis-server, on the test's own times: dispatchDue is given its now.
func TestStartsABurstAhead(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	const n = 2500
	due := e.enqueue(time.Now().Add(time.Hour), msgIDs("b", n)...)
	d := NewDispatcher(0, n, nil) // no workers: what is due stays queued
	t.Cleanup(d.Close)
	cfg := Config{
		Topic: loopTopic, Partition: 0, Token: 1, Store: e.st, Dispatch: d, Now: time.Now,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	const cost = 10 * time.Microsecond
	p := &part{cfg: &cfg, mine: map[string]*Msg{}, startCost: cost}
	for _, id := range msgIDs("b", n) {
		m := &Msg{ID: id, Token: 1, Due: due, Record: e.get(id).Record, part: p}
		p.mine[id] = m
		p.held.push(m)
	}
	lead := p.lead(p.held.peek())
	if want := startLead + n*cost; lead != want {
		t.Fatalf("lead of %d due together = %v, want %v", n, lead, want)
	}
	if at, _ := p.startAt(); !at.Equal(due.Add(-lead)) {
		t.Errorf("startAt = %v, want %v before the due", at, lead)
	}
	ctx := context.Background()
	turn := func(now time.Time, wantHeld, wantStarted, wantReady int) {
		t.Helper()
		p.dispatchDue(ctx, now)
		if p.held.len() != wantHeld || len(p.started) != wantStarted || len(d.ready) != wantReady {
			t.Fatalf("at %v before the due: %d held, %d started, %d handed over; want %d, %d, %d",
				due.Sub(now), p.held.len(), len(p.started), len(d.ready), wantHeld, wantStarted, wantReady)
		}
	}
	turn(due.Add(-lead-time.Millisecond), n, 0, 0) // before the lead: nothing starts
	turn(due.Add(-lead), n-startBatch, startBatch, 0)
	// The start measured its cost: pinned again, the next ones' own lead
	// is shorter and has not come, yet the burst goes on starting, a
	// batch a turn.
	p.startCost = cost
	if next, want := p.lead(p.held.peek()), startLead+(n-startBatch)*cost; next != want {
		t.Errorf("lead of the rest = %v, want %v", next, want)
	}
	if at, _ := p.startAt(); !at.IsZero() {
		t.Errorf("startAt during the burst = %v, want at once (the zero time)", at)
	}
	turn(due.Add(-lead), n-2*startBatch, 2*startBatch, 0)
	turn(due.Add(-lead), 0, n, 0)
	if p.lastStart.n != 0 {
		t.Errorf("the burst is over, yet the next start would count the wait before it as a cost (last start of %d)", p.lastStart.n)
	}
	if err := e.st.Delete(ctx, store.TopicPartition{Topic: loopTopic, P: 0}, "b7"); !errors.Is(err, store.ErrRunning) {
		t.Errorf("delete of a message started ahead = %v, want ErrRunning", err)
	}
	turn(due.Add(-time.Millisecond), 0, n, 0) // started, not yet due
	turn(due, 0, 0, n)
}
