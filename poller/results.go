package poller

import (
	"context"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// Outcomes are coalesced: a result waits up to ackLinger for others of the
// same partition while more of its deliveries are running, so that one
// write settles many messages and frees their slots together.
const ackLinger = time.Millisecond

// claimLinger is how long a loop whose claim was cut short by the
// dispatcher's bound waits for more slots to come back (unless a batch's
// worth is free already, or a handler would idle: see Dispatcher.thin),
// so that freed slots are claimed in batches rather than one round trip
// per message. Under a burst at the defaults slots come back at about
// 100 a ms: a quarter of the bound (see Dispatcher.lowWater) within 3 ms.
const claimLinger = 3 * time.Millisecond

// OutcomeStore is what writing outcomes needs from storage: the acks
// (apply), the moves back to scheduled or to dead (writeMoves: apply's
// retries, deaths and returns, and every other message the loop sends
// back), and the drops of tombstones' in-flight entries (poll,
// requeueExpired, writeRecovered).
type OutcomeStore interface {
	Ack(ctx context.Context, tp store.TopicPartition, acks []store.Acked, nowMS int64) (kept int, err error)
	Moves(ctx context.Context, tp store.TopicPartition, moves []store.Move) (gone int, err error)
	Drop(ctx context.Context, tp store.TopicPartition, ids []string) error
}

// collect takes r and every other result already waiting, and applies them
// unless they should linger.
func (p *part) collect(ctx context.Context, r result) {
	p.add(r)
	for more := true; more; {
		select {
		case r := <-p.results:
			p.add(r)
		default:
			more = false
		}
	}
	p.applyPending(ctx)
}

func (p *part) add(r result) {
	if len(p.pending) == 0 {
		p.since = p.cfg.Now()
	}
	p.pending = append(p.pending, r)
}

// applyPending writes the pending outcomes once the linger is over: when
// a batch's worth is pending, no other delivery of the partition is
// running, the oldest waited ackLinger, or the loop is stopping.
func (p *part) applyPending(ctx context.Context) {
	if len(p.pending) == 0 {
		return
	}
	running := len(p.mine) - p.held.len() - len(p.started) - len(p.pending)
	if running > 0 && len(p.pending) < p.cfg.Dispatch.lowWater(p.cfg.ClaimBatch) &&
		p.cfg.Now().Sub(p.since) < ackLinger && !p.stopping.Load() {
		return
	}
	p.apply(ctx, !p.valid())
}

// apply writes the outcomes of finished deliveries: acks in one batch,
// retries, deaths and returns in another. When a write fails the results
// stay pending and are tried again on the next turn of the loop. Under a
// lost lease (lost) only acks are written: everything else stays in flight
// for the next owner to return at takeover, since writing to the
// scheduled set now could race with that owner.
func (p *part) apply(ctx context.Context, lost bool) {
	if len(p.pending) == 0 {
		return
	}
	p.since = time.Time{}
	cfg := p.cfg
	now := cfg.Now()
	// Nearly all results are acks: their lists are sized for all at once.
	acks := make([]store.Acked, 0, len(p.pending))
	acked := make([]result, 0, len(p.pending))
	var moves []store.Move
	var done []result // results needing no write
	var movedRes []result
	retried, dead := 0, 0
	for _, r := range p.pending {
		m := r.msg
		switch {
		case r.outcome == Acked:
			r.settled = SettledAck
			acks = append(acks, ackOf(r))
			acked = append(acked, r)
		case lost:
			if r.outcome == Dropped {
				p.count(EventFenced, 1)
			}
			r.settled = SettledLeft
			done = append(done, r)
		case r.outcome == Returned || r.outcome == Dropped:
			// Dropped under a lease still trusted here: a worker saw it
			// lapse, or released at a handover; it did not start.
			// Its running mark, if its delivery began in Redis, goes
			// with the move: it did not run.
			moves = append(moves, store.Move{ID: m.ID, Score: m.Due.UnixMilli()})
			movedRes = append(movedRes, r)
		default: // Failed
			mv := p.failMove(m.ID, m.Record, now, r.err.Error())
			if mv.Dead {
				dead++
				r.settled = SettledDead
			} else {
				retried++
				r.settled = SettledRetry
			}
			moves = append(moves, mv)
			movedRes = append(movedRes, r)
		}
	}
	p.pending = p.pending[:0]
	p.finish(done)
	if len(acks) > 0 {
		if kept, err := cfg.Store.Ack(ctx, cfg.tp(), acks, clock.CeilMS(now).UnixMilli()); err != nil { // a window never ends early
			p.logErr("ack", err)
			p.pending = append(p.pending, acked...)
		} else {
			p.count(EventAcked, len(acks))
			p.count(EventSuperseded, kept)
			if kept > 0 {
				p.nextPoll = now // the newer sends are scheduled: look for them
			}
			p.finish(acked)
		}
	}
	if len(moves) > 0 {
		if gone, err := p.writeMoves(ctx, moves); err != nil {
			p.logErr("retry", err)
			p.pending = append(p.pending, movedRes...)
		} else {
			p.count(EventTombstone, gone)
			p.count(EventRetried, retried)
			p.count(EventDead, dead)
			p.finish(movedRes)
		}
	}
}

// finish forgets messages whose outcome is settled and frees their slots
// (but those of messages taken back from the dispatcher's queue, which
// the worker that dequeues them frees).
func (p *part) finish(rs []result) {
	n, slots := 0, 0
	for _, r := range rs {
		r.settle(r.settled)
		delete(p.mine, r.msg.ID)
		if !r.msg.revoked {
			n++
		}
		if r.msg.slot {
			slots++
		}
	}
	p.cfg.Dispatch.release(n)
	p.gateDone(true, slots)
}

// exit ends the loop: see Run.
//
// On a graceful stop, what the loop held (claimed ahead, or due and still
// queued for a worker) goes back to scheduled at once, the partition is
// marked as handed over and released (handOver), and only then does the
// loop wait for its running handlers, whose outcomes it still writes:
// the next owner leaves their messages alone. On a lost lease the held
// messages are dropped (the next owner returns them from in flight),
// running handlers are cancelled, and only acks are written.
func (p *part) exit(ctx context.Context, runErr error) error {
	cfg := p.cfg
	lost := runErr != nil || !p.valid()
	p.stopping.Store(true)
	// The last writes run under the lease's context's values but not its
	// end (it may be done already), each with a timeout of its own: they
	// come as running handlers finish, however long after the stop.
	bg := context.WithoutCancel(ctx)
	write := func(f func(ctx context.Context)) {
		wctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		f(wctx)
	}
	outcome := Returned // held messages go back to scheduled at once...
	if lost {
		outcome = Dropped // ...unless the partition may have a new owner
	}
	// Due messages still queued for a worker, behind running handlers,
	// are taken back rather than left to wait for one: here, or by a
	// worker that saw stopping first.
	p.takeBack(outcome, true)
	write(func(ctx context.Context) { p.apply(ctx, lost) })
	if !lost {
		write(p.handOver)
	}
	for len(p.mine) > len(p.pending) {
		select {
		case r := <-p.results:
			p.pending = append(p.pending, r)
			write(func(ctx context.Context) { p.apply(ctx, lost) })
		case <-cfg.Abandon:
			cfg.Logger.Warn("handlers did not finish in time", "running", len(p.mine))
			return runErr
		}
	}
	if len(p.pending) > 0 {
		write(func(ctx context.Context) { p.apply(ctx, lost) })
	}
	p.keepAcks()
	for _, r := range p.pending {
		r.settle(SettledLeft) // its write failed to the end
	}
	cfg.Logger.Debug("partition stopped", "err", runErr)
	return runErr
}

// takeBack gives up what the loop holds and no worker started, as a
// pause begins (holdBack) or the loop stops (exit): every held message,
// and every message still queued for a worker, which it takes back from
// the dispatcher's queue (the worker that dequeues it frees its slot).
// Each gets a pending result of outcome: Returned goes back to scheduled
// at its due, Dropped stays in flight for the next owner. A message with
// a result pending already is left alone; with revoked, one that a worker
// took back already (it saw the loop stopping first) is taken too. It
// returns how many results it added.
func (p *part) takeBack(outcome Outcome, revoked bool) int {
	n := len(p.pending)
	for _, m := range append(p.held.clear(), p.started...) {
		p.pending = append(p.pending, result{msg: m, outcome: outcome})
	}
	p.started = p.started[:0]
	settled := map[*Msg]bool{}
	for _, r := range p.pending {
		settled[r.msg] = true
	}
	for _, m := range p.mine {
		if !settled[m] && (m.state.CompareAndSwap(msgQueued, msgRevoked) || revoked && m.state.Load() == msgRevoked) {
			m.revoked = true
			p.pending = append(p.pending, result{msg: m, outcome: outcome})
		}
	}
	return len(p.pending) - n
}

// settle reports s to the message's Settled, if it has one and s is
// a settlement (a result that needed no write has none).
func (r result) settle(s Settlement) {
	if r.msg.Settled != nil && s != "" {
		r.msg.Settled(s)
		r.msg.Settled = nil // once
	}
}

// keepAcks hands the acks still pending at the loop's end (their write
// failed) to Config.Keep, which writes them once Redis answers: the
// deliveries finished, and a message whose ack is lost is run again by
// the next owner.
func (p *part) keepAcks() {
	if p.cfg.Keep == nil {
		return
	}
	var acked []result
	var acks []store.Acked
	for _, r := range p.pending {
		if r.outcome == Acked {
			acked, acks = append(acked, r), append(acks, ackOf(r))
		}
	}
	if len(acks) > 0 {
		p.cfg.Logger.Info("acks not written: kept to be written once redis answers", "n", len(acks))
		p.cfg.Keep(acks)
		for _, r := range acked {
			r.settle(SettledKept)
		}
	}
}

// ackOf is the ack of r, a delivery that succeeded: its record's header
// as claimed, which an ack compares (see store.Ack), and its uniqueness
// window.
func ackOf(r result) store.Acked {
	rec := r.msg.Record
	return store.Acked{ID: r.msg.ID, Header: rec.Header(), KeepFor: rec.UniqueFor, Token: r.msg.Token}
}
