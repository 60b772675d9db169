package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// Store is what a partition loop needs from storage: the parts its claim,
// outcomes, repairs, changes of owner and moves need, each declared beside
// the code that uses it. The loops of a process share one Store and call
// it at once: an implementation must be safe for concurrent use. The root
// package gives the loops internal/store's Store.
type Store interface {
	ClaimStore
	OutcomeStore
	RepairStore
	TakeoverStore
	MoveStore
}

var _ Store = (*store.Store)(nil)

// Event names passed to Config.Count.
const (
	EventAcked       = "acked"
	EventRetried     = "retried"
	EventDead        = "dead"
	EventRedelivered = "redelivered" // in-flight message requeued after its visibility deadline
	EventRecovered   = "recovered"   // in-flight message of a lost owner returned to scheduled by the new owner
	EventCorrupt     = "corrupt"     // record that could not be decoded, moved to the dead set
	EventFenced      = "fenced"      // claim refused by the fence, or held message dropped on lease loss
	EventTombstone   = "tombstone"
	EventStale       = "stale" // claimed by an index entry older than its record's due: held or returned to that due
	EventRepaired    = "repaired"
	EventMoved       = "moved"      // message moved to its partition in a new partition count
	EventSuperseded  = "superseded" // a claimed message's record was replaced (a send, a reschedule) before its delivery started or while it ran: the newer one is scheduled
)

// ErrFenced is returned by Run when the partition's fence holds a newer
// token than the loop's: another owner took over.
var ErrFenced = errors.New("poller: fenced by a newer owner")

// ErrExpired is returned by Run when Config.Valid turned false before the
// lease's context ended (the process was paused past its lease, say): the
// loop stops at once rather than write to a partition it may have lost.
var ErrExpired = errors.New("poller: lease ran out")

// Config configures one partition loop. All fields are required unless
// marked otherwise.
type Config struct {
	Topic     string
	Partition int
	Token     int64  // fencing token of the lease
	Consumer  string // this consumer's id, named in the handover mark
	Store     Store
	Dispatch  *Dispatcher
	// Release is called once when the loop stops gracefully, after it
	// returned what it held and marked the handover, before it waits for
	// its running handlers: the owner releases the lease there, so that the
	// next owner need not wait for them. Optional.
	Release func()
	// Valid reports whether the lease may still be trusted (checked before
	// each delivery starts, each turn of the loop and each write of
	// outcomes other than acks).
	Valid func() bool
	// Steady reports whether the lease's last extension went through:
	// false while one failed (Redis out of reach) and none succeeded
	// since. While it is false the loop claims and starts nothing, since
	// a delivery started then would likely be cancelled with the lease
	// and delivered again by the next owner. Optional: always steady.
	Steady func() bool
	// Work is the parent of the handlers' contexts (besides the lease's
	// context): cancelling it aborts running handlers at a hard shutdown.
	Work context.Context
	// Abandon, when closed, makes a stopping loop return without waiting
	// for handlers that ignore their context.
	Abandon <-chan struct{}

	PollInterval time.Duration
	// IdlePollInterval is the longest sleep between two looks at a
	// partition whose last poll found nothing to claim: it then sleeps
	// until the earliest message it saw is within a poll interval, or this
	// long, or a wake-up (Wake). Optional: PollInterval when zero.
	IdlePollInterval  time.Duration
	Timeout           time.Duration // handler timeout: the end of a HandleFunc's context (0: none)
	VisibilityMargin  time.Duration // added to due + Timeout for the visibility deadline
	ReconcileInterval time.Duration
	ReconcileBatch    int
	ClaimBatch        int
	MaxAttempts       int
	Backoff           []time.Duration
	Now               func() time.Time
	Logger            *slog.Logger
	// Count is told about events (optional).
	Count func(event string, n int)
	// Layout returns the topic's layout as last read (optional: without
	// it, the loop moves nothing). While a change of the partition count
	// runs and this partition is one of its sources, the loop moves the
	// messages that belong elsewhere (see move.go).
	Layout func() store.Layout
	// MoveSettle: see DefaultMoveSettle, the default.
	MoveSettle time.Duration
	// Errors, when set, logs the loop's errors with those of the other
	// loops of the process: one warning per outage (see ErrLog).
	Errors *ErrLog
	// Idle, when set, is told whether the loop is idle (its last poll
	// claimed nothing and it holds, runs and writes nothing) and until
	// when nothing is due there, as lease.Lease.SetIdle takes it: the
	// zero time when busy, the earliest due its last look saw (far away
	// when none), or the Unix epoch when idle with no look since its last
	// claim. The lease is then extended less often. Optional.
	Idle func(until time.Time)
	// Wake, when it delivers, makes the loop poll at once: a producer
	// wrote a message due soon (optional). A wake-up lost on the way only
	// leaves the message to the next poll.
	Wake <-chan struct{}
	// Pause, when set, reports whether the topic is paused at now, until
	// when (zero: until resumed), and returns a channel closed at the next
	// change of the topic's controls. A paused loop claims nothing,
	// returns what it holds and has not started to scheduled at once (see
	// holdBack), and wakes at the pause's end or that change. Optional.
	Pause func(now time.Time) (paused bool, until time.Time, changed <-chan struct{})
	// Gate, when set, holds the loop's claims to the topic's fleet-wide
	// limits (see Gate). Optional.
	Gate Gate
	// Keep, when set, is given the acks a loop that lost its lease could
	// not write (Redis could not be reached): deliveries that finished,
	// whose messages the next owner would otherwise run again. An ack
	// compares the record as claimed (see store.Ack), so it may be written
	// by anyone, later. Optional: without it they are dropped.
	Keep func(acks []store.Acked)
}

