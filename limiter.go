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

// How a consumer holds its claims to the topic's limits (see limiter).
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
	// maxClockSkew: see MaxClockSkew.
	maxClockSkew = MaxClockSkew
)

// MaxClockSkew is how far the clocks of a topic's processes may differ
// before it is worth a word: a consumer whose clock is farther than this
// from another's that takes from the same rate limit logs a warning (at
// most once a minute), and delayq doctor reports members whose heartbeats
// are that far from its own clock. Skew of any size neither stalls the
// rate nor lets the concurrency cap be passed (see docs/guarantees.md),
// but due times are compared with consumers' clocks.
const MaxClockSkew = 5 * time.Second

// skewWarnEvery is how often a consumer warns of a clock skew at most.
const skewWarnEvery = time.Minute

// minTake is the fewest starts a take of the bucket grants (unless it
// wants fewer): half a horizon's worth, so that the fleet takes about
// 2/rateHorizon times a second whatever the rate.
func minTake(rate float64) int {
	return max(1, int(rate*rateHorizon.Seconds()/2))
}

// limiter holds a consumer's claims to its topic's fleet-wide limits: it is
// the poller.Gate of its partition loops. The rate limit is a token
// bucket in Redis; a take grants the tokens there and those coming
// within rateHorizon, each with its start time, and a refused take is
// not asked again before a token can come. The concurrency cap is a set
// of slots in Redis, each held by one claimed message from its claim to
// its outcome and renewed by its holder while it lives; slots freed here
// serve this consumer's other deliveries for up to slotTenure, then go
// back to the fleet, whose waiting consumers are told.
//
// Neither depends on the clocks of the processes agreeing. The bucket
// keeps its own timeline (see store.TakeTokens), which the limiter learns
// its offset to. A slot is freed by a consumer the cap refused only when
// it saw the slot keep its score (its holder's expiry, by the holder's
// clock) for a lease by its own clock: the holder stopped renewing it. A
// change of the limits drops every wait computed under the old ones and
// wakes the loops that wait.
type limiter struct {
	k *Consumer

	takeMu sync.Mutex // one take at a time goes to Redis

	mu           sync.Mutex
	rateWait     time.Time     // the bucket gave less than wanted: not asked again before then,
	rateWaitFor  store.Limits  // while the limits are these
	offset       time.Duration // this clock's to the bucket's timeline, in its epoch (see store.TokenTake)
	epoch        int64
	skewWarned   time.Time
	slotsRefused bool // the fleet refused slots; asked again at slotsRetryAt or when told
	slotsRetryAt time.Time
	seen         map[string]seenSlot // the fleet's slots as the cap's refusals showed them
	lastExpiry   int64               // the latest expiry given a slot here (unix ms)
	seq          int
	idle, busy   []slot
	wake         chan struct{} // closed when a slot frees here or in the fleet, or the limits change
	rateWake     chan struct{} // closed when the rate may grant what it refused: the limits changed, or starts came back
	releaseAt    *time.Timer
}

// seenSlot is a slot of another holder, with its score, and when this
// consumer first saw it with that score.
type seenSlot struct {
	score int64
	since time.Time
}

type slot struct {
	name  string
	since time.Time
}

var _ poller.Gate = (*limiter)(nil)

func newLimiter(k *Consumer) *limiter {
	return &limiter{k: k, wake: make(chan struct{}), rateWake: make(chan struct{}), seen: map[string]seenSlot{}}
}

func (l *limiter) now() time.Time { return l.k.c.opts.Now() }

func (l *limiter) topic() string { return l.k.opts.Topic }

