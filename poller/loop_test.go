package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
)

// The tests of the partition loop (Run) run it against a fresh
// redis-server through the real store.Store, as a consumer does (see
// the root package's pollerConfig), with a handler that records when
// each delivery started.

// loopTopic is the topic of every loop test: each has a server of its own.
const loopTopic = "loop"

// loopEnv is a fresh redis-server and a store.Store on it.
type loopEnv struct {
	t  *testing.T
	st *store.Store
}

func newLoopEnv(t *testing.T) *loopEnv {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: env.Backends[0]}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &loopEnv{t: t, st: st}
}

// enqueue adds messages ids to partition 0, due at due (to the
// millisecond, as the store keeps it), and returns that due.
func (e *loopEnv) enqueue(due time.Time, ids ...string) time.Time {
	e.t.Helper()
	dueMS, nowMS := due.UnixMilli(), time.Now().UnixMilli()
	msgs := make([]store.NewMessage, len(ids))
	for i, id := range ids {
		msgs[i] = store.NewMessage{ID: id, Record: &store.Record{Due: dueMS, Created: nowMS, Updated: nowMS, Body: []byte(id)}}
	}
	errs, err := e.st.Add(context.Background(), store.TopicPartition{Topic: loopTopic, P: 0}, msgs)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		e.t.Fatalf("enqueue %v: %v", ids, err)
	}
	return time.UnixMilli(dueMS)
}

// get returns where message id is (nil when it is gone: acked).
func (e *loopEnv) get(id string) *store.Found {
	e.t.Helper()
	f, err := e.st.Get(context.Background(), store.TopicPartition{Topic: loopTopic, P: 0}, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return f
}

// inState reports whether every one of ids is in state st.
func (e *loopEnv) inState(st store.State, ids ...string) bool {
	for _, id := range ids {
		if f := e.get(id); f == nil || f.State != st {
			return false
		}
	}
	return true
}

// scheduledAt fails the test unless message id is scheduled at due,
// with no attempt counted.
func (e *loopEnv) scheduledAt(id string, due time.Time) {
	e.t.Helper()
	f := e.get(id)
	if f == nil {
		e.t.Errorf("%s gone, want it scheduled at its due", id)
	} else if f.State != store.StateScheduled || f.Score != due.UnixMilli() || f.Record.Attempts != 0 {
		e.t.Errorf("%s: state %d at %d, %d attempts; want scheduled (%d) at its due %d with none",
			id, f.State, f.Score, f.Record.Attempts, store.StateScheduled, due.UnixMilli())
	}
}

// delivery is a delivery a test loop's handler saw start.
type delivery struct {
	id      string
	at      time.Time // on the test's clock
	attempt int
	lastErr string
}

// testLoop is one partition loop (Run) of a test, on partition 0.
type testLoop struct {
	e     *loopEnv
	cfg   Config // the test may change it until start
	valid atomic.Bool
	// handle, when set before start, runs each delivery (acked on nil).
	handle func(ctx context.Context, m *Msg) error

	stop     chan struct{}
	stopOnce sync.Once
	// unblock releases the handlers of blocking (see blocking): closed
	// by release, or by the cleanup before it waits for Run.
	unblock     chan struct{}
	unblockOnce sync.Once

	started bool          // start was called
	done    chan struct{} // closed when Run returned, with err set
	err     error
	abandon chan struct{}

	mu     sync.Mutex
	got    []delivery
	events map[string]int
}

// newLoop returns a loop of consumer with the fencing token token, set
// up as a consumer sets one up, with short intervals; start runs it.
// The test's cleanup stops it and waits for it.
func (e *loopEnv) newLoop(consumer string, token int64) *testLoop {
	t := e.t
	l := &testLoop{
		e: e, stop: make(chan struct{}), unblock: make(chan struct{}), done: make(chan struct{}),
		abandon: make(chan struct{}), events: map[string]int{},
	}
	l.valid.Store(true)
	work, cancel := context.WithCancel(context.Background())
	d := NewDispatcher(4, 16, l.deliver)
	l.cfg = Config{
		Topic: loopTopic, Partition: 0, Token: token, Consumer: consumer,
		Store: e.st, Dispatch: d, Valid: l.valid.Load, Work: work, Abandon: l.abandon,
		PollInterval: 100 * time.Millisecond, Timeout: time.Second, VisibilityMargin: time.Second,
		ReconcileInterval: time.Second, ReconcileBatch: 100, ClaimBatch: 16,
		MaxAttempts: 3, Backoff: []time.Duration{time.Second},
		Now: time.Now, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Count: l.count,
	}
	t.Cleanup(func() {
		defer d.Close()
		defer cancel()
		if !l.started {
			return // the test ended before it started the loop
		}
		l.stopNow()
		l.release() // a test that failed may have left its handlers blocked
		select {
		case <-l.done:
		case <-time.After(5 * time.Second):
			t.Errorf("loop of %s still running 5 s after its stop: abandoning its handlers", consumer)
			cancel()
			close(l.abandon)
			<-l.done
		}
	})
	return l
}

// start runs the loop in a goroutine.
func (l *testLoop) start() {
	cfg := l.cfg
	l.started = true
	go func() {
		defer close(l.done)
		l.err = Run(context.Background(), l.stop, cfg)
	}()
}

// stopNow closes the loop's stop channel (once).
func (l *testLoop) stopNow() { l.stopOnce.Do(func() { close(l.stop) }) }

// blocking makes every delivery of the loop run until release is
// called (then acked) or its context ends other than at the handler
// timeout (the lease lost): a handler that overruns its timeout, which
// the visibility deadline is there for. Call it before start.
func (l *testLoop) blocking() {
	l.handle = func(ctx context.Context, m *Msg) error {
		select {
		case <-l.unblock:
			return nil
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), ErrHandlerTimeout) {
				<-l.unblock
				return nil
			}
			return ctx.Err()
		}
	}
}

