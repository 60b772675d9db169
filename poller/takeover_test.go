package poller

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
)

// TestTakeOverRetries: a takeover that fails because the proxy is down
// is tried again while the lease holds, and succeeds once the proxy is
// back, with the fence raised to the loop's token; a stop, a lease that
// ran out or the lease's end ends the tries instead.
func TestTakeOverRetries(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, Proxies: 1})
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: env.Proxies[0]}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	var valid sync.Mutex
	expired := false
	newPart := func(token int64, log *testenv.Buffer) *part {
		return &part{cfg: &Config{
			Topic: "takeover.retry", Partition: 0, Token: token, Store: st, PollInterval: time.Second,
			Logger: slog.New(slog.NewTextHandler(log, nil)),
			Valid: func() bool {
				valid.Lock()
				defer valid.Unlock()
				return !expired
			},
		}}
	}
	type result struct {
		stopped bool
		err     error
	}
	start := func(p *part, ctx context.Context, stop chan struct{}) <-chan result {
		done := make(chan result, 1)
		go func() {
			stopped, err := p.takeOver(ctx, stop)
			done <- result{stopped, err}
		}()
		return done
	}
	waitLogged := func(log *testenv.Buffer, done <-chan result) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(log.String(), "take over") {
			select {
			case r := <-done:
				t.Fatalf("takeover returned %v, %v with the proxy down, want it to retry", r.stopped, r.err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no failed takeover logged with the proxy down\nlog: %s", log)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait := func(what string, done <-chan result) result {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("takeover still trying 10 s after %s", what)
		}
		return result{}
	}

	env.StopProxyN(t, 0)
	var log testenv.Buffer
	p := newPart(5, &log)
	done := start(p, context.Background(), make(chan struct{}))
	waitLogged(&log, done)
	env.StartProxyN(t, 0)
	if r := wait("the proxy came back", done); r.stopped || r.err != nil {
		t.Fatalf("takeover after the proxy came back: stopped %v, err %v; want a takeover", r.stopped, r.err)
	}
	if !p.recovering {
		t.Errorf("a takeover without a handover mark does not recover the in-flight messages")
	}
	fence, err := testenv.Do(env.Backends[0], "ZSCORE", keys.Scheduled(store.DefaultNamespace, "takeover.retry", 0), keys.Fence)
	if err != nil || fence != "$-5" {
		t.Errorf("fence's score %q (%v) after the takeover, want -5 (token 5)", fence, err)
	}

	env.StopProxyN(t, 0)
	stop := make(chan struct{})
	var log2 testenv.Buffer
	done = start(newPart(6, &log2), context.Background(), stop)
	waitLogged(&log2, done)
	close(stop)
	if r := wait("stop closed", done); !r.stopped || r.err != nil {
		t.Errorf("takeover after stop: stopped %v, err %v; want stopped", r.stopped, r.err)
	}

	var log3 testenv.Buffer
	done = start(newPart(6, &log3), context.Background(), make(chan struct{}))
	waitLogged(&log3, done)
	valid.Lock()
	expired = true
	valid.Unlock()
	if r := wait("the lease ran out", done); !errors.Is(r.err, ErrExpired) {
		t.Errorf("takeover once the lease ran out: stopped %v, err %v; want ErrExpired", r.stopped, r.err)
	}

	valid.Lock()
	expired = false
	valid.Unlock()
	lost := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	var log4 testenv.Buffer
	done = start(newPart(6, &log4), ctx, make(chan struct{}))
	waitLogged(&log4, done)
	cancel(lost)
	if r := wait("the lease ended", done); !errors.Is(r.err, lost) {
		t.Errorf("takeover once the lease ended: stopped %v, err %v; want the lease's cause", r.stopped, r.err)
	}
}
