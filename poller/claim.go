package poller

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// ClaimStore is what a loop's poll needs from storage: an idle
// partition's look at its earliest message, the claim, and the fence
// raised again when the claim finds it missing or older.
type ClaimStore interface {
	NextDue(ctx context.Context, topic string, p int) (dueMS int64, ok bool, err error)
	ClaimBegin(ctx context.Context, topic string, p int, token, maxDueMS int64, limit int, deadline func(dueMS int64) int64) ([]store.Claimed, []*store.Record, error)
	RaiseFence(ctx context.Context, topic string, p int, token int64) error
}

// poll claims what is due within the next poll interval, and requeues
// expired in-flight messages. It returns when to poll next: at once while
// claims come back full, a poll interval later after a claim, and, when
// an idle partition's look found nothing within reach, when its earliest
// message comes within reach or an idle poll interval later.
func (p *part) poll(ctx context.Context, now time.Time) (next time.Time, err error) {
	cfg := p.cfg
	next = now.Add(clock.Jitter(cfg.PollInterval))
	// Expired visibility deadlines are at least a second (the margin)
	// past a handler's timeout: looking every few polls is soon enough.
	// Once a look found none with nothing of the loop's own in flight,
	// there is nothing to look for until the loop claims again.
	if !now.Before(p.nextExpired) && !p.expiredSeen {
		p.requeueExpired(ctx, now)
		p.nextExpired = now.Add(expiredEvery(cfg.PollInterval))
	}
	p.lingerFrom = time.Time{}
	n := cfg.Dispatch.reserve(cfg.ClaimBatch)
	p.starved = n < cfg.ClaimBatch
	if n == 0 {
		return next, nil
	}
	// Claim ahead: everything due before the next poll (which comes after
	// PollInterval plus up to 10% jitter) is taken now and held until due;
	// under a rate limit, only what is due within the gate's reach, and
	// the loop looks again in time for the rest (see Gate.Reach).
	reach, lead := p.reach()
	maxDue := now.Add(reach).UnixMilli()
	nowMS := now.UnixMilli()
	from := now // the earliest due of what the claim takes, when a look saw it
	if p.idle {
		// An idle partition costs a plain ZRANGEBYSCORE a look instead of
		// the claim's fenced scripts (three commands for the server), and
		// looks again when its earliest message comes within reach, at a
		// wake-up, or after an idle poll interval (what a producer wrote
		// without waking the owner: see Client.wake); a lost lease still
		// shows at its next extension.
		due, ok, err := cfg.Store.NextDue(ctx, cfg.Topic, cfg.Partition)
		if err == nil && (!ok || due > maxDue) {
			cfg.Dispatch.release(n)
			idle := cfg.IdlePollInterval
			if idle <= 0 {
				idle = cfg.PollInterval
			}
			next = now.Add(clock.Jitter(idle))
			if ok {
				next = minTime(next, time.UnixMilli(due).Add(-lead))
			}
			return next, nil
		}
		if err == nil && due > nowMS {
			from = time.UnixMilli(due)
		}
	}
	// Something is due within reach: the topic's limits say how much of
	// it may be claimed. What they hold back stays scheduled.
	p.idle = false
	reserved := n
	grant, err := p.gate(ctx, n, from)
	if err != nil {
		cfg.Dispatch.release(n)
		p.logErr("flow limits", err)
		return next, nil
	}
	if grant.N < n {
		cfg.Dispatch.release(n - grant.N)
		n = grant.N
		if !grant.Retry.IsZero() {
			next = maxTime(now, grant.Retry)
		}
		if n == 0 {
			return next, nil
		}
	}
	visibility := (cfg.Timeout + cfg.VisibilityMargin).Milliseconds()
	claimed, recs, err := cfg.Store.ClaimBegin(ctx, cfg.Topic, cfg.Partition, cfg.Token, maxDue, n,
		func(due int64) int64 { return max(due, nowMS) + visibility })
	if err != nil {
		cfg.Dispatch.release(n)
		p.gateUnused(grant, n)
		var fe *store.FencedError
		if errors.As(err, &fe) {
			p.count(EventFenced, 1)
			if fe.Newest > cfg.Token {
				return next, fmt.Errorf("%w: %v", ErrFenced, err)
			}
			// The fence is missing or older (a backend lost data): raise it again.
			if rerr := cfg.Store.RaiseFence(ctx, cfg.Topic, cfg.Partition, cfg.Token); rerr != nil {
				if errors.As(rerr, &fe) {
					return next, fmt.Errorf("%w: %v", ErrFenced, rerr)
				}
				p.logErr("raise fence", rerr)
			}
			return next, nil
		}
		// Some ids may be in flight and unknown to this loop: return
		// them, with any other in-flight message not its own.
		p.recovering = true
		p.logErr("claim", err)
		return next, nil
	}
	cfg.Dispatch.release(n - len(claimed))
	p.gateUnused(grant, n-len(claimed))
	p.idle = len(claimed) == 0
	if len(claimed) > 0 {
		p.expiredSeen = false
	}
	if len(claimed) < n {
		p.starved = false // took everything there was
	}
	if len(claimed) == 0 {
		return next, nil
	}
	var tomb []string
	var corrupt, later []store.Move
	stale, started := 0, 0
	for i, c := range claimed {
		if recs[i] == nil {
			tomb = append(tomb, c.ID)
			continue
		}
		if recs[i].Corrupt != nil {
			corrupt = append(corrupt, p.corruptMove(c.ID, recs[i], now))
			continue
		}
		if p.mine[c.ID] != nil {
			// Held or running here already: the claim met a second index
			// entry of it (an enqueue of its id cut short, see
			// store.AddMany), which the claim removed.
			stale++
			cfg.Dispatch.release(1)
			p.gateDone(grant.Slots, 1)
			continue
		}
		due := c.Due
		if recs[i].Due > due {
			// A stale index entry (see store.AddMany, or a reschedule cut
			// short): the record's due is the message's. Never early.
			due = recs[i].Due
			stale++
			if due > maxDue {
				later = append(later, store.Move{ID: c.ID, Score: due})
				continue
			}
		}
		m := &Msg{ID: c.ID, Partition: cfg.Partition, Token: cfg.Token, Due: time.UnixMilli(due), Record: recs[i], part: p}
		if grant.Start != nil {
			m.start = grant.Start(started) // the limits' time for it, if after its due
		}
		m.slot = grant.Slots
		started++
		p.mine[m.ID] = m
		heap.Push(&p.held, m)
	}
	if len(tomb) > 0 {
		cfg.Dispatch.release(len(tomb))
		p.gateDone(grant.Slots, len(tomb))
		p.count(EventTombstone, len(tomb))
		if err := cfg.Store.Drop(ctx, cfg.Topic, cfg.Partition, tomb); err != nil {
			p.logErr("drop tombstones", err)
		}
	}
	p.count(EventStale, stale)
	// Messages claimed by a stale entry go back to scheduled at their
	// record's due, undecodable records to dead: one Moves for both. Only
	// the latter carry a record, so only they can be gone.
	if moves := append(later, corrupt...); len(moves) > 0 {
		cfg.Dispatch.release(len(moves))
		p.gateDone(grant.Slots, len(moves))
		if gone, err := p.writeMoves(ctx, moves); err != nil {
			p.logErr("return messages claimed by stale entries, move undecodable records to dead", err) // still in flight: found again at the deadline
		} else {
			p.count(EventTombstone, gone)
			p.count(EventDead, len(corrupt)-gone)
		}
	}
	p.dispatchDue(cfg.Now())
	if len(claimed) == n && n == cfg.ClaimBatch {
		next = now // full: there may be more
	}
	if len(claimed) == n && n < reserved && !grant.Retry.IsZero() {
		next = maxTime(now, grant.Retry) // the limits cut it short: more when they allow
	}
	if len(claimed) < n && reach < cfg.PollInterval {
		// Everything within the gate's short reach is claimed: look at
		// once for the next due, and come back in time for it.
		p.idle, next = true, now
	}
	return next, nil
}

