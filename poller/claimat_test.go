package poller

import (
	"testing"
	"time"
)

// TestClaimAt: a loop whose claim the bound cut short claims again at
// once when a quarter of the bound (at most a batch) is free; with less
// free it waits claimLinger from when it first saw some, unless a
// handler would idle meanwhile (a Prefetch below Concurrency and nothing
// queued); and never while none is free.
func TestClaimAt(t *testing.T) {
	t0 := time.Now()
	for _, c := range []struct {
		name                         string
		concurrency, prefetch, taken int
		queued                       int
		wantOK                       bool
		wantWait                     time.Duration
	}{
		{"the defaults, none free", 32, 1024, 1056, 0, false, 0},
		{"the defaults, a batch free", 32, 1024, 1056 - 256, 0, true, 0},
		{"the defaults, an eighth free, nothing queued", 32, 1024, 1056 - 200, 0, true, claimLinger},
		{"the defaults, an eighth free, some queued", 32, 1024, 1056 - 200, 500, true, claimLinger},
		{"a small bound, a quarter free", 8, 8, 12, 4, true, 0},
		{"no prefetch, one free, nothing queued", 10, 0, 9, 0, true, 0},
		{"a prefetch below concurrency, one free, one queued", 10, 5, 14, 1, true, claimLinger},
	} {
		t.Run(c.name, func(t *testing.T) {
			bound := c.concurrency + c.prefetch
			d := &Dispatcher{ready: make(chan *Msg, bound), max: int64(bound), handlers: c.concurrency}
			d.outstanding.Store(int64(c.taken))
			for range c.queued {
				d.ready <- &Msg{}
			}
			p := &part{cfg: &Config{Dispatch: d, ClaimBatch: 256}}
			at, ok := p.claimAt(t0)
			if ok != c.wantOK || (ok && at.Sub(t0) != c.wantWait) {
				t.Errorf("claimAt: in %v (%v), want in %v (%v)", at.Sub(t0), ok, c.wantWait, c.wantOK)
			}
			if !ok || c.wantWait == 0 {
				return
			}
			// The linger runs from the first look, not from each.
			if at, _ := p.claimAt(t0.Add(time.Millisecond)); at.Sub(t0) != c.wantWait {
				t.Errorf("claimAt a ms later: in %v from the first look, want %v", at.Sub(t0), c.wantWait)
			}
		})
	}
}
