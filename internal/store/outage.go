package store

import (
	"log/slog"
	"strings"
	"sync"
	"time"
)

// An outage is a time when no address of a store answers a dial: every
// proxy (or the one server) refuses, times out or is not ready. A process
// rides it out (its loops try again at their next turn, its leases are
// taken again once Redis answers), so it is logged as a whole, where each
// partition's failures and losses would fill the log: one error line
// when it starts, and one warning when it ends, with how long it lasted
// and what it cost the consumers of the process: the leases they lost and
// the partitions they took again since. The summary waits a lease (the
// longest of the process's consumers) after the end at least: a lease
// the outage cost may be noticed only after it ended, by a keep-alive or
// a heartbeat whose command was still waiting for its timeout, and its
// consumer's manager learns of the loss at its next round. Then it waits
// for the consumers to take their partitions again (a heartbeat or two
// after the lost leases expire), for a second lease at most (another
// process may take them first).
//
// In cluster mode (Conn.Cluster) an outage is a time when a node the
// client sends to does not answer: a dial or a connection to a master
// failed, or it said CLUSTERDOWN; it ends when that master answers again
// or a new slot map no longer names it (its replica took over). Before
// any map was read, it is a time when no seed answers.
//
// The lines are written only while someone waits for Redis: a consumer
// runs, or an enqueue retries (see WithRetry). A one-off command that
// fails returns its error, which says the same.
type Outage struct {
	log   *slog.Logger
	addrs string
	// cluster: the store routes over a Redis Cluster, whose outage is a
	// master that does not answer (or no seed, before the first map).
	cluster bool

	mu       sync.Mutex
	down     bool      // every address failed its last dial
	since    time.Time // when the outage began
	lastErr  error     // the last dial's
	logged   bool      // its start was logged: its end will be
	waiters  int       // consumers running and enqueues retrying
	leases   []time.Duration
	pending  bool // over, the summary not yet written
	ended    time.Time
	by       string // the address that answered first
	lost     int    // leases lost during the outage or since
	retaken  int    // partitions acquired since it ended, up to lost
	timer    *time.Timer
	timerGen int // the summary a timer is for
}

func newOutage(addrs []string, log *slog.Logger) *Outage {
	return &Outage{log: log, addrs: strings.Join(addrs, ",")}
}

// Wait registers something that waits for Redis during an outage: a
// consumer, with its lease's expiry, or an enqueue that retries (lease
// 0). When an outage is known and not logged yet, it is logged now. The
// returned func unregisters it. Safe for concurrent use.
func (o *Outage) Wait(lease time.Duration) (done func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waiters++
	if lease > 0 {
		o.leases = append(o.leases, lease)
	}
	if o.down && !o.logged {
		o.logStart()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.waiters--
			if lease > 0 {
				for i, l := range o.leases {
					if l == lease {
						o.leases = append(o.leases[:i], o.leases[i+1:]...)
						break
					}
				}
			}
		})
	}
}

// Quiet reports whether a logged outage runs or has just ended (its
// summary is not written yet): the losses it causes are counted there,
// and logged at debug level by whoever suffers them. Safe for
// concurrent use.
func (o *Outage) Quiet() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return (o.down && o.logged) || o.pending
}

// LeaseLost counts a lease lost, when Quiet. Safe for concurrent use.
func (o *Outage) LeaseLost() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if (o.down && o.logged) || o.pending {
		o.lost++
	}
}

// LeaseGained counts a partition taken again after an outage that cost
// leases, and writes the summary once all are. Safe for concurrent use.
func (o *Outage) LeaseGained() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.pending || o.retaken >= o.lost {
		return
	}
	o.retaken++
	if o.retaken >= o.lost && time.Since(o.ended) >= o.grace() {
		o.summary()
	}
}

// begin records that every address failed a dial, with err.
func (o *Outage) begin(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastErr = err
	if o.down {
		return
	}
	if o.pending { // the last one's summary first
		o.summary()
	}
	o.down, o.since, o.logged, o.lost, o.retaken = true, time.Now(), false, 0, 0
	if o.waiters > 0 {
		o.logStart()
	}
}

// end records that addr answered again.
func (o *Outage) end(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down {
		return
	}
	o.down = false
	if !o.logged {
		return
	}
	o.pending, o.ended, o.by = true, time.Now(), addr
	if len(o.leases) == 0 {
		o.summary()
		return
	}
	o.after(o.grace())
}

// after checks again in d whether the summary may be written.
func (o *Outage) after(d time.Duration) {
	if o.timer != nil {
		o.timer.Stop()
	}
	o.timerGen++
	gen := o.timerGen
	o.timer = time.AfterFunc(d, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if gen != o.timerGen || !o.pending {
			return
		}
		switch left := time.Until(o.ended.Add(2 * o.longest())); {
		case o.retaken >= o.lost || left <= 0:
			o.summary()
		default:
			o.after(left)
		}
	})
}

// longest returns the longest lease of the consumers waiting.
func (o *Outage) longest() time.Duration {
	var d time.Duration
	for _, l := range o.leases {
		d = max(d, l)
	}
	return d
}

// grace is how long after its end an outage may still be found to have
// cost a lease.
func (o *Outage) grace() time.Duration { return o.longest() }

// logStart writes the outage's first line.
func (o *Outage) logStart() {
	o.logged = true
	if o.cluster {
		o.log.Error("outage: a node of the cluster does not answer; waiting for it", "seeds", o.addrs, "err", o.lastErr)
		return
	}
	o.log.Error("outage: no address answers; waiting for one", "addrs", o.addrs, "err", o.lastErr)
}

// summary writes the line of an outage that ended.
func (o *Outage) summary() {
	o.pending = false
	o.timerGen++
	if o.timer != nil {
		o.timer.Stop()
	}
	o.log.Warn("outage over", "addr", o.by, "lasted", o.ended.Sub(o.since).Round(time.Millisecond),
		"leases_lost", o.lost, "partitions_retaken", o.retaken)
}

// close writes the summary of an outage that ended, if it waits.
func (o *Outage) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending {
		o.summary()
	}
}
