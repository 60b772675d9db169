package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
)

// ErrTaken is returned by Acquire when another holder has the lease.
var ErrTaken = errors.New("lease: held by another owner")

// ErrLost is the cause of a Lease's Ctx when it expired before it could be
// extended.
var ErrLost = errors.New("lease: lost")

// ErrReleased is the cause of a Lease's Ctx after Release.
var ErrReleased = errors.New("lease: released")

// Defaults for Options.
const (
	DefaultExpiry = 10 * time.Second
	// IdleFactor: a quiet lease lasts IdleFactor × Expiry (see SetIdle),
	// and a member whose leases are all quiet heartbeats IdleFactor times
	// less often (see ManagerOptions.Heartbeat).
	IdleFactor = 4
)

// Options configures Acquire. Zero values take the defaults named.
type Options struct {
	// Expiry is the lease's time to live; it is extended every Expiry/3,
	// or every Expiry/2 while its holder says it is idle (see SetIdle).
	// Default DefaultExpiry (10s).
	Expiry time.Duration
	// IdleExpiry is the time to live a quiet lease is extended to, every
	// IdleExpiry/2 (see SetIdle). Default IdleFactor × Expiry.
	IdleExpiry time.Duration
	// Busy, when set, is called when a quiet lease stops being quiet:
	// its holder's membership should then expire as soon as the lease's
	// (see Manager). Optional.
	Busy func()
	// Margin: the lease counts as lost this long before Until.
	// Default Expiry/5.
	Margin time.Duration
	// Value is written in the lock; it must be unique per acquisition.
	// Required.
	Value string
	// Token returns a new fencing token; called once after each
	// successful acquisition. Required.
	Token func(ctx context.Context) (int64, error)
	// Logger receives the lease's loss, with the lease's name and token;
	// it names the component of its user. Default slog.Default() with
	// component=lease.
	Logger *slog.Logger
	// Errors, when set, logs the transient errors of the keep-alive
	// (extensions that failed and are retried) with the others of the
	// process, once per outage; the lease's loss is logged by Logger.
	Errors ErrorLogger
	// Quiet, when set and true, says that the process knows Redis is
	// unreachable and logs that outage as a whole, counting the leases it
	// costs: a loss is then logged at debug level, not as a warning.
	// Optional.
	Quiet func() bool
}

// Lease is a held lock with a fencing token. Its methods are safe for
// concurrent use.
type Lease struct {
	name   string
	token  int64
	margin time.Duration
	expiry time.Duration
	log    *slog.Logger
	errs   ErrorLogger
	quiet  func() bool
	mutex  *redsync.Mutex // touched only by Acquire, keepAlive and Release (after keepAlive ended)
	// long extends the same lock (its value) to idleExpiry: used by
	// keepAlive only.
	long       *redsync.Mutex
	idleExpiry time.Duration
	onBusy     func()

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	until time.Time

	idleUntil atomic.Int64  // unix ms given to SetIdle; 0: busy
	longNow   atomic.Bool   // the last extension was to idleExpiry
	failing   atomic.Bool   // the last extension failed (see Steady)
	changed   chan struct{} // SetIdle moves the next extension

	stop     chan struct{}
	done     chan struct{}
	release  sync.Once
	released error
}

// ErrorLogger logs transient errors, such as a process's partition loops
// share (poller.ErrLog): the first of an outage as a warning, the rest
// quieter.
type ErrorLogger interface {
	Log(msg string, err error, attrs ...any)
}

// logErr logs a transient error through Options.Errors, or as a warning.
func (l *Lease) logErr(msg string, err error) {
	if l.errs != nil {
		l.errs.Log(msg, err, "lease", l.name)
		return
	}
	l.log.Warn(msg, "err", err)
}

// logLoss logs the loss of the lease: as a warning, or at debug level
// during an outage that is logged as a whole (Options.Quiet).
func (l *Lease) logLoss(msg string, attrs ...any) {
	if l.quiet != nil && l.quiet() {
		l.log.Debug(msg, attrs...)
		return
	}
	l.log.Warn(msg, attrs...)
}