// Take implements poller.Gate. Starts are taken from the bucket as of
// from, the earliest due of the messages to claim, so that a start
// granted ahead of a message's due is not spent before it: the bucket's
// clock moves to from (see takeTokensScript), and the fleet's later
// takes count from there.
func (l *limiter) Take(ctx context.Context, n int, from time.Time) (poller.Grant, error) {
	now := l.now()
	lim := l.k.ctrl.limits()
	if lim.Concurrency == 0 {
		l.releaseIdle()
	}
	if lim.IsZero() {
		return poller.Grant{N: n}, nil
	}
	g := poller.Grant{N: n, Slots: lim.Concurrency > 0}
	if lim.Concurrency > 0 {
		got, retry, err := l.takeSlots(ctx, n, now, lim.Concurrency)
		if got < n {
			g.Wake, g.Retry = l.wakeCh(), retry
		}
		if err != nil || got == 0 {
			l.Done(got) // slots reused here before the fleet's refused
			g.N = 0
			return g, err
		}
		g.N = got
	}
	if lim.Rate > 0 {
		t, asked, err := l.takeTokens(ctx, g.N, now, from, lim)
		if t.N < g.N && g.Slots {
			l.Done(g.N - t.N) // the slots taken for those
		}
		g.Retry = t.Next()
		if t.N < g.N {
			l.mu.Lock()
			if asked {
				// The bucket gave less than wanted: it is not asked
				// again before a batch of tokens can come, however many
				// loops want some, unless the limits change.
				l.rateWait = g.Retry.Add(time.Duration(rand.Int64N(int64(rateHorizon / 10))))
				l.rateWaitFor = lim
				g.Retry = l.rateWait
			}
			if g.Wake == nil {
				g.Wake = l.rateWake // ask again at once when it may grant
			}
			l.mu.Unlock()
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
func (l *limiter) Reach() time.Duration {
	if l.k.ctrl.limits().Rate > 0 {
		return rateHorizon
	}
	return 0
}

// takeTokens takes up to n starts wanted from from (see Take) from the
// bucket, unless it refused lately under the same limits (asked false:
// none taken, to ask again at Next()).
func (l *limiter) takeTokens(ctx context.Context, n int, now, from time.Time, lim store.Limits) (t store.Tokens, asked bool, err error) {
	waiting := func() (store.Tokens, time.Duration, int64, bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		// Next() is the wait's end.
		return store.Tokens{Base: l.rateWait, Before: 1, Rate: lim.Rate}, l.offset, l.epoch, l.rateWaitFor == lim && now.Before(l.rateWait)
	}
	if t, _, _, ok := waiting(); ok {
		return t, false, nil
	}
	l.takeMu.Lock()
	defer l.takeMu.Unlock()
	t, offset, epoch, ok := waiting() // a take that held takeMu before may have set it
	if ok {
		return t, false, nil
	}
	t, err = l.k.c.store.TakeTokens(ctx, l.topic(), store.TokenTake{
		Rate: lim.Rate, Burst: lim.BurstOrDefault(), Want: n, Min: minTake(lim.Rate),
		Now: now, From: from, Offset: offset, Epoch: epoch, Horizon: rateHorizon,
	})
	if err == nil {
		l.learn(&t)
	}
	return t, true, err
}

// learn takes from a grant this clock's offset to the bucket's timeline
// (see store.Tokens.Learn), and warns (at most every skewWarnEvery) when
// this clock is more than maxClockSkew behind or ahead of another that
// took from the bucket.
func (l *limiter) learn(t *store.Tokens) {
	now := l.now()
	l.mu.Lock()
	l.offset, l.epoch = t.Offset+t.Learn(now), t.Epoch
	offset := l.offset
	ahead := t.PeerOffset - offset // the previous taker's offset: its clock is behind this one by that
	warn := (offset > maxClockSkew || ahead > maxClockSkew) && now.Sub(l.skewWarned) >= skewWarnEvery
	if warn {
		l.skewWarned = now
	}
	l.mu.Unlock()
	switch {
	case !warn:
	case ahead > maxClockSkew:
		l.k.log.Warn("this process's clock is ahead of another's that takes from the topic's rate limit: keep the hosts' clocks synchronised (due times are compared with consumers' clocks)",
			"ahead", ahead.Round(time.Millisecond), "bound", maxClockSkew)
	default:
		l.k.log.Warn("this process's clock is behind another's that takes from the topic's rate limit: keep the hosts' clocks synchronised (due times are compared with consumers' clocks)",
			"behind", offset.Round(time.Millisecond), "bound", maxClockSkew)
	}
}

// limitsChanged drops the waits computed under the old limits and wakes
// the loops waiting for them, which ask again at once.
func (l *limiter) limitsChanged() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rateWait = time.Time{}
	l.slotsRefused = false
	l.rateWakeLocked()
	l.notifyLocked()
}

// rateWakeLocked wakes the loops the rate refused: they ask again.
func (l *limiter) rateWakeLocked() {
	close(l.rateWake)
	l.rateWake = make(chan struct{})
}

// takeSlots takes up to n slots for claims: slots freed here lately
// first, then the fleet's, unless it refused lately. It returns how many
// it took and when to ask again for the rest.
func (l *limiter) takeSlots(ctx context.Context, n int, now time.Time, limit int) (int, time.Time, error) {
	l.mu.Lock()
	got := 0
	var old []slot // held past their tenure: due back to the fleet (see Done)
	for got < n && len(l.idle) > 0 {
		s := l.idle[len(l.idle)-1]
		l.idle = l.idle[:len(l.idle)-1]
		if now.Sub(s.since) >= slotTenure {
			old = append(old, s)
			continue
		}
		l.busy = append(l.busy, s)
		got++
	}
	l.idle = append(l.idle, old...)
	if got == n || (l.slotsRefused && now.Before(l.slotsRetryAt)) {
		retry := l.slotsRetryAt
		l.mu.Unlock()
		return got, retry, nil
	}
	want := make([]string, n-got)
	for i := range want {
		l.seq++
		want[i] = l.k.opts.ID + " " + strconv.Itoa(l.seq)
	}
	expiry := l.expiryLocked(now)
	evict := l.unrenewedLocked(now)
	l.mu.Unlock()

	l.takeMu.Lock()
	took, held, err := l.k.c.store.TakeSlots(ctx, l.topic(), limit, want, expiry, evict)
	l.takeMu.Unlock()

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range want[:took] {
		l.busy = append(l.busy, slot{name: name, since: now})
	}
	got += took
	if err != nil || took < len(want) {
		// Refused (or unknown): not asked again before slots are given
		// back in the fleet, one of a dead holder can be freed, or
		// slotsRetry.
		l.slotsRefused = true
		l.slotsRetryAt = now.Add(slotsRetry)
		if err == nil {
			if free := l.witnessLocked(now, held); free.Before(l.slotsRetryAt) {
				l.slotsRetryAt = maxTime(now, free)
			}
		}
	}
	return got, l.slotsRetryAt, err
}

// expiryLocked is the score of a slot taken or renewed at now: a lease
// later, and after every score given before here, so that a renewal
// always changes it (see witnessLocked).
func (l *limiter) expiryLocked(now time.Time) time.Time {
	e := max(now.Add(l.k.opts.Lease).UnixMilli(), l.lastExpiry+1)
	l.lastExpiry = e
	return time.UnixMilli(e)
}

// witnessLocked records the fleet's slots as a refusal of the cap showed
// them: a slot whose score changed since it was last seen was renewed,
// and is seen anew from now. It returns when the first slot not held here
// will have kept its score for a lease (the zero time: none).
func (l *limiter) witnessLocked(now time.Time, held []store.Slot) time.Time {
	mine := map[string]bool{}
	for _, ss := range [][]slot{l.idle, l.busy} {
		for _, s := range ss {
			mine[s.name] = true
		}
	}
	seen := make(map[string]seenSlot, len(held))
	var first time.Time
	for _, h := range held {
		if mine[h.Member] {
			continue
		}
		s, ok := l.seen[h.Member]
		if !ok || s.score != h.Score {
			s = seenSlot{score: h.Score, since: now}
		}
		seen[h.Member] = s
		if free := s.since.Add(l.k.opts.Lease); first.IsZero() || free.Before(first) {
			first = free
		}
	}
	l.seen = seen
	return first
}

// unrenewedLocked returns the slots seen keep their score for a lease or
// more by this clock: their holders stopped renewing them (died, or lost
// Redis for a lease), and a take frees them if they still have it. The
// holder's clock plays no part: a slot is never freed for its score being
// behind this clock, by however much.
func (l *limiter) unrenewedLocked(now time.Time) []store.Slot {
	var out []store.Slot
	for m, s := range l.seen {
		if now.Sub(s.since) >= l.k.opts.Lease {
			out = append(out, store.Slot{Member: m, Score: s.score})
		}
	}
	return out
}

// Unused implements poller.Gate: the last k claims of g found no
// message: their slots are free, their tokens go back to the bucket.
func (l *limiter) Unused(g poller.Grant, k int) {
	if g.Slots {
		l.Done(k)
	}
	lim := l.k.ctrl.limits()
	if g.Start == nil || lim.Rate == 0 {
		return
	}
	// The starts go back: the bucket may grant again at once, and the
	// loops it refused ask again (they may wait for far longer than the
	// starts given back take to come at a low rate).
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := l.k.c.store.RefundTokens(ctx, l.topic(), k, lim.BurstOrDefault()); err != nil {
			l.k.c.errLog.Log("give unused starts back to the rate limit", err, "component", "consumer", "topic", l.topic())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.rateWait = time.Time{}
		l.rateWakeLocked()
	}()
}

// Done implements poller.Gate: n slots are free here. They serve this
// consumer's next claims for slotLinger, then go back to the fleet.
func (l *limiter) Done(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.busy))
	if n == 0 {
		return
	}
	l.idle = append(l.idle, l.busy[len(l.busy)-n:]...)
	l.busy = l.busy[:len(l.busy)-n]
	l.notifyLocked()
	if l.releaseAt == nil {
		l.releaseAt = time.AfterFunc(slotLinger, l.releaseIdle)
	} else {
		l.releaseAt.Reset(slotLinger)
	}
}

