package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/delayq/delayq/internal/clock"
)

// Beat is one heartbeat of a member (see Membership.Heartbeat). Times
// are unix ms.
type Beat struct {
	Topic, ID string
	Leaving   bool
	NowMS     int64
	ExpiresMS int64
	// GCMS: members whose heartbeat expired before NowMS - GCMS are
	// removed.
	GCMS int64
}

// Membership is what a Manager needs from storage: the topic's members
// ZSET, its change counter and the partitions' fencing tokens.
type Membership interface {
	// Heartbeat records b.ID as a member of b.Topic until b.ExpiresMS
	// (as a leaving one when b.Leaving is set: alive, but counted by no
	// one) and returns the ids of the members live at b.NowMS that count,
	// and the earliest expiry among the others (unix ms, 0 when there are
	// none).
	Heartbeat(ctx context.Context, b Beat) (live []string, nextExpiryMS int64, err error)
	Leave(ctx context.Context, topic, id string) error
	// Changed bumps the topic's change counter, which ManagerOptions.Changes
	// watches.
	Changed(ctx context.Context, topic string) error
	// NextToken draws a fencing token of partition p, no smaller than
	// nowMS.
	NextToken(ctx context.Context, topic string, p int, nowMS int64) (int64, error)
}

// Work runs partition p while the manager owns it, under l. It returns
// when l.Ctx() is done (the lease was lost) or stop is closed; in the
// latter case it hands the partition over gracefully and calls handedOver
// as soon as the next owner may take it, before it waits for whatever it
// still has running. A nil error means a graceful stop.
type Work func(p int, l *Lease, stop <-chan struct{}, handedOver func()) error

// DefaultChangePoll is how often a process reads the change counters of
// its topics (see ManagerOptions.Changes).
const DefaultChangePoll = 35 * time.Millisecond

// ManagerOptions configures a Manager. Fields are required unless a
// default is named.
type ManagerOptions struct {
	Topic string
	ID    string // the member's id
	// Partitions is how many partitions there are to share at the start.
	Partitions int
	// Span, when set, is called at the start of each round a change of
	// the topic started and of every third heartbeat's round (see
	// spanEvery), and returns how many partitions there are to share now:
	// the topic's count can change while the manager runs.
	// Partitions beyond it are handed over. Optional.
	Span func(ctx context.Context) (int, error)
	// Expiry of each partition's lease. Default DefaultExpiry (10s).
	Expiry time.Duration
	// Heartbeat: how often membership is renewed (it expires after 3) and
	// the share recomputed. A member whose leases are all quiet (see
	// Lease.SetIdle) and who holds its share renews every IdleFactor
	// heartbeats instead, its membership then expiring when its leases
	// do (IdleFactor × Expiry); it renews at once, at the usual expiry,
	// when one of its leases stops being quiet or it takes or hands over
	// a partition, and any member reads the
	// membership again when the earliest of the others' expiries passes.
	// Default Expiry/3.
	Heartbeat time.Duration
	// Changes is told when the topic's change counter moved (a member
	// joined or left, or gave a partition up), so that the manager acts
	// at once rather than at its next heartbeat. The process reads the
	// counters of all its topics together, every DefaultChangePoll or so.
	// Optional: without it, the manager acts at heartbeats only.
	Changes <-chan struct{}
	Members Membership
	Redsync *redsync.Redsync
	// Name returns the lease key of partition p.
	Name func(p int) string
	// Value returns the value written in a lease, unique per acquisition.
	Value func() string
	Work  Work
	// Stopping is called once when Run begins to stop (optional).
	Stopping func()
	// Gained and Lost are told of each lease gained, and each lost before
	// a graceful stop (optional): Lost once per lease, when it is lost or
	// when Work returns an error, whichever comes first.
	Gained, Lost func(p int)
	Logger       *slog.Logger // default slog.Default() with component=lease
	// Errors, when set, logs transient errors (heartbeats, acquisitions,
	// reads of the partition count and lease extensions that failed) with
	// the others of the process, once per outage (see ErrorLogger).
	// Optional.
	Errors ErrorLogger
	// Quiet, when set and true, says that the process knows Redis is
	// unreachable and logs that outage as a whole: the leases and
	// partitions lost are then logged at debug level (see Options.Quiet).
	// Optional.
	Quiet func() bool
	Now   func() time.Time // default time.Now
}

