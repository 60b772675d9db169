package poller

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// lateBound is how late after its due a delivery of a message claimed
// ahead may start, on the test's clock (under -race, on a busy machine):
// a tenth of the poll interval the timing test polls at.
const lateBound = 100 * time.Millisecond

// TestLoopStartsAtDue: messages due 600 to 800 ms ahead are claimed at
// the loop's first poll and held until due (claim ahead): each delivery
// starts no earlier than its message's own due, and within lateBound
// after it, although the loop polls only once a second; each is
// delivered once, and acked.
func TestLoopStartsAtDue(t *testing.T) {
	e := newLoopEnv(t)
	base := time.Now()
	dues := map[string]time.Time{}
	var all []string
	for i := range 5 {
		id := fmt.Sprintf("m%d", i)
		dues[id] = e.enqueue(base.Add(600*time.Millisecond+time.Duration(i)*50*time.Millisecond), id)
		all = append(all, id)
	}
	l := e.newLoop("c1", 1)
	l.cfg.PollInterval = time.Second
	l.start()

	waitFor(t, time.Until(dues["m0"]), "every message claimed ahead, before the first is due", func() bool {
		return e.inState(store.StateInFlight, all...)
	})
	waitFor(t, 2*time.Second, "every message delivered", func() bool { return l.delivered(all...) })
	got := l.deliveries()
	for _, d := range got {
		due := dues[d.id]
		if d.at.Before(due) {
			t.Errorf("%s started %v before its due", d.id, due.Sub(d.at))
		} else if late := d.at.Sub(due); late > lateBound {
			t.Errorf("%s started %v after its due, want at most %v", d.id, late, lateBound)
		}
		if d.attempt != 1 {
			t.Errorf("%s: attempt %d, want 1", d.id, d.attempt)
		}
	}
	if len(got) != len(all) {
		t.Errorf("%d deliveries of %d messages: %+v", len(got), len(all), got)
	}
	waitFor(t, time.Second, "every message acked", func() bool {
		for _, id := range all {
			if e.get(id) != nil {
				return false
			}
		}
		return true
	})
}

// TestLoopWake: a loop whose poll intervals (busy and idle) are 30 s
// does not see a message enqueued due now after its first poll: it stays
// scheduled, undelivered, until a wake-up comes on Config.Wake; the loop
// then polls at once and delivers it promptly.
func TestLoopWake(t *testing.T) {
	t.Parallel()
	e := newLoopEnv(t)
	l := e.newLoop("c1", 1)
	l.cfg.PollInterval, l.cfg.IdlePollInterval, l.cfg.ReconcileInterval = 30*time.Second, 30*time.Second, 30*time.Second
	wake := make(chan struct{}, 1)
	l.cfg.Wake = wake
	var idle atomic.Bool // told idle: the first poll is over
	l.cfg.Idle = func(until time.Time) {
		if !until.IsZero() {
			idle.Store(true)
		}
	}
	l.start()

	waitFor(t, 2*time.Second, "the loop idle after its first poll", idle.Load)
	e.enqueue(time.Now(), "w")
	holds(t, 300*time.Millisecond, "the message scheduled and undelivered without a wake-up", func() bool {
		return len(l.deliveries()) == 0 && e.inState(store.StateScheduled, "w")
	})
	woke := time.Now()
	wake <- struct{}{}
	waitFor(t, time.Second, "the message delivered after the wake-up", func() bool { return l.delivered("w") })
	if d := l.deliveries()[0]; d.at.Sub(woke) > 500*time.Millisecond {
		t.Errorf("delivered %v after the wake-up, want at once", d.at.Sub(woke))
	}
}
