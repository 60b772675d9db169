package delayq

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/poller"
)

// How a consumer holds its claims to the topic's limits (see flow).
const (
	// rateHorizon: a take of the token bucket also grants the tokens that
	// come into it within this time, each to start at its own time, so
	// that a loop claims a little ahead, as it does of due times.
	rateHorizon = 100 * time.Millisecond
	// slotLinger is how long a slot of the concurrency cap freed here
	// waits for another delivery of this consumer before it goes back to
	// the fleet.
	slotLinger = 5 * time.Millisecond
	// slotTenure is how long a consumer reuses a slot it holds before it
	// gives it back, so that the slots go round the fleet.
	slotTenure = time.Second
	// slotsRetry is how long a consumer the cap refused waits before it
	// asks again, unless slots are given back sooner (it is told) or a
	// slot of a dead holder expires sooner.
	slotsRetry = time.Second
)

// minTake is the fewest starts a take of the bucket grants (unless it
// wants fewer): half a horizon's worth, so that the fleet takes about
// 2/rateHorizon times a second whatever the rate.
func minTake(rate float64) int {
	return max(1, int(rate*rateHorizon.Seconds()/2))
}

// flow holds a consumer's claims to its topic's fleet-wide limits: it is
// the poller.Gate of its partition loops. The rate limit is a token
// bucket in Redis; a take grants the tokens there and those coming
// within rateHorizon, each with its start time, and a refused take is
// not asked again before a token can come. The concurrency cap is a set
// of slots in Redis, each held by one claimed message from its claim to
// its outcome, expiring with its holder; slots freed here serve this
// consumer's other deliveries for up to slotTenure, then go back to the
// fleet, whose waiting consumers are told.
type flow struct {
	k *Consumer

	takeMu sync.Mutex // one take at a time goes to Redis

	mu           sync.Mutex
	rateWait     time.Time // the bucket gave less than wanted: not asked again before then
	slotsRefused bool      // the fleet refused slots; asked again at slotsRetryAt or when told
	slotsRetryAt time.Time
	seq          int
	idle, busy   []slot
	wake         chan struct{} // closed when a slot frees here or in the fleet
	releaseAt    *time.Timer
}

type slot struct {
	name  string
	since time.Time
}

var _ poller.Gate = (*flow)(nil)

func newFlow(k *Consumer) *flow { return &flow{k: k, wake: make(chan struct{})} }

func (f *flow) now() time.Time { return f.k.c.opts.Now() }

func (f *flow) topic() string { return f.k.opts.Topic }

// Take implements poller.Gate. Starts are taken from the bucket as of
// from, the earliest due of the messages to claim, so that a start
// granted ahead of a message's due is not spent before it: the bucket's
// clock moves to from (see takeTokensScript), and the fleet's later
// takes count from there.
func (f *flow) Take(ctx context.Context, n int, from time.Time) (poller.Grant, error) {
	now := f.now()
	lim := f.k.ctrl.limits()
	if lim.Concurrency == 0 {
		f.releaseIdle()
	}
	if lim.IsZero() {
		return poller.Grant{N: n}, nil
	}
	g := poller.Grant{N: n, Slots: lim.Concurrency > 0}
	if lim.Concurrency > 0 {
		got, retry, err := f.takeSlots(ctx, n, now, lim.Concurrency)
		if got < n {
			g.Wake, g.Retry = f.wakeCh(), retry
		}
		if err != nil || got == 0 {
			f.Done(got) // slots reused here before the fleet's refused
			g.N = 0
			return g, err
		}
		g.N = got
	}
	if lim.Rate > 0 {
		if from.Before(now) {
			from = now
		}
		t, asked, err := f.takeTokens(ctx, g.N, from, lim)
		if t.N < g.N && g.Slots {
			f.Done(g.N - t.N) // the slots taken for those
		}
		g.Retry = t.Next()
		if t.N < g.N && asked {
			// The bucket gave less than wanted: it is not asked again
			// before a batch of tokens can come, however many loops
			// want some.
			f.mu.Lock()
			f.rateWait = g.Retry.Add(time.Duration(rand.Int64N(int64(rateHorizon / 10))))
			g.Retry = f.rateWait
			f.mu.Unlock()
		}
		g.N = t.N
		if t.N > 0 {
			g.Start = t.Start
		}
		if err != nil {
			return g, err
		}
	}
	return g, nil
}

// Reach implements poller.Gate: under a rate limit, loops claim no
// farther ahead than a take grants starts.
func (f *flow) Reach() time.Duration {
	if f.k.ctrl.limits().Rate > 0 {
		return rateHorizon
	}
	return 0
}

// takeTokens takes up to n starts from the bucket, unless it refused
// lately (asked false: none taken, to ask again at Next()).
func (f *flow) takeTokens(ctx context.Context, n int, now time.Time, lim store.Limits) (t store.Tokens, asked bool, err error) {
	waiting := func() (store.Tokens, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return store.Tokens{Base: f.rateWait, Before: 1, Rate: lim.Rate}, now.Before(f.rateWait) // Next() is the wait's end
	}
	if t, ok := waiting(); ok {
		return t, false, nil
	}
	f.takeMu.Lock()
	defer f.takeMu.Unlock()
	if t, ok := waiting(); ok { // a take that held takeMu before may have set it
		return t, false, nil
	}
	t, err = f.k.c.store.TakeTokens(ctx, f.topic(), lim.Rate, lim.BurstOrDefault(), n, minTake(lim.Rate), now, rateHorizon)
	return t, true, err
}

