package poller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// Msg is a claimed message on its way to a handler.
type Msg struct {
	ID        string
	Partition int
	Token     int64
	Due       time.Time
	Record    *store.Record
	part      *part
	index     int // in the held heap
	// state is msgQueued until a worker starts the message (msgStarted)
	// or its loop takes it back from the dispatcher's queue (msgRevoked).
	state atomic.Int32
	// revoked is set by the loop (and read only there) on a message it took
	// back: its claim slot is freed by the worker that dequeues it.
	revoked bool
	// start is when the topic's rate limit lets the message start, when
	// that is after its due (see Gate).
	start time.Time
	// slot: the message holds a slot of the topic's concurrency cap
	// until its outcome is settled (see Gate.Done).
	slot bool
	// Settled, when the HandleFunc sets it, is called once the outcome
	// of the delivery it started is settled: written, or left unwritten
	// as the loop ended (see Settlement). It is called at most once, by
	// the partition's loop, after the HandleFunc returned.
	Settled func(Settlement)
}

// Settlement is how the outcome of a delivery was settled, as
// Msg.Settled reports it.
type Settlement string

// Settlements.
const (
	SettledAck   Settlement = "ack"   // acked: the record removed
	SettledRetry Settlement = "retry" // back to scheduled, after its backoff
	SettledDead  Settlement = "dead"  // moved to the dead set
	// SettledKept: an ack the loop could not write before it ended,
	// handed to Config.Keep to be written once Redis answers.
	SettledKept Settlement = "kept"
	// SettledLeft: not written (the lease was lost, or the writes failed
	// until the loop ended): the message stays in flight, and the
	// partition's next owner delivers it again.
	SettledLeft Settlement = "left"
)

// at is when the message may start: its due, or later if the rate limit
// says so.
func (m *Msg) at() time.Time {
	if m.start.After(m.Due) {
		return m.start
	}
	return m.Due
}

// States of a Msg handed to the Dispatcher.
const (
	msgQueued int32 = iota
	msgStarted
	msgRevoked
)

// Attempt is the 1-based number of this delivery.
func (m *Msg) Attempt() int { return m.Record.Attempts + 1 }

// Outcome is what became of a message handed to the Dispatcher.
type Outcome int

// Outcomes.
const (
	Acked    Outcome = iota // the handler returned nil
	Failed                  // the handler returned an error or timed out
	Returned                // not started: shutdown or the delivery limit; goes back to scheduled
	Dropped                 // not started: the partition's lease could no longer be trusted
)

// HandleFunc runs one delivery under ctx, which ends at the handler
// timeout (Config.Timeout after the start, or up to 10 ms more: its
// cause is then ErrHandlerTimeout), when the partition's lease is lost,
// or at a hard shutdown. started is false when the message
// was not delivered (the consumer's delivery limit was reached).
type HandleFunc func(ctx context.Context, m *Msg) (started bool, err error)

// Dispatcher runs handlers for all partitions of a consumer on a fixed set
// of workers and bounds the messages claimed but not finished. Its methods
// are safe for concurrent use.
type Dispatcher struct {
	ready       chan *Msg
	max         int64
	handlers    int
	outstanding atomic.Int64
	loops       atomic.Int64 // partition loops running (see part.lead)
	handle      HandleFunc
	wg          sync.WaitGroup

	freeMu sync.Mutex
	freed  chan struct{} // closed at the next release; nil when nobody waits
}

// NewDispatcher starts concurrency workers. At most concurrency+prefetch
// messages are claimed and not yet finished at any time.
func NewDispatcher(concurrency, prefetch int, handle HandleFunc) *Dispatcher {
	d := &Dispatcher{
		ready:    make(chan *Msg, concurrency+prefetch),
		max:      int64(concurrency + prefetch),
		handlers: concurrency,
		handle:   handle,
	}
	for range concurrency {
		d.wg.Add(1)
		go d.work()
	}
	return d
}

// Close stops the workers once every queued message was handled, and
// waits for them. Call it after every partition loop has returned.
func (d *Dispatcher) Close() {
	close(d.ready)
	d.wg.Wait()
}

// reserve takes up to n claim slots and returns how many it took.
func (d *Dispatcher) reserve(n int) int {
	for {
		cur := d.outstanding.Load()
		free := d.max - cur
		if free <= 0 {
			return 0
		}
		take := min(int64(n), free)
		if d.outstanding.CompareAndSwap(cur, cur+take) {
			return int(take)
		}
	}
}

// release gives back n claim slots.
func (d *Dispatcher) release(n int) {
	if n <= 0 {
		return
	}
	d.outstanding.Add(-int64(n))
	d.freeMu.Lock()
	if d.freed != nil {
		close(d.freed)
		d.freed = nil
	}
	d.freeMu.Unlock()
}

// free returns the number of claim slots free now.
func (d *Dispatcher) free() int { return int(d.max - d.outstanding.Load()) }

// lowWater is the smallest claim worth its round trips when slots are
// short, and the acks a loop gathers before it writes them while more of
// its deliveries run: a quarter of the bound, at most batch. In a burst
// at the defaults (16 partitions sharing 1,056 slots) a claim and an ack
// then carry about 256 messages: 0.04 commands a message (see
// docs/benchmarks.md).
func (d *Dispatcher) lowWater(batch int) int { return max(1, min(batch, int(d.max/4))) }

// thin reports whether a loop short of slots should claim what is free
// at once rather than linger for a batch's worth: no claimed message
// waits for a handler, and the bound holds fewer than twice the handlers
// (Prefetch below Concurrency), so that a handler would idle while the
// loop waits. With a Prefetch above Concurrency (the defaults: 1,024 and
// 32) the loop lingers: a burst then claims and acks a quarter of the
// bound a round trip, and the round trips it saves are CPU the claims,
// the handlers and the backends share.
func (d *Dispatcher) thin() bool { return len(d.ready) == 0 && d.max < 2*int64(d.handlers) }

// whenFreed returns a channel closed at the next release of claim slots,
// for partition loops whose last claim was cut short by the bound.
func (d *Dispatcher) whenFreed() <-chan struct{} {
	d.freeMu.Lock()
	defer d.freeMu.Unlock()
	if d.freed == nil {
		d.freed = make(chan struct{})
	}
	return d.freed
}

func (d *Dispatcher) work() {
	defer d.wg.Done()
	for m := range d.ready {
		p := m.part
		// A stopping loop takes back what did not start (see exit);
		// so does the worker that meets such a message first. What
		// started runs, and its outcome is written by the loop, even
		// after a handover.
		if p.stopping.Load() {
			m.state.CompareAndSwap(msgQueued, msgRevoked)
		}
		if !m.state.CompareAndSwap(msgQueued, msgStarted) {
			d.release(1) // taken back: the slot is free once it left the queue
			continue
		}
		r := result{msg: m}
		switch {
		case p.stopping.Load(): // the loop began to stop as we took it: not now
			r.outcome = Returned
		case !p.valid():
			r.outcome = Dropped
		default:
			ctx, shared := p.handlerCtx(p.cfg.Now())
			started, err := d.handle(ctx, m)
			p.deadlines.release(shared)
			switch {
			case !started:
				r.outcome = Returned
			case err != nil:
				r.outcome, r.err = Failed, err
			default:
				r.outcome = Acked
			}
		}
		p.results <- r
	}
}
