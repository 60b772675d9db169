package poller

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestHandlerCtx gives deliveries that start within deadlineGrain of
// one another one context, whose deadline is never before a delivery's
// own and at most deadlineGrain after it; a later start gets a new one.
// A context no longer given out is cancelled at its last release, one
// still given out is not; the deadline's cause is ErrHandlerTimeout, a
// lost lease's is not. Without a timeout, the work context is given.
func TestHandlerCtx(t *testing.T) {
	work, lose := context.WithCancel(context.Background())
	defer lose()
	const timeout = time.Minute
	p := &part{cfg: &Config{Timeout: timeout}, workCtx: work}
	t0 := time.Now()
	within := func(ctx context.Context, start time.Time) {
		t.Helper()
		dl, ok := ctx.Deadline()
		if !ok || dl.Before(start.Add(timeout)) || dl.After(start.Add(timeout+deadlineGrain)) {
			t.Errorf("deadline %v (%v) for a start at %v: want within [%v, %v]", dl, ok, start, start.Add(timeout), start.Add(timeout+deadlineGrain))
		}
	}
	a, sharedA := p.handlerCtx(t0)
	b, sharedB := p.handlerCtx(t0.Add(deadlineGrain / 2))
	if a != b {
		t.Errorf("starts %v apart got two contexts, want one", deadlineGrain/2)
	}
	within(a, t0)
	within(b, t0.Add(deadlineGrain/2))
	p.deadlines.release(sharedA)
	c, sharedC := p.handlerCtx(t0.Add(2 * deadlineGrain))
	if c == a {
		t.Errorf("starts %v apart share a context", 2*deadlineGrain)
	}
	within(c, t0.Add(2*deadlineGrain))
	if a.Err() != nil {
		t.Errorf("a context still in use ended: %v", a.Err())
	}
	p.deadlines.release(sharedB)
	if a.Err() == nil {
		t.Error("a context no longer given out is not cancelled at its last release")
	}
	p.deadlines.release(sharedC)
	if c.Err() != nil {
		t.Errorf("the context still given out ended at its last release: %v", c.Err())
	}

	// The deadline's cause, and the lease's.
	p = &part{cfg: &Config{Timeout: time.Millisecond}, workCtx: work}
	d, sharedD := p.handlerCtx(time.Now())
	<-d.Done()
	if !errors.Is(context.Cause(d), ErrHandlerTimeout) {
		t.Errorf("cause at the deadline %v, want ErrHandlerTimeout", context.Cause(d))
	}
	p.deadlines.release(sharedD)
	p = &part{cfg: &Config{Timeout: time.Hour}, workCtx: work}
	e, sharedE := p.handlerCtx(time.Now())
	none, sharedNone := (&part{cfg: &Config{}, workCtx: work}).handlerCtx(time.Now())
	if none != work {
		t.Error("without a timeout, a handler's context is not the work context")
	}
	p.deadlines.release(sharedNone)
	lose()
	<-e.Done()
	if errors.Is(context.Cause(e), ErrHandlerTimeout) {
		t.Error("a lost lease's cause is ErrHandlerTimeout")
	}
	p.deadlines.release(sharedE)
}