// tp is the partition the loop works, as the store's commands take it.
func (c *Config) tp() store.TopicPartition {
	return store.TopicPartition{Topic: c.Topic, P: c.Partition}
}

type result struct {
	msg     *Msg
	outcome Outcome
	err     error
	settled Settlement // set by apply, reported by finish to Msg.Settled
}

type part struct {
	cfg      *Config
	results  chan result
	stopping atomic.Bool
	workCtx  context.Context
	detach   func() bool // stops the lease's context from cancelling workCtx
	held     waiting     // claimed ahead, not started
	started  held        // started, in the claim or ahead of their due, and not yet due
	// startCost is what the loop's starts of held messages took per
	// message lately (see measureStart; zero until measured).
	startCost time.Duration
	// startThrough: the loop starts every held message that may start
	// by then at once, a batch a turn (see dispatchDue).
	startThrough time.Time
	lastStart    struct {
		at time.Time // when the loop's last start of held messages began
		n  int       // how many it started
	}
	mine    map[string]*Msg // claimed, result not yet applied
	pending []result        // results not yet written (coalescing, or a write failed)
	since   time.Time       // when the oldest pending result came in
	lastErr time.Time
	cursor  string
	starved bool // the last claim was cut short by the dispatcher's bound
	// idle: the last poll found nothing to claim; the next one looks
	// with one plain command before it runs the claim's scripts.
	idle bool
	// nextPoll is when the loop polls next: a poll interval after the
	// last, or a look at an idle partition's earliest message (see poll),
	// and sooner when the loop itself schedules a message (writeMoves) or
	// a wake-up comes.
	nextPoll time.Time
	// lingerFrom is when a starved loop first saw fewer free slots than a
	// batch's worth (zero when it has not, or claimed since).
	lingerFrom time.Time

	nextExpired time.Time // next look for expired visibility deadlines
	// expiredSeen: a look for expired visibility deadlines found none
	// while the loop had nothing claimed and no givers to watch: until it
	// claims again (only a claim fills mine, and givers only shrink), no
	// deadline can pass there, and the look is skipped.
	expiredSeen bool

	// givers are the consumers that handed the partition over with
	// deliveries still running there (see store.Takeover): their in-flight
	// messages are left alone while they live.
	givers    []string
	nextWatch time.Time
	// recovering is set while the in-flight messages of a lost owner are
	// still to be returned (a write failed: tried again each turn).
	recovering bool
	handedOver bool // the loop gave the partition up gracefully; outcomes are still written

	mv mover // the moves of a change of the partition count

	toldIdle   time.Time // what Config.Idle was told last
	quietUntil time.Time // the earliest due the last look saw (far away if none, or paused); zero after a claim

	paused bool // the loop saw the topic paused at its last turn (see holdBack)

	// gateWake closes when the gate may grant again what it refused
	// (see Gate.Take); nil when it refused nothing.
	gateWake <-chan struct{}

	deadlines deadlines // the handlers' contexts (see handlerCtx)
}

