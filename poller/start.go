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

// startLead is how long before its due a held message starts in Redis:
// the round trip of its start is then over by its due (lateness is not
// the start's), and messages due within it start together. A write of
// the message in that last moment is told the delivery started.
const startLead = 5 * time.Millisecond

// startBatch caps the held messages one start script takes (store.StartMany):
// a partition holding tens of thousands due at one instant starts them a
// batch per turn of its loop, so that no script holds its server for
// long and the first batches run while the next start.
const startBatch = 1000

// dispatchDue hands every held message that is due to the dispatcher,
// once its delivery started in Redis: a message the claim started goes
// at once; the others, and those due within startLead, start together,
// up to startBatch in one script (startHeld), and those started go when
// due; the loop's next turn starts the rest.
func (p *part) dispatchDue(ctx context.Context, now time.Time) {
	var toStart []*Msg
	for len(p.held) > 0 && len(toStart) < startBatch {
		m := p.held.peek()
		if m.begun && !m.at().After(now) {
			heap.Pop(&p.held)
			p.cfg.Dispatch.ready <- m // never blocks: its capacity is the claim bound
			continue
		}
		if m.begun || m.at().After(now.Add(startLead)) {
			break
		}
		heap.Pop(&p.held)
		toStart = append(toStart, m)
	}
	if len(toStart) > 0 {
		p.startHeld(ctx, now, toStart)
	}
}

// startAt is when the loop next has a held message to start or to hand
// to the dispatcher (ok false: it holds none).
func (p *part) startAt() (at time.Time, ok bool) {
	if len(p.held) == 0 {
		return time.Time{}, false
	}
	m := p.held.peek()
	if m.begun {
		return m.at(), true
	}
	return m.at().Add(-startLead), true
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
		got, err = cfg.Store.StartMany(ctx, cfg.tp(), cfg.Token, ids, recs)
	}
	if err != nil {
		if err != errNotSteady {
			p.logErr("start deliveries", err)
		}
		retry := now.Add(startRetry)
		for _, m := range ms {
			m.start = retry
			heap.Push(&p.held, m)
		}
		return
	}
	var tomb []string
	var moves []store.Move
	for i, m := range ms {
		switch got[i] {
		case store.StartOK:
			m.begun = true
			if m.at().After(now) {
				heap.Push(&p.held, m) // started ahead of its due: handed over at it
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

// forget lets go of a held message that does not start: its claim slot
// and its slot of the topic's concurrency cap are freed.
func (p *part) forget(m *Msg) {
	delete(p.mine, m.ID)
	p.cfg.Dispatch.release(1)
	p.gateDone(m.slot, 1)
}