// Manager owns a member's fair share of a topic's partitions, in the way
// etcd's Election is built on its Session: it heartbeats the member into
// the topic, aims at its Share of the partitions (floor or ceil of
// partitions / live members, by its rank among them), acquires
// free ones (each a Lease with a fencing token) and hands extras over,
// at every heartbeat and whenever the topic's change counter moves, and
// runs Work for each partition it owns. Its methods are safe for
// concurrent use.
type Manager struct {
	o   ManagerOptions
	log *slog.Logger
	wg  sync.WaitGroup

	mu     sync.Mutex
	n      int // partitions to share
	owned  map[int]*owned
	live   []string  // members seen at the last heartbeat
	target int       // the share computed then
	next   time.Time // the earliest expiry of the others seen then
	stop   bool

	busy chan struct{} // a lease stopped being quiet
}

// owned is a partition the manager holds.
type owned struct {
	lease     *Lease
	stop      chan struct{} // closed to hand the partition over
	releasing bool          // stop was closed
}

// NewManager validates o and returns a Manager; Run starts it.
func NewManager(o ManagerOptions) (*Manager, error) {
	if o.Expiry <= 0 {
		o.Expiry = DefaultExpiry
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = o.Expiry / 3
	}
	if o.Logger == nil {
		o.Logger = slog.Default().With("component", "lease")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Topic == "" || o.ID == "" || o.Partitions < 1 || o.Members == nil || o.Redsync == nil ||
		o.Name == nil || o.Value == nil || o.Work == nil {
		return nil, errors.New("lease: ManagerOptions needs Topic, ID, Partitions, Members, Redsync, Name, Value and Work")
	}
	return &Manager{o: o, log: o.Logger, n: o.Partitions, owned: map[int]*owned{}, busy: make(chan struct{}, 1)}, nil
}

// Owned returns the partitions owned now, in order.
func (m *Manager) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]int, 0, len(m.owned))
	for p := range m.owned {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	return ps
}

// Run manages the partitions until ctx is done, then stops gracefully:
// it leaves the fair share (as a leaving member, so that the others take
// over at once), hands every partition over, heartbeats while their Work
// finishes, then leaves the topic's members. It returns when every Work
// has returned.
//
// The commands of a round run under a context of their own, bounded by a
// heartbeat, not under ctx: a command cut off when ctx ends would close
// its connection in the middle of a reply (the proxy counts that as a
// client error).
func (m *Manager) Run(ctx context.Context) {
	o := m.o
	round := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), o.Heartbeat)
	}
	joined := false
	tick := time.NewTimer(0)
	defer tick.Stop()
	for beats := 0; ; {
		changed := false
		select {
		case <-ctx.Done():
			m.stopAll()
			return
		case <-o.Changes:
			changed = true
		case <-m.busy:
		case <-tick.C:
			beats++
		}
		rctx, cancel := round()
		if changed || beats%spanEvery == 1 {
			m.span(rctx)
		}
		every := m.beatEvery()
		target := m.share(rctx, false, every)
		if !joined && ctx.Err() == nil {
			joined = true // tell the others to share with us now
			m.changed(rctx)
		}
		m.releaseExtras(target)
		short := m.acquire(ctx, rctx, target)
		cancel()
		if every > o.Heartbeat && m.beatEvery() < every {
			// The membership was renewed for quiet leases, and the round
			// took a partition (busy until its lease says otherwise) or
			// handed one over: renewed for the usual 3 heartbeats at
			// once, as when a lease stops being quiet, so that a death
			// now is counted out as soon as the new lease expires.
			m.leaseBusy()
		}
		next := m.untilNext(every)
		if short {
			next = min(next, clock.Jitter(o.Heartbeat/takenRetry))
		}
		tick.Reset(next)
	}
}

// takenRetry: a member short of its share that found partitions still
// leased (a dead owner's lease running out) tries again after
// Heartbeat/takenRetry rather than a heartbeat, so that it takes them
// over soon after they expire.
const takenRetry = 4

// beatEvery is the pause between this round's heartbeat and the next:
// Heartbeat, or IdleFactor × Heartbeat while the member holds its share and its
// leases are all quiet (see ManagerOptions.Heartbeat).
func (m *Manager) beatEvery() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.live) == 0 || m.holding() != m.target { // not joined yet, or short of its share
		return m.o.Heartbeat
	}
	for _, w := range m.owned {
		if w.releasing || !w.lease.Quiet() {
			return m.o.Heartbeat
		}
	}
	return IdleFactor * m.o.Heartbeat
}

