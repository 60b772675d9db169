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
// partition's look at its earliest message, the claim, the start of the
// deliveries of messages it held until due, and the fence raised again
// when the claim finds it missing or older.
type ClaimStore interface {
	NextDue(ctx context.Context, tp store.TopicPartition) (dueMS int64, ok bool, err error)
	ClaimBegin(ctx context.Context, tp store.TopicPartition, cl store.Claim) ([]store.Claimed, []*store.Record, error)
	StartMany(ctx context.Context, tp store.TopicPartition, token int64, ids []string, recs []*store.Record) ([]int64, error)
	RaiseFence(ctx context.Context, tp store.TopicPartition, token int64) error
}

// poll claims what is due within the next poll interval, and requeues
// expired in-flight messages. It returns when to poll next: at once while
// claims come back full, a poll interval later after a claim, and, when
// an idle partition's look found nothing within reach, when its earliest
// message comes within reach or an idle poll interval later.
func (p *part) poll(ctx context.Context, now time.Time) (next time.Time, err error) {
	cfg := p.cfg
	next = now.Add(clock.Jitter(cfg.PollInterval))
	p.requeueExpiredWhenDue(ctx, now)
	if !p.steady() {
		return now.Add(startRetry), nil
	}
	n := p.reserve()
	if n == 0 {
		return next, nil
	}
	// Claim ahead: everything due before the next poll (which comes after
	// PollInterval plus up to 10% jitter) is taken now and held until due;
	// under a rate limit, only what is due within the gate's reach, and
	// the loop looks again in time for the rest (see Gate.Reach).
	reach, lead := p.reach()
	maxDue := now.Add(reach).UnixMilli()
	from := now // the earliest due of what the claim takes, when a look saw it
	if p.idle {
		seen, again, due := p.look(ctx, now, n, maxDue, lead)
		if !due {
			return again, nil
		}
		from = seen
	}
	// Something is due within reach: the topic's limits say how much of
	// it may be claimed. What they hold back stays scheduled.
	p.idle = false
	grant, next, ok := p.limit(ctx, now, n, from, next)
	if !ok {
		return next, nil
	}
	claimed, recs, err := p.claim(ctx, now, maxDue, grant)
	if err != nil {
		return next, p.claimFailed(ctx, err, grant)
	}
	p.took(grant, len(claimed))
	if len(claimed) == 0 {
		return next, nil
	}
	p.writeUnheld(ctx, grant, p.hold(now, maxDue, grant, claimed, recs))
	p.dispatchDue(ctx, cfg.Now())
	return p.again(now, next, n, grant, len(claimed), reach), nil
}

// reserve takes up to a batch's worth of claim slots from the
// dispatcher's bound, and notes whether the bound cut the batch short
// (starved).
func (p *part) reserve() int {
	p.lingerFrom = time.Time{}
	n := p.cfg.Dispatch.reserve(p.cfg.ClaimBatch)
	p.starved = n < p.cfg.ClaimBatch
	return n
}

// look is an idle partition's look before it claims. An idle partition
// costs a plain ZRANGEBYSCORE a look (store.NextDue) instead of the
// claim's fenced scripts (three commands for the server). When nothing is
// due up to maxDue, look gives the n reserved slots back and returns
// when to look again (due false): when the earliest message comes within
// reach (lead before its due), or after an idle poll interval (what a
// producer wrote without waking the owner: see Client.wake), unless a
// wake-up comes first; a lost lease still shows at its next extension.
// Otherwise, or when the look failed, the loop claims, from the earliest
// due the look saw when it is later than now.
func (p *part) look(ctx context.Context, now time.Time, n int, maxDue int64, lead time.Duration) (from, again time.Time, due bool) {
	cfg := p.cfg
	first, ok, err := cfg.Store.NextDue(ctx, cfg.tp())
	if err == nil && (!ok || first > maxDue) {
		cfg.Dispatch.release(n)
		idle := cfg.IdlePollInterval
		if idle <= 0 {
			idle = cfg.PollInterval
		}
		again = now.Add(clock.Jitter(idle))
		p.quietUntil = farAway
		if ok {
			again = minTime(again, time.UnixMilli(first).Add(-lead))
			p.quietUntil = time.UnixMilli(first)
		}
		return now, again, false
	}
	p.quietUntil = time.Time{}
	if err == nil && first > now.UnixMilli() {
		return time.UnixMilli(first), time.Time{}, true
	}
	return now, time.Time{}, true
}