// expiredEvery is how often a loop looks for in-flight messages whose
// visibility deadline passed: every 10 polls, at most every 5 s.
func expiredEvery(poll time.Duration) time.Duration {
	return min(10*poll, 5*time.Second)
}

func (p *part) valid() bool { return p.cfg.Valid() }

// steady reports whether the loop may claim and start (see Config.Steady).
func (p *part) steady() bool { return p.cfg.Steady == nil || p.cfg.Steady() }

func (p *part) count(ev string, n int) {
	if n > 0 && p.cfg.Count != nil {
		p.cfg.Count(ev, n)
	}
}

// logErr logs an error of the loop: through Config.Errors, or at most
// one per second for the partition without it.
func (p *part) logErr(msg string, err error) {
	if p.cfg.Errors != nil {
		p.cfg.Errors.Log(msg, err, "component", "poller", "consumer", p.cfg.Consumer, "topic", p.cfg.Topic, "partition", p.cfg.Partition, "token", p.cfg.Token)
		return
	}
	if time.Since(p.lastErr) < time.Second {
		return
	}
	p.lastErr = time.Now()
	p.cfg.Logger.Warn(msg, "err", err)
}

// fenced returns ErrFenced, wrapping err, when err is the fence's refusal
// (store.FencedError), and counts it; nil otherwise.
func (p *part) fenced(err error) error {
	var fe *store.FencedError
	if !errors.As(err, &fe) {
		return nil
	}
	p.count(EventFenced, 1)
	return fmt.Errorf("%w: %v", ErrFenced, err)
}

// Run works partition cfg.Partition until ctx (the lease's) is done or stop
// is closed. It starts by raising the fence and, unless the previous owner
// handed the partition over gracefully, returning every in-flight message
// to scheduled (see recoverLost). On stop it returns held messages to
// scheduled at once, marks the handover, calls cfg.Release and then waits
// for running handlers; on a lost lease it drops held messages without
// delivering them (the next owner returns them) and waits for running
// handlers. It returns nil after a stop, ErrFenced when another owner
// took over, or ctx's cause.
func Run(ctx context.Context, stop <-chan struct{}, cfg Config) error {
	cfg.Logger = cfg.Logger.With("component", "poller", "topic", cfg.Topic, "partition", cfg.Partition, "token", cfg.Token)
	p := &part{
		cfg:     &cfg,
		results: make(chan result, cfg.Dispatch.max),
		mine:    map[string]*Msg{},
		cursor:  "0",
	}
	// Handlers run under Work, and under the lease while it is held: a
	// lost lease cancels them, a graceful handover does not (see exit).
	workCtx, cancel := context.WithCancel(cfg.Work)
	defer cancel()
	p.detach = context.AfterFunc(ctx, cancel)
	p.workCtx = workCtx
	cfg.Dispatch.loops.Add(1)
	defer cfg.Dispatch.loops.Add(-1)

	if stopped, err := p.takeOver(ctx, stop); stopped || err != nil {
		return err // nothing was held yet
	}
	return p.exit(ctx, p.loop(ctx, stop))
}

// loop turns until the lease's context ends, the lease can no longer be
// trusted, stop closes or another owner fenced the loop out, and returns
// why (see ended; ErrFenced from a claim or a move). A turn writes the
// outcomes whose linger is over, holds back under a pause or dispatches
// what is due, watches the givers, polls when a poll is due, runs the
// reconciler and the moves when theirs are, and sleeps until the next of
// these or a wake-up.
func (p *part) loop(ctx context.Context, stop <-chan struct{}) error {
	cfg := p.cfg
	timer := time.NewTimer(0)
	defer timer.Stop()
	now := cfg.Now()
	p.nextPoll = now
	nextReconcile := now.Add(clock.Jitter(cfg.ReconcileInterval))
	for {
		if ended, err := p.ended(ctx, stop); ended {
			return err
		}
		p.applyPending(ctx)
		now = cfg.Now()
		paused, pausedUntil, controls := p.pauseOrDispatch(ctx, now)
		if p.watchGivers(ctx, now) {
			p.nextPoll = now // what was returned is due
		}
		if err := p.pollWhenDue(ctx, now, paused); err != nil {
			return err
		}
		nextReconcile = p.reconcileWhenDue(ctx, now, nextReconcile)
		moveAt, err := p.move(ctx, now)
		if err != nil {
			return err
		}
		freed := p.slotsFreed(now, paused)
		p.tellIdle()
		wake := p.wakeAt(now, paused, pausedUntil, moveAt)
		p.sleep(ctx, stop, timer, wake, controls, freed)
	}
}