// release lets the deliveries blocking holds finish (once).
func (l *testLoop) release() { l.unblockOnce.Do(func() { close(l.unblock) }) }

// returned reports whether Run returned.
func (l *testLoop) returned() bool { return isClosed(l.done) }

// wait waits up to d for Run to return, and returns its error.
func (l *testLoop) wait(d time.Duration) error {
	l.e.t.Helper()
	select {
	case <-l.done:
		return l.err
	case <-time.After(d):
		l.e.t.Fatalf("Run did not return within %v", d)
		return nil
	}
}

func (l *testLoop) deliver(ctx context.Context, m *Msg) (bool, error) {
	at := time.Now()
	l.mu.Lock()
	l.got = append(l.got, delivery{id: m.ID, at: at, attempt: m.Attempt(), lastErr: m.Record.LastError})
	l.mu.Unlock()
	if l.handle != nil {
		return true, l.handle(ctx, m)
	}
	return true, nil
}

func (l *testLoop) count(event string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events[event] += n
}

// deliveries returns the deliveries started so far.
func (l *testLoop) deliveries() []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]delivery(nil), l.got...)
}

// event returns how many of event the loop counted.
func (l *testLoop) event(event string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events[event]
}

// delivered reports whether a delivery of each of ids started.
func (l *testLoop) delivered(ids ...string) bool {
	seen := map[string]bool{}
	for _, d := range l.deliveries() {
		seen[d.id] = true
	}
	for _, id := range ids {
		if !seen[id] {
			return false
		}
	}
	return true
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitFor polls cond every few milliseconds until it holds, and fails
// the test if it does not within timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holds polls cond every few milliseconds for d, and fails the test if
// it stops holding.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s: broken %v before the end of its %v", what, time.Until(end), d)
		}
	}
}

// testWriter writes a loop's log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// pauseSwitch is a Config.Pause a test turns on and off: each change
// closes the channel the last call returned.
type pauseSwitch struct {
	mu      sync.Mutex
	paused  bool
	changed chan struct{}
}

func newPauseSwitch(paused bool) *pauseSwitch {
	return &pauseSwitch{paused: paused, changed: make(chan struct{})}
}

func (s *pauseSwitch) pause(time.Time) (bool, time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused, time.Time{}, s.changed
}

func (s *pauseSwitch) set(paused bool) {
	s.mu.Lock()
	s.paused = paused
	old := s.changed
	s.changed = make(chan struct{})
	s.mu.Unlock()
	close(old)
}

// msgIDs returns n message ids with prefix.
func msgIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
