package delayq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// A client given two proxies, the first dead from the start, works from
// its start and reports the dead one; with both proxies of a running
// consumer down for five seconds, nothing is lost, the client resumes by
// itself and logs the outage once, not once per command, and its end
// once, with what it cost: nothing, as it was shorter than the lease.
func TestProxiesDeadAndBack(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, Proxies: 2})
	ctx := context.Background()

	c := newClient(t, "", Options{Addrs: []string{"127.0.0.1:1", env.Proxies[1]}})
	if _, err := c.Send(ctx, Message{Topic: "px", ID: "a", Delay: time.Hour}); err != nil {
		t.Fatalf("enqueue with the first proxy dead: %v", err)
	}
	if _, err := c.Get(ctx, "px", "a"); err != nil {
		t.Fatalf("get with the first proxy dead: %v", err)
	}
	h := c.Proxies()
	if len(h) != 2 || h[0].Up || h[0].LastErr == "" || !h[1].Up {
		t.Errorf("health with the first proxy dead: %+v", h)
	}
	if _, err := New(Options{Addr: "127.0.0.1:1", Addrs: []string{"127.0.0.1:2"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Addr and Addrs both set: %v, want ErrInvalid", err)
	}
	if _, err := New(Options{Addr: "127.0.0.1:1,nope"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a bad address in the list: %v, want ErrInvalid naming it", err)
	}

	var logs testenv.Buffer
	cc := newClient(t, "", Options{Addrs: env.Proxies, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec := newRecorder()
	k := runConsumer(t, cc, ConsumerOptions{Topic: "px2", PollInterval: 100 * time.Millisecond}, rec.handle)
	waitFor(t, 10*time.Second, "16 partitions owned", func() bool { return len(k.Stats().Owned) == 16 })
	var msgs []Message
	for i := range 100 {
		msgs = append(msgs, Message{Topic: "px2", ID: fmt.Sprintf("m%d", i), Delay: time.Second + time.Duration(i)*30*time.Millisecond})
	}
	mustBatch(t, c, msgs)
	env.StopProxyN(t, 0)
	env.StopProxyN(t, 1)
	time.Sleep(5 * time.Second) // the outage: shorter than the lease (10 s)
	env.StartProxyN(t, 0)
	env.StartProxyN(t, 1)
	waitFor(t, 20*time.Second, "every message delivered after the outage", func() bool { return rec.total() >= len(msgs) })
	for id, ds := range rec.seen {
		if len(ds) != 1 {
			t.Errorf("%s delivered %d times", id, len(ds))
		}
	}
	if n := strings.Count(logs.String(), `msg="outage: no address answers; waiting for one"`); n != 1 {
		t.Errorf("the outage of both proxies logged %d times, want once:\n%s", n, logs.String())
	}
	waitFor(t, 25*time.Second, "the outage's summary (a lease after its end)", func() bool { return strings.Contains(logs.String(), `msg="outage over"`) })
	if n := strings.Count(logs.String(), `msg="outage over"`); n != 1 || !strings.Contains(logs.String(), "leases_lost=0 partitions_retaken=0") {
		t.Errorf("the end of the outage logged %d times, or not as costing nothing:\n%s", n, logs.String())
	}
	waitFor(t, 10*time.Second, "both proxies reported up", func() bool {
		h := cc.Proxies()
		return h[0].Up && h[1].Up
	})
}

// With no address answering, a write of messages dials again for
// Options.RetryFor, then fails with ErrUnavailable saying how long it
// tried; a negative RetryFor fails at once. Other calls do not wait.
func TestEnqueueRetryFor(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		retryFor time.Duration
		min, max time.Duration
		says     string
	}{
		{300 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, "no address answered for 300ms"},
		{-1, 0, 200 * time.Millisecond, "connection refused"},
	} {
		c := newClient(t, "127.0.0.1:1", Options{RetryFor: tc.retryFor})
		for _, call := range []func() error{
			func() error { _, err := c.Send(ctx, Message{Topic: "rf", Body: []byte("x")}); return err },
			func() error {
				res, err := c.SendBatch(ctx, []Message{{Topic: "rf", ID: "a"}})
				if err == nil {
					err = res[0].Err // the topic's layout could not be read
				}
				return err
			},
		} {
			start := time.Now()
			err := call()
			took := time.Since(start)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "dial tcp 127.0.0.1:1") {
				t.Errorf("RetryFor %v: %v, want ErrUnavailable saying %q and the last dial's error", tc.retryFor, err, tc.says)
			}
			if took < tc.min || took > tc.max {
				t.Errorf("RetryFor %v: failed after %v, want between %v and %v", tc.retryFor, took, tc.min, tc.max)
			}
		}
		start := time.Now()
		if _, err := c.Get(ctx, "rf", "a"); !errors.Is(err, ErrUnavailable) || time.Since(start) > 200*time.Millisecond {
			t.Errorf("Get with no address answering: %v after %v, want ErrUnavailable at once", err, time.Since(start))
		}
	}
}
