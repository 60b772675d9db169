package poller

import (
	"context"
	"time"
)

// pause returns what Config.Pause says at now (never paused without it).
func (p *part) pause(now time.Time) (paused bool, until time.Time, changed <-chan struct{}) {
	if p.cfg.Pause == nil {
		return false, time.Time{}, nil
	}
	return p.cfg.Pause(now)
}

// pauseOrDispatch is a turn's look at the topic's pause: a paused loop
// holds back (see holdBack); otherwise, when a pause just ended, the loop
// polls at once (what fell due meanwhile is claimed, whatever the last
// look before it said), and it hands what is due to the dispatcher. It
// returns what Config.Pause said.
func (p *part) pauseOrDispatch(ctx context.Context, now time.Time) (paused bool, until time.Time, changed <-chan struct{}) {
	paused, until, changed = p.pause(now)
	if paused {
		p.holdBack(ctx)
		return paused, until, changed
	}
	if p.paused {
		p.paused, p.nextPoll = false, now
	}
	p.dispatchDue(ctx, now)
	return paused, until, changed
}

// holdBack is a paused loop's turn. When the loop first sees the pause,
// every message it holds and no worker started (claimed ahead and held
// until due, or due and still queued for a worker) goes back to
// scheduled at its own due, as at a graceful stop, without counting an
// attempt: a held-back message stays scheduled. Deliveries running go on,
// and their outcomes are written. While the pause lasts the loop claims
// nothing, so nothing else comes to hold; a worker that dequeues a
// message as the pause begins finds the topic paused and returns it too
// (see Consumer.handle). A paused loop counts as idle.
func (p *part) holdBack(ctx context.Context) {
	if p.paused {
		return
	}
	p.paused = true
	p.idle = true // the first poll after the pause looks before it claims
	// Nothing falls due before the pause ends, when the loop polls at
	// once: the lease may be quiet (see lease.Lease.SetIdle).
	p.quietUntil = farAway
	// No worker takes a message back before the loop stops: only what
	// the loop takes back itself is taken.
	if back := p.takeBack(Returned, false); back > 0 {
		p.cfg.Logger.Debug("topic paused: held messages go back to scheduled", "n", back)
	}
	p.apply(ctx, !p.valid())
}