// untilNext is the pause before the next round: about every, or until
// just after the earliest of the other members' expiries, when that comes
// first (a member that died is then counted out at once).
func (m *Manager) untilNext(every time.Duration) time.Duration {
	d := clock.Jitter(every)
	m.mu.Lock()
	next := m.next
	m.mu.Unlock()
	if !next.IsZero() {
		d = min(d, max(next.Sub(m.o.Now())+50*time.Millisecond, 50*time.Millisecond))
	}
	return d
}

// leaseBusy is told by a lease that stopped being quiet: the membership,
// renewed for 9 heartbeats, is renewed for 3 at once.
func (m *Manager) leaseBusy() {
	select {
	case m.busy <- struct{}{}:
	default:
	}
}

// spanEvery: the manager reads the partition count (Span) at every round
// a change started, and at every spanEvery-th heartbeat besides, in case
// the signal of a change was lost.
const spanEvery = 3

// stopAll is Run's graceful stop.
func (m *Manager) stopAll() {
	bg := context.Background()
	m.share(bg, true, m.o.Heartbeat)
	m.mu.Lock()
	m.stop = true
	for _, w := range m.owned {
		if !w.releasing {
			w.releasing = true
			close(w.stop)
		}
	}
	m.mu.Unlock()
	if m.o.Stopping != nil {
		m.o.Stopping()
	}
	drained := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(drained)
	}()
	beat := time.NewTicker(m.o.Heartbeat)
	for waiting := true; waiting; {
		select {
		case <-drained:
			waiting = false
		case <-beat.C:
			m.share(bg, true, m.o.Heartbeat)
		}
	}
	beat.Stop()
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	if err := m.o.Members.Leave(ctx, m.o.Topic, m.o.ID); err != nil {
		m.log.Warn("leave membership", "err", err)
	}
	m.changed(ctx)
}

// logErr logs a transient error through ManagerOptions.Errors, or as a
// warning.
func (m *Manager) logErr(msg string, err error, attrs ...any) {
	if m.o.Errors != nil {
		m.o.Errors.Log(msg, err, append(attrs, "topic", m.o.Topic)...)
		return
	}
	m.log.Warn(msg, append(attrs, "err", err)...)
}