// nodeErr returns err without redsync's "node #0: " prefix: a lease has
// one node, the store's pool, whose errors name their address.
func nodeErr(err error) error {
	var re *redsync.RedisError
	if errors.As(err, &re) {
		return re.Err
	}
	return err
}

// Acquire tries once to take the lease called name. It returns ErrTaken
// (wrapped) if another owner holds it. The returned Lease's Ctx is a child
// of context.Background, not of ctx: ctx bounds only the acquisition.
func Acquire(ctx context.Context, rs *redsync.Redsync, name string, o Options) (*Lease, error) {
	if o.Expiry <= 0 {
		o.Expiry = DefaultExpiry
	}
	if o.Margin <= 0 {
		o.Margin = o.Expiry / 5
	}
	if o.IdleExpiry <= 0 {
		o.IdleExpiry = IdleFactor * o.Expiry
	}
	if o.Value == "" || o.Token == nil {
		return nil, errors.New("lease: Options.Value and Options.Token are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default().With("component", "lease")
	}
	m := rs.NewMutex(name,
		redsync.WithExpiry(o.Expiry),
		redsync.WithTries(1),
		redsync.WithGenValueFunc(func() (string, error) { return o.Value, nil }),
	)
	if err := m.TryLockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
			return nil, fmt.Errorf("%w: %s", ErrTaken, name)
		}
		return nil, fmt.Errorf("acquire %s: %w", name, nodeErr(err))
	}
	token, err := o.Token(ctx)
	if err != nil {
		m.UnlockContext(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("acquire %s: token: %w", name, err)
	}
	l := &Lease{
		name: name, token: token, margin: o.Margin, expiry: o.Expiry, mutex: m,
		long:       rs.NewMutex(name, redsync.WithExpiry(o.IdleExpiry), redsync.WithTries(1), redsync.WithValue(o.Value)),
		idleExpiry: o.IdleExpiry, onBusy: o.Busy,
		log:  o.Logger.With("lease", name, "token", token),
		errs: o.Errors, quiet: o.Quiet,
		until:   m.Until(),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		changed: make(chan struct{}, 1),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	go l.keepAlive()
	if !l.Valid() {
		l.Release(ctx)
		return nil, fmt.Errorf("acquire %s: expired while acquiring", name)
	}
	return l, nil
}

// Token returns the fencing token of this acquisition.
func (l *Lease) Token() int64 { return l.token }

// Ctx is cancelled when the lease is lost (cause ErrLost) or released
// (cause ErrReleased). Work done under the lease runs under it.
func (l *Lease) Ctx() context.Context { return l.ctx }

// Done is Ctx().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Until returns the time the lease expires unless extended.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Valid reports whether the lease may still be trusted: not lost nor
// released, and now before Until minus the margin. It reads the clock, so
// a process resumed after a long pause sees false at once, before the
// keep-alive goroutine has noticed. It reads time.Now, not the manager's
// ManagerOptions.Now: Until is redsync's, which measures the expiry from
// time.Now at each acquisition and extension, and both sides of the
// comparison must come from the same clock.
func (l *Lease) Valid() bool {
	return l.ctx.Err() == nil && time.Now().Before(l.Until().Add(-l.margin))
}

// SetIdle tells the lease whether the work under it is idle, and for how
// long: a zero until means busy (something held or running); otherwise
// nothing is known to fall due before until. An idle lease is extended
// every Expiry/2 instead of Expiry/3. A quiet one, idle with nothing due
// within IdleExpiry of its extension, is extended to IdleExpiry, every
// IdleExpiry/2: a holder that dies then keeps it up to IdleExpiry, which
// delays only what is written after its last extension, since whatever
// was known due falls due after the lease expires. A lease that stops
// being quiet is extended to Expiry at once if its last extension is
// Expiry/3 old, and tells Options.Busy.
func (l *Lease) SetIdle(until time.Time) {
	var ms int64
	if !until.IsZero() {
		ms = max(until.UnixMilli(), 1)
	}
	if l.idleUntil.Swap(ms) == ms {
		return
	}
	select {
	case l.changed <- struct{}{}:
	default:
	}
	if l.onBusy != nil && l.longNow.Load() && !l.quietAt(time.Now()) {
		l.onBusy()
	}
}

// quietAt reports whether an extension at now may be to IdleExpiry.
func (l *Lease) quietAt(now time.Time) bool {
	u := l.idleUntil.Load()
	return u != 0 && now.Add(l.idleExpiry).UnixMilli() < u
}

// Quiet reports whether the lease was last extended to IdleExpiry and is
// still quiet.
func (l *Lease) Quiet() bool {
	return l.longNow.Load() && l.quietAt(time.Now())
}

// every is the pause between the last extension and the next.
func (l *Lease) every() time.Duration {
	switch {
	case l.idleUntil.Load() == 0:
		return l.expiry / 3
	case l.Quiet():
		return l.idleExpiry / 2
	case l.longNow.Load():
		// Extended to IdleExpiry and quiet no more: back to Expiry at
		// once if the last extension is Expiry/3 old (see SetIdle).
		return l.expiry / 3
	}
	return l.expiry / 2
}

func (l *Lease) keepAlive() {
	defer close(l.done)
	last := time.Now() // of the acquisition or the last extension
	tick := time.NewTimer(l.every())
	defer tick.Stop()
	lost := time.NewTimer(time.Until(l.Until().Add(-l.margin)))
	defer lost.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-lost.C:
			if time.Now().Before(l.Until().Add(-l.margin)) { // extended meanwhile
				lost.Reset(time.Until(l.Until().Add(-l.margin)))
				continue
			}
			l.logLoss("lease lost", "until", l.Until())
			l.cancel(ErrLost)
			return
		case <-l.changed:
			tick.Reset(time.Until(last.Add(l.every())))
			continue
		case <-tick.C:
		}
		if !time.Now().Before(l.Until().Add(-l.margin)) {
			l.logLoss("lease lost before extension", "until", l.Until())
			l.cancel(ErrLost)
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), l.Until().Add(-l.margin))
		start := time.Now()
		long := l.quietAt(start)
		m := l.mutex
		if long {
			m = l.long
		}
		ok, err := m.ExtendContext(ctx)
		cancel()
		switch {
		case ok:
			l.mu.Lock()
			l.until = m.Until()
			l.mu.Unlock()
			l.failing.Store(false)
			l.longNow.Store(long)
			last = start
			lost.Reset(time.Until(l.Until().Add(-l.margin)))
			tick.Reset(time.Until(last.Add(l.every())))
		case err == nil || errors.Is(err, redsync.ErrExtendFailed) || isTaken(err):
			// The lock is gone or someone else holds it: no point waiting.
			l.logLoss("lease extension refused", "err", nodeErr(err))
			l.cancel(ErrLost)
			return
		default:
			l.logErr("lease extension failed, retrying", nodeErr(err))
			l.failing.Store(true)
			// Denser as the deadline nears: an outage that ends just
			// before it keeps the lease.
			tick.Reset(min(l.expiry/12, max(retryFloor, time.Until(l.Until().Add(-l.margin))/3)))
		}
	}
}

// retryFloor is the shortest wait before an extension that failed is
// tried again.
const retryFloor = 50 * time.Millisecond

// Steady reports whether the lease's last extension went through: false
// from a failed one (Redis out of reach) until one succeeds. Work under
// it had better not start meanwhile: a lease that is then lost cancels it.
func (l *Lease) Steady() bool { return !l.failing.Load() }

func isTaken(err error) bool {
	var taken *redsync.ErrTaken
	return errors.As(err, &taken)
}

// Release stops the keep-alive and unlocks the lease if it still holds it.
// Safe to call more than once and concurrently; later calls return the
// first call's result.
func (l *Lease) Release(ctx context.Context) error {
	l.release.Do(func() {
		close(l.stop)
		<-l.done
		lost := context.Cause(l.ctx) == ErrLost
		l.cancel(ErrReleased)
		if lost {
			return
		}
		if _, err := l.mutex.UnlockContext(ctx); err != nil && !errors.Is(err, redsync.ErrLockAlreadyExpired) && !isTaken(err) {
			l.released = fmt.Errorf("release %s: %w", l.name, nodeErr(err))
		}
	})
	return l.released
}