// ended reports, at the start of a turn, whether the loop ends, and why:
// the lease's context ended (its cause), the lease can no longer be
// trusted before its keep-alive noticed (ErrExpired: requeues and
// re-indexing are not fenced), or stop closed (nil).
func (p *part) ended(ctx context.Context, stop <-chan struct{}) (bool, error) {
	if ctx.Err() != nil {
		return true, context.Cause(ctx)
	}
	if !p.cfg.Valid() {
		return true, ErrExpired
	}
	select {
	case <-stop:
		return true, nil
	default:
		return false, nil
	}
}

// pollWhenDue polls when the next poll is due and the loop is not paused
// (a paused loop polls at once when the pause ends: see
// pauseOrDispatch). Its error is ErrFenced when another owner took over.
func (p *part) pollWhenDue(ctx context.Context, now time.Time, paused bool) error {
	if paused || now.Before(p.nextPoll) {
		return nil
	}
	p.nextPoll = farAway // lowered by what the poll itself schedules
	next, err := p.poll(ctx, now)
	if errors.Is(err, ErrFenced) {
		return err
	}
	p.nextPoll = minTime(p.nextPoll, next)
	return nil
}

// wakeAt returns when the loop's sleep ends unless something wakes it
// sooner: at the next poll (for a paused loop, at the pause's end if it
// is timed), or sooner at the next pass of the moves (moveAt, unless
// zero), the next watch of the givers, the next try of a recovery, the
// start of the first held message, or the end of the pending outcomes'
// linger.
func (p *part) wakeAt(now time.Time, paused bool, pausedUntil, moveAt time.Time) time.Time {
	wake := p.nextPoll
	if paused {
		wake = farAway
		if !pausedUntil.IsZero() {
			wake = pausedUntil // a timed pause ends by itself
		}
	}
	if !moveAt.IsZero() {
		wake = minTime(wake, moveAt)
	}
	if len(p.givers) > 0 {
		wake = minTime(wake, p.nextWatch)
	}
	if p.recovering {
		wake = minTime(wake, now.Add(100*time.Millisecond))
	}
	if at, ok := p.startAt(); ok && at.Before(wake) {
		wake = at
	}
	if len(p.pending) > 0 {
		// Coalescing outcomes: write them when the linger ends; after
		// a failed write, try again within 100 ms.
		w := now.Add(100 * time.Millisecond)
		if end := p.since.Add(ackLinger); end.After(now) {
			w = end
		}
		wake = minTime(wake, w)
	}
	return wake
}

// sleep ends a turn: it waits until wake, or until the lease's context
// ends, stop closes, a delivery's result comes (collected, and written
// unless it lingers), a wake-up comes (the loop polls at once), the
// topic's controls change (controls), the gate may grant again what it
// refused (the loop polls at once) or claim slots come back (freed: the
// loop claims what the bound left behind).
func (p *part) sleep(ctx context.Context, stop <-chan struct{}, timer *time.Timer, wake time.Time, controls, freed <-chan struct{}) {
	cfg := p.cfg
	timer.Reset(wake.Sub(cfg.Now()))
	select {
	case <-ctx.Done():
	case <-stop:
	case r := <-p.results:
		p.collect(ctx, r)
	case <-cfg.Wake:
		p.nextPoll = cfg.Now()
	case <-controls:
	case <-p.gateWake:
		p.gateWake, p.nextPoll = nil, cfg.Now()
	case <-freed:
		// Slots came back: claim what the bound left behind.
		if at, ok := p.claimAt(cfg.Now()); ok {
			p.nextPoll = minTime(p.nextPoll, at)
		}
	case <-timer.C:
	}
}

// farAway is a time no loop waits for.
var farAway = time.Unix(1<<40, 0)

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// RepairStore is what the loop's repairs of what a fault left behind need
// from storage: the in-flight messages whose visibility deadline passed
// (requeueExpired, from poll) and the reconciler's passes over the
// records (reconcile, from Run).
type RepairStore interface {
	Expired(ctx context.Context, tp store.TopicPartition, nowMS int64, limit int) ([]string, []*store.Record, []bool, error)
	Reconcile(ctx context.Context, tp store.TopicPartition, cursor string, count int, skip func(id string) bool, nowMS int64) (string, []string, error)
}