// limit asks the topic's limits (see gate) how many of the n reserved
// claims of messages due from from may be made, and gives back the slots
// of those they refuse. It returns the grant (grant.N claims), and when
// to poll next: next, or when the limits say more may come if they cut
// the claim short. ok is false when nothing is to be claimed: the limits
// refused every claim, or could not be asked (logged).
func (p *part) limit(ctx context.Context, now time.Time, n int, from, next time.Time) (Grant, time.Time, bool) {
	cfg := p.cfg
	grant, err := p.gate(ctx, n, from)
	if err != nil {
		cfg.Dispatch.release(n)
		p.logErr("flow limits", err)
		return grant, next, false
	}
	if grant.N < n {
		cfg.Dispatch.release(n - grant.N)
		if !grant.Retry.IsZero() {
			next = maxTime(now, grant.Retry)
		}
		if grant.N == 0 {
			return grant, next, false
		}
	}
	return grant, next, true
}

// claim claims up to grant.N messages due up to maxDue
// (store.ClaimBegin), and gives each the visibility deadline of its
// delivery: its due (now, if later) plus the handler's timeout and the
// visibility margin. The deliveries of those due by now start in the
// claim (Claimed.Started), unless the limits give them start times of
// their own: those, and the messages claimed ahead, start when the loop
// hands them to the dispatcher (see dispatchDue).
func (p *part) claim(ctx context.Context, now time.Time, maxDue int64, grant Grant) ([]store.Claimed, []*store.Record, error) {
	cfg := p.cfg
	nowMS := now.UnixMilli()
	visibility := (cfg.Timeout + cfg.VisibilityMargin).Milliseconds()
	cl := store.Claim{
		Token: cfg.Token, MaxDueMS: maxDue, Limit: grant.N,
		Deadline: func(due int64) int64 { return max(due, nowMS) + visibility },
	}
	if grant.Start == nil {
		cl.StartByMS = nowMS
	}
	cl.Held = func(id string) bool { return p.mine[id] != nil }
	cl.Shared = len(p.givers) > 0
	return cfg.Store.ClaimBegin(ctx, cfg.tp(), cl)
}

// claimFailed gives back the slots and the grant of a claim that failed,
// and returns ErrFenced when the fence holds a newer token. A fence
// missing or older (a backend lost data) is raised again. After any other
// error the loop returns the in-flight messages not its own (recovering).
func (p *part) claimFailed(ctx context.Context, err error, grant Grant) error {
	cfg := p.cfg
	cfg.Dispatch.release(grant.N)
	p.gateUnused(grant, grant.N)
	var fe *store.FencedError
	if errors.As(err, &fe) {
		p.count(EventFenced, 1)
		if fe.Newest > cfg.Token {
			return fmt.Errorf("%w: %v", ErrFenced, err)
		}
		// The fence is missing or older (a backend lost data): raise it again.
		if rerr := cfg.Store.RaiseFence(ctx, cfg.tp(), cfg.Token); rerr != nil {
			if errors.As(rerr, &fe) {
				return fmt.Errorf("%w: %v", ErrFenced, rerr)
			}
			p.logErr("raise fence", rerr)
		}
		return nil
	}
	// Some ids may be in flight and unknown to this loop: return
	// them, with any other in-flight message not its own.
	p.recovering = true
	p.logErr("claim", err)
	return nil
}

// took notes that a claim of grant.N messages took k: the slots and
// grants it found no message for go back; a claim that took nothing
// leaves the partition idle, one that took something leaves in-flight
// messages of the loop's own, whose deadline may pass (see
// requeueExpired), and one that took less than it could took everything
// there was.
func (p *part) took(grant Grant, k int) {
	n := grant.N
	p.cfg.Dispatch.release(n - k)
	p.gateUnused(grant, n-k)
	p.idle = k == 0
	p.quietUntil = time.Time{}
	if k > 0 {
		p.expiredSeen = false
	}
	if k < n {
		p.starved = false // took everything there was
	}
}

// unheld is what a claim took that the loop does not hold: the ids of
// tombstones, undecodable records (moves to dead), and messages claimed
// by a stale index entry whose record's due lies beyond the claim's reach
// (moves back to scheduled at that due); stale counts the stale entries.
type unheld struct {
	tomb           []string
	corrupt, later []store.Move
	stale          int
}

