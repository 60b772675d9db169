package poller

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// startRetry is how long a loop whose start of held messages failed
// waits before it tries again.
const startRetry = 100 * time.Millisecond

// startLead is how long before its due a held message starts in Redis
// at the least: the round trip of its start is then over by its due
// (lateness is not the start's), and messages due within it start
// together. A write of the message in that last moment is told the
// delivery started.
const startLead = 5 * time.Millisecond

// maxStartAhead caps how far ahead of its due a held message starts
// (see part.lead).
const maxStartAhead = 5 * time.Second

// startCostGuess is what a loop takes a start to cost per message until
// it measured one (see part.startCost), for each of the loops of its
// consumer: they start theirs at the same time, sharing the process and
// the servers.
const startCostGuess = 6 * time.Microsecond

// startCostBatch is the fewest messages of a start whose length per
// message goes into part.startCost: in smaller ones the round trip
// outweighs the messages.
const startCostBatch = 100

// startBatch caps the held messages one start script takes (store.StartMany):
// a partition holding tens of thousands due at one instant starts them a
// batch per turn of its loop, so that no script holds its server for
// long and the first batches run while the next start.
const startBatch = 1000

// lead is how long before m may start the loop starts it in Redis:
// startLead, and the time the loop's starts take for the held messages
// due with it (waiting.together), at most maxStartAhead. A loop holding
// a million due at one instant starts them over the seconds before, and
// hands each to the dispatcher at its due, where starting them only
// once due would make the last one seconds late. A write of a message
// started ahead is told its delivery started, as after any start.
func (p *part) lead(m *Msg) time.Duration {
	cost := p.startCost
	if cost == 0 {
		cost = startCostGuess * time.Duration(max(1, p.cfg.Dispatch.loops.Load()))
	}
	return startLead + min(maxStartAhead, time.Duration(p.held.together(m))*cost)
}

// dispatchDue hands every held message that is due to the dispatcher,
// once its delivery started in Redis: one started already (in its claim,
// or ahead of its due) goes at once; the others start when their lead
// comes (see lead), up to startBatch in one script (startHeld), and go
// when due; the loop's next turn starts the rest. Once the lead of the
// first comes, the loop starts every message due with it (startThrough)
// a whole batch a turn, not as each one's lead comes: a batch's round
// trip is paid once.
func (p *part) dispatchDue(ctx context.Context, now time.Time) {
	for len(p.started) > 0 && !p.started.peek().at().After(now) {
		p.cfg.Dispatch.ready <- heap.Pop(&p.started).(*Msg) // never blocks: its capacity is the claim bound
	}
	if p.held.len() == 0 {
		return
	}
	if m := p.held.peek(); !p.heldStart(m).After(now) {
		p.startThrough = maxTime(p.startThrough, m.at())
	}
	var toStart []*Msg
	for p.held.len() > 0 && len(toStart) < startBatch {
		if at := p.held.peek().at(); at.After(now.Add(startLead)) && at.After(p.startThrough) {
			break
		}
		toStart = append(toStart, p.held.pop())
	}
	if len(toStart) == 0 {
		return
	}
	p.startHeld(ctx, now, toStart)
	if p.held.len() == 0 || p.held.peek().at().After(p.startThrough) {
		p.lastStart.n = 0 // the burst is over: the next start's wait is no start's cost
	}
}

// startAt is when the loop next has a held message to start or to hand
// to the dispatcher (ok false: it holds none): the zero time while it
// has some to start at once.
func (p *part) startAt() (at time.Time, ok bool) {
	if len(p.started) > 0 {
		at, ok = p.started.peek().at(), true
	}
	if p.held.len() > 0 {
		if s := p.heldStart(p.held.peek()); !ok || s.Before(at) {
			at, ok = s, true
		}
	}
	return at, ok
}

// heldStart is when m, the first of the held messages, starts: its lead
// before it may start, or at once (the zero time) when it is due with
// the burst the loop is starting (startThrough).
func (p *part) heldStart(m *Msg) time.Time {
	if !m.at().After(p.startThrough) {
		return time.Time{}
	}
	return m.at().Add(-p.lead(m))
}

// errNotSteady holds messages back while the lease is not steady (see
// Config.Steady).
var errNotSteady = errors.New("poller: the lease's extension failed")

// startHeld starts the deliveries of messages the loop held until due
// (store.StartMany) and hands those that started to the dispatcher. A
// message deleted meanwhile is dropped, and one whose record a send or a
// reschedule rewrote goes back to scheduled at the new record's due: the
// version the loop claimed never starts. When the start fails, the
// messages are held again and tried again after startRetry (a start
// whose reply was lost is recognised as the loop's own). So are they
// while the lease is not steady.
func (p *part) startHeld(ctx context.Context, now time.Time, ms []*Msg) {
	cfg := p.cfg
	ids := make([]string, len(ms))
	recs := make([]*store.Record, len(ms))
	for i, m := range ms {
		ids[i], recs[i] = m.ID, m.Record
	}
	var got []int64
	err := errNotSteady
	if p.steady() {
		began := time.Now()
		got, err = cfg.Store.StartMany(ctx, cfg.tp(), cfg.Token, ids, recs)
		if err == nil {
			p.measureStart(began, len(ids))
		}
	}
	if err != nil {
		if err != errNotSteady {
			p.logErr("start deliveries", err)
		}
		retry := now.Add(startRetry)
		for _, m := range ms {
			m.start = retry
			p.held.push(m)
		}
		return
	}
	var tomb []string
	var moves []store.Move
	for i, m := range ms {
		switch got[i] {
		case store.StartOK:
			if m.at().After(now) {
				heap.Push(&p.started, m) // started ahead of its due: handed over at it
			} else {
				cfg.Dispatch.ready <- m
			}
			continue
		case store.StartGone:
			tomb = append(tomb, m.ID)
		default:
			moves = append(moves, store.Move{ID: m.ID, Score: got[i]})
		}
		p.forget(m)
	}
	if len(tomb) > 0 {
		p.count(EventTombstone, len(tomb))
		if err := cfg.Store.Drop(ctx, cfg.tp(), tomb); err != nil {
			p.logErr("drop tombstones", err) // found again at their deadline
		}
	}
	if len(moves) > 0 {
		p.count(EventSuperseded, len(moves))
		if _, err := p.writeMoves(ctx, moves); err != nil {
			// Still in flight: returned, without an attempt, at the
			// deadline (see requeueExpired).
			p.logErr("return messages replaced or rescheduled before their start", err)
		}
	}
}

// measureStart adds what the start of n messages that began at began
// took per message to the loop's estimate, part.startCost: a moving
// average that follows the load the loop's starts meet. When the last
// start was a whole batch (more were waiting), the time from its
// beginning to this one's counts, the rest of the loop's turn included:
// how fast the loop gets through a backlog, sharing the process and the
// servers with the other loops.
func (p *part) measureStart(began time.Time, n int) {
	per := time.Since(began) / time.Duration(max(n, 1))
	if last := p.lastStart; last.n == startBatch {
		per = max(per, began.Sub(last.at)/startBatch)
	}
	p.lastStart.at, p.lastStart.n = began, n
	if n < startCostBatch {
		return
	}
	if p.startCost == 0 {
		p.startCost = per
		return
	}
	p.startCost = (3*p.startCost + per) / 4
}

// forget lets go of a held message that does not start: its claim slot
// and its slot of the topic's concurrency cap are freed.
func (p *part) forget(m *Msg) {
	delete(p.mine, m.ID)
	p.cfg.Dispatch.release(1)
	p.gateDone(m.slot, 1)
}