// requeueExpiredWhenDue requeues the in-flight messages whose visibility
// deadline passed (requeueExpired) when a look for them is due. Expired
// visibility deadlines are at least a second (the margin) past a
// handler's timeout: looking every few polls is soon enough. Once a look
// found none with nothing of the loop's own in flight, there is nothing
// to look for until the loop claims again.
func (p *part) requeueExpiredWhenDue(ctx context.Context, now time.Time) {
	if now.Before(p.nextExpired) || p.expiredSeen {
		return
	}
	p.requeueExpired(ctx, now)
	p.nextExpired = now.Add(expiredEvery(p.cfg.PollInterval))
}

// requeueExpired moves in-flight messages whose visibility deadline passed
// (a handler overran at a consumer that handed the partition over, or a
// write of its outcome failed) back to scheduled at their own due time,
// counting an attempt, or to dead when out of attempts; one whose
// delivery never started goes back without an attempt. A lost owner's
// messages come back sooner, at takeover (see recoverLost).
func (p *part) requeueExpired(ctx context.Context, now time.Time) {
	cfg := p.cfg
	ids, recs, started, err := cfg.Store.Expired(ctx, cfg.tp(), now.UnixMilli(), cfg.ClaimBatch)
	if err != nil {
		p.logErr("expired", err)
		return
	}
	p.expiredSeen = len(ids) == 0 && len(p.mine) == 0 && len(p.givers) == 0
	var moves []store.Move
	var tomb []string
	for i, id := range ids {
		if p.mine[id] != nil {
			continue // ours, still running or held: its outcome will come
		}
		if recs[i] == nil {
			tomb = append(tomb, id)
			continue
		}
		if recs[i].Corrupt != nil {
			moves = append(moves, p.corruptMove(id, recs[i], now))
			continue
		}
		if !started[i] {
			// No delivery of it started (a stale in-flight entry, or a
			// message claimed ahead by a consumer that died): back at its
			// own due, no attempt spent.
			moves = append(moves, store.Move{ID: id, Score: recs[i].Due})
			continue
		}
		mv := p.failMove(id, recs[i], now, "visibility deadline passed: the delivery did not finish (handler overran, or its consumer died)")
		if !mv.Dead {
			mv.Record.Due = recs[i].Due // a redelivery after a fault keeps its own due
			mv.Score = recs[i].Due
		}
		moves = append(moves, mv)
	}
	if len(tomb) > 0 {
		if err := cfg.Store.Drop(ctx, cfg.tp(), tomb); err != nil {
			p.logErr("drop tombstones", err)
		} else {
			p.count(EventTombstone, len(tomb))
		}
	}
	if len(moves) > 0 {
		p.writeReturns(ctx, moves, EventRedelivered, "requeue expired")
	}
}

// failMove records a failed attempt and returns the move to scheduled
// (after the backoff) or to dead.
func (p *part) failMove(id string, rec *store.Record, now time.Time, reason string) store.Move {
	cfg := p.cfg
	r := *rec
	if r.First != 0 {
		// A delivery started: the next debounce send opens a new window.
		r.First = store.Started
	}
	r.Attempts++
	r.LastError = reason
	r.Updated = max(now.UnixMilli(), rec.Updated)
	// Written only over the record that failed: one a send replaced
	// meanwhile is a newer event, scheduled at its own due instead.
	was := rec.Header()
	if r.Attempts >= p.maxAttempts(&r) {
		return store.Move{ID: id, Dead: true, Score: now.UnixMilli(), Record: &r, Was: was}
	}
	step := r.Attempts
	if step > len(cfg.Backoff) {
		step = len(cfg.Backoff)
	}
	r.Due = clock.CeilMS(now.Add(cfg.Backoff[step-1])).UnixMilli()
	return store.Move{ID: id, Score: r.Due, Record: &r, Was: was}
}

// maxAttempts is the deliveries rec may have: its own cap, or the
// consumer's.
func (p *part) maxAttempts(rec *store.Record) int {
	if rec.MaxAttempts > 0 {
		return rec.MaxAttempts
	}
	return p.cfg.MaxAttempts
}

