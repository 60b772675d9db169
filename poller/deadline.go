package poller

import (
	"context"
	"errors"
	"sync"
	"time"
)

// deadlineGrain is how far apart the starts of deliveries sharing one
// handler deadline may be (see handlerCtx).
const deadlineGrain = 10 * time.Millisecond

// ErrHandlerTimeout is the cause (context.Cause) of a handler context
// that ended at the handler timeout, not with its partition's lease.
var ErrHandlerTimeout = errors.New("delayq: handler timeout")

// sharedDeadline is one handler context, shared by the deliveries of a
// partition that started within deadlineGrain of one another.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	until  time.Time // its deadline
	users  int       // deliveries running under it
}

// deadlines hands out a partition's shared handler contexts.
type deadlines struct {
	mu  sync.Mutex
	cur *sharedDeadline // the one given to deliveries that start
}

// handlerCtx returns the context a delivery of p that starts at now
// runs under, and the shared deadline to give back to release when the
// handler returns (nil without a timeout): p's work context (cancelled
// when its lease is lost) with the handler timeout. Deliveries that
// start within deadlineGrain of one another share one context, whose
// deadline is the latest of theirs, at most deadlineGrain after a
// delivery's own: one timer for them all rather than one each, which
// cost a consumer about a twelfth of its CPU in a burst. The last
// release of a context no longer given out cancels it. Without a
// timeout (Config.Timeout 0) it is the work context itself.
func (p *part) handlerCtx(now time.Time) (context.Context, *sharedDeadline) {
	if p.cfg.Timeout <= 0 {
		return p.workCtx, nil
	}
	want := now.Add(p.cfg.Timeout)
	d := &p.deadlines
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.cur
	if s == nil || want.After(s.until) {
		if s != nil && s.users == 0 {
			s.cancel()
		}
		s = &sharedDeadline{until: want.Add(deadlineGrain)}
		s.ctx, s.cancel = context.WithDeadlineCause(p.workCtx, s.until, ErrHandlerTimeout)
		d.cur = s
	}
	s.users++
	return s.ctx, s
}

// release gives back s, which handlerCtx returned (nil: nothing to give
// back), once its delivery's handler returned.
func (d *deadlines) release(s *sharedDeadline) {
	if s == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.users--
	if s.users == 0 && d.cur != s {
		s.cancel()
	}
}