// claimAt returns when a loop whose last claim was cut short by the
// dispatcher's bound should claim again: at once when a batch's worth of
// slots is free, claimLinger after it first saw some free otherwise (so
// that slots coming back one by one are claimed together), and never (ok
// false) while none is free.
func (p *part) claimAt(now time.Time) (at time.Time, ok bool) {
	d := p.cfg.Dispatch
	free := d.free()
	switch {
	case free <= 0:
		return time.Time{}, false
	case free >= d.lowWater(p.cfg.ClaimBatch):
		return now, true
	}
	if p.lingerFrom.IsZero() {
		p.lingerFrom = now
	}
	return p.lingerFrom.Add(claimLinger), true
}

// slotsFreed returns, for a loop whose last claim was cut short by the
// dispatcher's bound and that is not paused, a channel closed when claim
// slots come back, and brings the next poll forward to claimAt when some
// are free already; nil otherwise.
func (p *part) slotsFreed(now time.Time, paused bool) <-chan struct{} {
	if !p.starved || paused {
		return nil
	}
	freed := p.cfg.Dispatch.whenFreed()
	// Slots freed between the claim and the line above would not close
	// the channel: look once more now that it is armed.
	if at, ok := p.claimAt(now); ok {
		p.nextPoll = minTime(p.nextPoll, at)
	}
	return freed
}