// hold sorts what a claim took: each message goes into the held heap
// until its due, or the start the limits give it (see Gate), but what it
// returns (see unheld) and what the loop holds or runs already.
func (p *part) hold(now time.Time, maxDue int64, grant Grant, claimed []store.Claimed, recs []*store.Record) (u unheld) {
	cfg := p.cfg
	started := 0
	for i, c := range claimed {
		if recs[i] == nil {
			u.tomb = append(u.tomb, c.ID)
			continue
		}
		if recs[i].Corrupt != nil {
			u.corrupt = append(u.corrupt, p.corruptMove(c.ID, recs[i], now))
			continue
		}
		if p.mine[c.ID] != nil {
			// Held or running here already: the claim met a second index
			// entry of it (an enqueue of its id cut short, see
			// store.AddMany), which the claim removed.
			u.stale++
			cfg.Dispatch.release(1)
			p.gateDone(grant.Slots, 1)
			continue
		}
		// The record's due is the message's. An entry due after it is one
		// a write moves earlier (record first), read before the move.
		due := recs[i].Due
		if due > c.Due {
			// A stale index entry (see store.AddMany, or a reschedule cut
			// short). Never early.
			u.stale++
			if due > maxDue {
				u.later = append(u.later, store.Move{ID: c.ID, Score: due})
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
		if c.Started { // its delivery started in the claim
			heap.Push(&p.started, m)
		} else {
			p.held.push(m)
		}
	}
	return u
}

// writeUnheld frees the slots of what a claim took and the loop does not
// hold, drops the in-flight entries of tombstones, and moves undecodable
// records to dead and messages claimed by a stale entry back to scheduled.
func (p *part) writeUnheld(ctx context.Context, grant Grant, u unheld) {
	cfg := p.cfg
	if len(u.tomb) > 0 {
		cfg.Dispatch.release(len(u.tomb))
		p.gateDone(grant.Slots, len(u.tomb))
		p.count(EventTombstone, len(u.tomb))
		if err := cfg.Store.Drop(ctx, cfg.tp(), u.tomb); err != nil {
			p.logErr("drop tombstones", err)
		}
	}
	p.count(EventStale, u.stale)
	// Messages claimed by a stale entry go back to scheduled at their
	// record's due, undecodable records to dead: one Moves for both. Only
	// the latter carry a record, so only they can be gone.
	if moves := append(u.later, u.corrupt...); len(moves) > 0 {
		cfg.Dispatch.release(len(moves))
		p.gateDone(grant.Slots, len(moves))
		if gone, err := p.writeMoves(ctx, moves); err != nil {
			p.logErr("return messages claimed by stale entries, move undecodable records to dead", err) // still in flight: found again at the deadline
		} else {
			p.count(EventTombstone, gone)
			p.count(EventDead, len(u.corrupt)-gone)
		}
	}
}

// again returns when to poll after a claim that took k messages of the
// grant.N granted, of reserved slots: at once when it came back full
// (there may be more), when the limits allow more when they cut it short,
// and at once, as an idle partition, when it took everything within a
// reach shorter than a poll interval; next otherwise.
func (p *part) again(now, next time.Time, reserved int, grant Grant, k int, reach time.Duration) time.Time {
	n := grant.N
	if k == n && n == p.cfg.ClaimBatch {
		next = now // full: there may be more
	}
	if k == n && n < reserved && !grant.Retry.IsZero() {
		next = maxTime(now, grant.Retry) // the limits cut it short: more when they allow
	}
	if k < n && reach < p.cfg.PollInterval {
		// Everything within the gate's short reach is claimed: look at
		// once for the next due, and come back in time for it.
		p.idle, next = true, now
	}
	return next
}

// claimAt returns when a loop whose last claim was cut short by the
// dispatcher's bound should claim again: at once when a batch's worth of
// slots is free or a handler would idle meanwhile (see Dispatcher.thin),
// claimLinger after it first saw some free otherwise (so that slots
// coming back one by one are claimed together), and never (ok false)
// while none is free.
func (p *part) claimAt(now time.Time) (at time.Time, ok bool) {
	d := p.cfg.Dispatch
	free := d.free()
	switch {
	case free <= 0:
		return time.Time{}, false
	case free >= d.lowWater(p.cfg.ClaimBatch), d.thin():
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
