package poller

import (
	"container/heap"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// TestFailMoveLadder: a failed delivery climbs the backoff ladder, its
// last step repeating, and goes to dead at its max attempts (the
// config's, or the message's own). A retry's due is its backoff from
// now rounded up to the next millisecond, never down: now is 0.3 ms past
// a millisecond, so a due rounded down would be a millisecond early.
func TestFailMoveLadder(t *testing.T) {
	p := &part{cfg: &Config{MaxAttempts: 3, Backoff: []time.Duration{time.Second, time.Minute}}}
	const nowMS = 1_700_000_000_000
	now := time.UnixMilli(nowMS).Add(300 * time.Microsecond)
	for _, tc := range []struct {
		attempts, max int
		dead          bool
		due           time.Duration
	}{
		{0, 0, false, time.Second},  // first failure: first step
		{1, 0, false, time.Minute},  // second: second step
		{2, 0, true, 0},             // third of 3: dead
		{1, 10, false, time.Minute}, // per-message max: ladder's last step repeats
		{5, 10, false, time.Minute},
		{0, 1, true, 0},
	} {
		mv := p.failMove("x", &store.Record{Attempts: tc.attempts, MaxAttempts: tc.max}, now, "boom")
		if mv.Dead != tc.dead || mv.Record.Attempts != tc.attempts+1 || mv.Record.LastError != "boom" {
			t.Errorf("%+v: move %+v record %+v", tc, mv, mv.Record)
			continue
		}
		if !tc.dead {
			want := nowMS + tc.due.Milliseconds() + 1
			if mv.Score != want || mv.Record.Due != want {
				t.Errorf("%+v: due %d (score %d), want %d: the backoff from now, rounded up", tc, mv.Record.Due, mv.Score, want)
			}
		}
	}
}

func TestHeldHeapOrder(t *testing.T) {
	var h held
	base := time.Now()
	for _, d := range []int{5, 1, 4, 2, 3} {
		heap.Push(&h, &Msg{ID: string(rune('a' + d)), Due: base.Add(time.Duration(d) * time.Millisecond)})
	}
	last := time.Time{}
	for h.Len() > 0 {
		m := heap.Pop(&h).(*Msg)
		if m.Due.Before(last) {
			t.Fatalf("heap out of order: %v after %v", m.Due, last)
		}
		last = m.Due
	}
}

func TestDispatcherReserveBound(t *testing.T) {
	d := &Dispatcher{max: 10}
	freed := d.whenFreed()
	if n := d.reserve(7); n != 7 {
		t.Fatalf("reserve 7 = %d", n)
	}
	if n := d.reserve(7); n != 3 {
		t.Fatalf("reserve beyond the bound = %d, want 3", n)
	}
	if n := d.reserve(1); n != 0 {
		t.Fatalf("reserve when full = %d", n)
	}
	select {
	case <-freed:
		t.Fatal("freed before any release")
	default:
	}
	d.release(4)
	select {
	case <-freed:
	default:
		t.Fatal("release did not signal")
	}
	if n := d.reserve(5); n != 4 {
		t.Fatalf("reserve after release = %d, want 4", n)
	}
}