// told is called when slots were given back in the fleet: the waiting
// loops ask again.
func (l *limiter) told() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slotsRefused = false
	l.notifyLocked()
}

func (l *limiter) notifyLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *limiter) wakeCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake
}

// releaseIdle gives the slots held here and not in use back to the
// fleet, and lets this consumer's loops ask the fleet again at once.
func (l *limiter) releaseIdle() {
	l.mu.Lock()
	idle := l.idle
	l.idle = nil
	l.mu.Unlock()
	if len(idle) > 0 {
		l.release(idle)
		l.told()
	}
}

func (l *limiter) release(ss []slot) {
	if len(ss) == 0 {
		return
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.k.c.store.ReleaseSlots(ctx, l.topic(), names); err != nil {
		// They expire a lease after their last renewal.
		l.k.c.errLog.Log("give slots of the concurrency cap back", err, "component", "consumer", "topic", l.topic())
	}
}

// run renews the slots held every heartbeat, and tells the loops when
// slots are given back in the fleet, until ctx is done; then it gives
// every slot held back.
func (l *limiter) run(ctx context.Context) {
	freed, unwatch := l.k.c.watch.subscribe(keys.SlotsField(l.topic()), l.k.opts.ChangePoll)
	defer unwatch()
	lim, changed := l.k.ctrl.limitsAndChange()
	t := time.NewTicker(l.k.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			all := append(l.idle, l.busy...)
			l.idle, l.busy = nil, nil
			if l.releaseAt != nil {
				l.releaseAt.Stop()
			}
			l.mu.Unlock()
			l.release(all)
			return
		case <-freed:
			l.told()
		case <-changed:
			var now store.Limits
			if now, changed = l.k.ctrl.limitsAndChange(); now != lim {
				lim = now
				l.limitsChanged()
			}
		case <-t.C:
			l.renew()
		}
	}
}

// renew pushes the expiry of the slots held back by a lease.
func (l *limiter) renew() {
	l.mu.Lock()
	names := make([]string, 0, len(l.idle)+len(l.busy))
	for _, ss := range [][]slot{l.idle, l.busy} {
		for _, s := range ss {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		l.mu.Unlock()
		return
	}
	expiry := l.expiryLocked(l.now())
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.k.opts.Heartbeat)
	defer cancel()
	n, err := l.k.c.store.RenewSlots(ctx, l.topic(), names, expiry)
	switch {
	case err != nil:
		l.k.c.errLog.Log("renew slots of the concurrency cap", err, "component", "consumer", "topic", l.topic())
	case n < len(names):
		l.k.log.Warn("slots of the concurrency cap were freed while held (the process did not renew them for a lease: stopped, or cut off from Redis?): the cap may be passed until their deliveries end",
			"held", len(names), "renewed", n)
	}
}