// sweepPause is the rest between two full reconciler sweeps of a
// partition's records (passes within a sweep are ReconcileInterval apart),
// so an idle partition costs one HSCAN a minute. A record left out of every
// index is repaired within sweepPause + ceil(records/ReconcileBatch) passes.
func sweepPause(interval time.Duration) time.Duration { return 12 * interval }

// reconcileWhenDue runs a pass of the reconciler when one is due (next)
// and the lease is trusted, and returns when the next pass is due: a
// reconcile interval later, or a sweep pause after a sweep of every
// record ended (both with jitter).
func (p *part) reconcileWhenDue(ctx context.Context, now, next time.Time) time.Time {
	if now.Before(next) || !p.cfg.Valid() {
		return next
	}
	p.reconcile(ctx)
	pause := p.cfg.ReconcileInterval
	if p.cursor == "0" { // a sweep of every record ended: rest before the next
		pause = sweepPause(p.cfg.ReconcileInterval)
	}
	return now.Add(clock.Jitter(pause))
}

// reconcile runs a pass of the reconciler over the partition's records
// (store.Reconcile): it indexes again those a crash left out of every
// index, but the loop's own and, during a change of the partition count,
// those that belong elsewhere, and brings the next poll forward when it
// found some.
func (p *part) reconcile(ctx context.Context) {
	cfg := p.cfg
	// During a change of the partition count, the records that belong
	// elsewhere are the moves' to index (see move.go).
	var l store.Layout
	if cfg.Layout != nil {
		l = cfg.Layout()
	}
	moving := l.IsSource(cfg.Partition)
	next, repaired, err := cfg.Store.Reconcile(ctx, cfg.tp(), p.cursor, cfg.ReconcileBatch,
		func(id string) bool { return p.mine[id] != nil || moving && partition.For(id, l.Next) != cfg.Partition }, cfg.Now().UnixMilli())
	if err != nil {
		p.logErr("reconcile", err)
		return
	}
	p.cursor = next
	if len(repaired) > 0 {
		p.nextPoll = cfg.Now() // indexed again: due, or to be learnt by a look
		p.count(EventRepaired, len(repaired))
		cfg.Logger.Info("re-indexed records found in no index", "n", len(repaired))
	}
}

// writeMoves writes moves (see store.Moves) and makes sure the loop polls
// in time for those it scheduled: an idle partition's loop otherwise looks
// again only after an idle poll interval.
func (p *part) writeMoves(ctx context.Context, moves []store.Move) (gone int, err error) {
	gone, err = p.cfg.Store.Moves(ctx, p.cfg.tp(), moves)
	if err != nil {
		return gone, err
	}
	for _, m := range moves {
		if m.Was != nil {
			// A send may have replaced the record: its due may be any.
			p.nextPoll = p.cfg.Now()
		}
		if !m.Dead {
			p.nextPoll = minTime(p.nextPoll, time.UnixMilli(m.Score).Add(-p.cfg.PollInterval))
		}
	}
	return gone, nil
}

// writeReturns writes the moves of in-flight messages that are not the
// loop's own deliveries (expired, or a lost owner's) and counts them:
// those that went back to scheduled as ev, those that went to dead, and
// records gone meanwhile as tombstones. It logs a failed write as what,
// and reports whether the moves landed.
func (p *part) writeReturns(ctx context.Context, moves []store.Move, ev, what string) bool {
	gone, err := p.writeMoves(ctx, moves)
	if err != nil {
		p.logErr(what, err)
		return false
	}
	p.count(EventTombstone, gone)
	for _, m := range moves {
		if m.Dead {
			p.count(EventDead, 1)
		} else {
			p.count(ev, 1)
		}
	}
	return true
}

// tellIdle tells Config.Idle when the loop became idle or busy, or its
// quiet time changed.
func (p *part) tellIdle() {
	if p.cfg.Idle == nil {
		return
	}
	var until time.Time
	if p.idle && len(p.mine) == 0 && len(p.pending) == 0 && !p.recovering && len(p.givers) == 0 {
		until = p.quietUntil
		if until.IsZero() {
			until = time.UnixMilli(1)
		}
	}
	if !until.Equal(p.toldIdle) {
		p.toldIdle = until
		p.cfg.Idle(until)
	}
}