// takeSlots takes up to n slots for claims: slots freed here lately
// first, then the fleet's, unless it refused lately. It returns how many
// it took and when to ask again for the rest.
func (f *flow) takeSlots(ctx context.Context, n int, now time.Time, limit int) (int, time.Time, error) {
	f.mu.Lock()
	got := 0
	var old []slot // held past their tenure: due back to the fleet (see Done)
	for got < n && len(f.idle) > 0 {
		s := f.idle[len(f.idle)-1]
		f.idle = f.idle[:len(f.idle)-1]
		if now.Sub(s.since) >= slotTenure {
			old = append(old, s)
			continue
		}
		f.busy = append(f.busy, s)
		got++
	}
	f.idle = append(f.idle, old...)
	if got == n || (f.slotsRefused && now.Before(f.slotsRetryAt)) {
		retry := f.slotsRetryAt
		f.mu.Unlock()
		return got, retry, nil
	}
	want := make([]string, n-got)
	for i := range want {
		f.seq++
		want[i] = f.k.opts.ID + " " + strconv.Itoa(f.seq)
	}
	f.mu.Unlock()

	f.takeMu.Lock()
	took, first, err := f.k.c.store.TakeSlots(ctx, f.topic(), limit, want, now, now.Add(f.k.opts.Lease))
	f.takeMu.Unlock()

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, name := range want[:took] {
		f.busy = append(f.busy, slot{name: name, since: now})
	}
	got += took
	if err != nil || took < len(want) {
		// Refused (or unknown): not asked again before slots are given
		// back in the fleet, one of a dead holder expires, or slotsRetry.
		f.slotsRefused = true
		f.slotsRetryAt = now.Add(slotsRetry)
		if first.After(now) && first.Before(f.slotsRetryAt) {
			f.slotsRetryAt = first
		}
	}
	return got, f.slotsRetryAt, err
}

// Unused implements poller.Gate: the last k claims of g found no
// message: their slots are free, their tokens go back to the bucket.
func (f *flow) Unused(g poller.Grant, k int) {
	if g.Slots {
		f.Done(k)
	}
	lim := f.k.ctrl.limits()
	if g.Start == nil || lim.Rate == 0 {
		return
	}
	// The starts go back: the bucket may grant again at once.
	f.mu.Lock()
	f.rateWait = time.Time{}
	f.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := f.k.c.store.RefundTokens(ctx, f.topic(), k, lim.BurstOrDefault()); err != nil {
			f.k.c.errLog.Log("give unused starts back to the rate limit", err, "component", "consumer", "topic", f.topic())
		}
	}()
}

// Done implements poller.Gate: n slots are free here. They serve this
// consumer's next claims for slotLinger, then go back to the fleet.
func (f *flow) Done(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n = min(n, len(f.busy))
	if n == 0 {
		return
	}
	f.idle = append(f.idle, f.busy[len(f.busy)-n:]...)
	f.busy = f.busy[:len(f.busy)-n]
	f.notifyLocked()
	if f.releaseAt == nil {
		f.releaseAt = time.AfterFunc(slotLinger, f.releaseIdle)
	} else {
		f.releaseAt.Reset(slotLinger)
	}
}

// told is called when slots were given back in the fleet: the waiting
// loops ask again.
func (f *flow) told() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slotsRefused = false
	f.notifyLocked()
}

func (f *flow) notifyLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *flow) wakeCh() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wake
}

// releaseIdle gives the slots held here and not in use back to the
// fleet, and lets this consumer's loops ask the fleet again at once.
func (f *flow) releaseIdle() {
	f.mu.Lock()
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	if len(idle) > 0 {
		f.release(idle)
		f.told()
	}
}

func (f *flow) release(ss []slot) {
	if len(ss) == 0 {
		return
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := f.k.c.store.ReleaseSlots(ctx, f.topic(), names); err != nil {
		// They expire a lease after their last renewal.
		f.k.c.errLog.Log("give slots of the concurrency cap back", err, "component", "consumer", "topic", f.topic())
	}
}

// run renews the slots held every heartbeat, and tells the loops when
// slots are given back in the fleet, until ctx is done; then it gives
// every slot held back.
func (f *flow) run(ctx context.Context) {
	freed, unwatch := f.k.c.watch.subscribe(keys.SlotsField(f.topic()), f.k.opts.ChangePoll)
	defer unwatch()
	t := time.NewTicker(f.k.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.mu.Lock()
			all := append(f.idle, f.busy...)
			f.idle, f.busy = nil, nil
			if f.releaseAt != nil {
				f.releaseAt.Stop()
			}
			f.mu.Unlock()
			f.release(all)
			return
		case <-freed:
			f.told()
		case <-t.C:
			f.renew()
		}
	}
}

// renew pushes the expiry of the slots held back by a lease.
func (f *flow) renew() {
	f.mu.Lock()
	names := make([]string, 0, len(f.idle)+len(f.busy))
	for _, ss := range [][]slot{f.idle, f.busy} {
		for _, s := range ss {
			names = append(names, s.name)
		}
	}
	f.mu.Unlock()
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.k.opts.Heartbeat)
	defer cancel()
	n, err := f.k.c.store.RenewSlots(ctx, f.topic(), names, f.now().Add(f.k.opts.Lease))
	switch {
	case err != nil:
		f.k.c.errLog.Log("renew slots of the concurrency cap", err, "component", "consumer", "topic", f.topic())
	case n < len(names):
		f.k.log.Warn("slots of the concurrency cap expired while held (the process stopped past its lease?): the cap may be passed until their deliveries end",
			"held", len(names), "renewed", n)
	}
}