// span reads how many partitions there are to share now (see
// ManagerOptions.Span), keeping the last count when it cannot.
func (m *Manager) span(ctx context.Context) {
	if m.o.Span == nil {
		return
	}
	n, err := m.o.Span(ctx)
	if err == nil && n < 1 {
		err = fmt.Errorf("%d partitions to share", n)
	}
	if err != nil {
		m.logErr("read the partition count", err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n != m.n {
		m.log.Info("partitions to share changed", "from", m.n, "to", n)
		m.n = n
	}
}

// changed bumps the topic's change counter, so that the other members
// look at membership and free partitions at once.
func (m *Manager) changed(ctx context.Context) {
	if err := m.o.Members.Changed(ctx, m.o.Topic); err != nil {
		m.logErr("signal a change", err)
	}
}

// share heartbeats the member, its membership expiring after 3 × every,
// and returns its fair share of partitions. When the heartbeat fails it
// keeps the last view of the members.
func (m *Manager) share(ctx context.Context, leaving bool, every time.Duration) int {
	o := m.o
	now := o.Now()
	live, next, err := o.Members.Heartbeat(ctx, Beat{Topic: o.Topic, ID: o.ID, Leaving: leaving, NowMS: now.UnixMilli(),
		ExpiresMS: now.Add(3 * every).UnixMilli(), GCMS: time.Hour.Milliseconds()})
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next = time.Time{}
	if err == nil && next > 0 {
		m.next = time.UnixMilli(next)
	}
	if err != nil {
		m.logErr("heartbeat", err)
		if leaving {
			return 0
		}
		return m.target
	}
	if leaving {
		m.live, m.target = live, 0
		return 0
	}
	rank := Rank(live, o.ID)
	if rank < 0 { // not seen yet: count itself in
		live = append(live, o.ID)
		rank = Rank(live, o.ID)
	}
	target := Share(m.n, len(live), rank)
	if len(live) != len(m.live) || target != m.target {
		m.log.Info("members changed", "live", len(live), "share", target)
	}
	m.live, m.target = live, target
	return target
}

// holding returns how many partitions are owned and not being handed over.
func (m *Manager) holding() int {
	n := 0
	for _, w := range m.owned {
		if !w.releasing {
			n++
		}
	}
	return n
}

// releaseExtras hands over the partitions beyond the count to share,
// then partitions above target, chosen at random.
func (m *Manager) releaseExtras(target int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var beyond, above []int
	defer func() {
		if len(beyond) > 0 {
			slices.Sort(beyond)
			m.log.Info("handing partitions over: beyond the partition count", "partitions", beyond, "count", m.n)
		}
		if len(above) > 0 {
			slices.Sort(above)
			m.log.Info("handing partitions over", "partitions", above, "share", target)
		}
	}()
	for p, w := range m.owned {
		if p >= m.n && !w.releasing {
			w.releasing = true
			close(w.stop)
			beyond = append(beyond, p)
		}
	}
	extra := m.holding() - target
	if extra <= 0 {
		return
	}
	ps := make([]int, 0, len(m.owned))
	for p, w := range m.owned {
		if !w.releasing {
			ps = append(ps, p)
		}
	}
	rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	for _, p := range ps[:extra] {
		w := m.owned[p]
		w.releasing = true
		close(w.stop)
		above = append(above, p)
	}
}

// acquire tries, once each, partitions the member does not own until it
// holds target or stop is done, and starts Work for each one it gets; its
// commands run under ctx. short reports that it ended short of target,
// with partitions still leased to others.
func (m *Manager) acquire(stop, ctx context.Context, target int) (short bool) {
	o := m.o
	m.mu.Lock()
	n := m.n
	m.mu.Unlock()
	var got []int
	defer func() {
		if len(got) > 0 {
			slices.Sort(got)
			m.mu.Lock()
			owned := len(m.owned)
			m.mu.Unlock()
			m.log.Info("partitions acquired", "partitions", got, "owned", owned, "share", target)
		}
	}()
	for _, p := range rand.Perm(n) {
		if stop.Err() != nil || ctx.Err() != nil {
			return false
		}
		m.mu.Lock()
		_, mine := m.owned[p]
		full := m.holding() >= target
		m.mu.Unlock()
		if full {
			return false
		}
		if mine {
			continue
		}
		l, err := Acquire(ctx, o.Redsync, o.Name(p), Options{
			Expiry: o.Expiry,
			Value:  o.Value(),
			Token: func(ctx context.Context) (int64, error) {
				return o.Members.NextToken(ctx, o.Topic, p, o.Now().UnixMilli())
			},
			Logger: o.Logger, Errors: o.Errors, Quiet: o.Quiet, Busy: m.leaseBusy,
		})
		if err != nil {
			if errors.Is(err, ErrTaken) {
				short = true
			} else {
				m.logErr("acquire partition", err, "partition", p)
			}
			continue
		}
		w := &owned{lease: l, stop: make(chan struct{})}
		m.mu.Lock()
		if m.stop { // Run is stopping: do not start
			m.mu.Unlock()
			l.Release(ctx)
			return false
		}
		m.owned[p] = w
		m.wg.Add(1)
		m.mu.Unlock()
		if o.Gained != nil {
			o.Gained(p)
		}
		m.log.Debug("partition acquired", "partition", p, "token", l.Token())
		got = append(got, p)
		go m.run(p, w)
	}
	return short
}

// run runs Work for an owned partition, and releases the lease when the
// partition is handed over or Work returns.
func (m *Manager) run(p int, w *owned) {
	defer m.wg.Done()
	l := w.lease
	var once sync.Once
	release := func(signal bool) {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := l.Release(ctx); err != nil {
				m.logErr("release partition", err, "partition", p)
			}
			m.mu.Lock()
			if m.owned[p] == w {
				delete(m.owned, p)
			}
			m.mu.Unlock()
			if signal {
				m.changed(ctx)
				m.log.Debug("partition handed over", "partition", p, "token", l.Token())
			}
		})
	}
	// Lost is told when the lease is lost, not when Work has wound down:
	// during an outage Work may wait for Redis before it returns, and the
	// outage's summary counts the leases it cost as they go.
	var lostOnce sync.Once
	tellLost := func() {
		if m.o.Lost != nil {
			lostOnce.Do(func() { m.o.Lost(p) })
		}
	}
	go func() {
		<-l.Done()
		if context.Cause(l.Ctx()) == ErrLost {
			tellLost()
		}
	}()
	err := m.o.Work(p, l, w.stop, func() { release(true) })
	release(false)
	if err != nil {
		tellLost()
		attrs := []any{"partition", p, "token", l.Token(), "err", err}
		if m.o.Quiet != nil && m.o.Quiet() {
			m.log.Debug("partition lost", attrs...)
			return
		}
		m.log.Warn("partition lost", attrs...)
	}
}
