package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// A consumer owning P idle partitions looks at each once per idle poll
// interval, not once per poll interval: P looks per IdlePollInterval, P
// lease extensions per Lease/2, plus the client's read of the change and
// wake-up counters every ChangePoll, a heartbeat and a reconciler pass.
func TestIdleCost(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		const P, poll, idle = 16, 100 * time.Millisecond, time.Second
		c := newClient(t, addr, Options{Partitions: P})
		k := runConsumer(t, c, ConsumerOptions{Topic: "idle", PollInterval: poll, IdlePollInterval: idle}, func(context.Context, *Delivery) error { return nil })
		waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
		// Let the start-up burst (acquisitions, fences, first claims) pass.
		time.Sleep(2 * idle)
		before, start := c.Commands(), time.Now()
		waitFor(t, 10*time.Second, "4 s of idling", func() bool { return time.Since(start) >= 4*time.Second })
		secs := time.Since(start).Seconds()
		perSec := float64(c.Commands()-before) / secs
		want := P/idle.Seconds() + P/(DefaultLease/2).Seconds() + 1/DefaultChangePoll.Seconds()
		t.Logf("idle: %.1f commands a second for %d partitions, about %.0f expected", perSec, P, want)
		// Polling each partition every poll interval would cost P/poll
		// (160 a second) more.
		if perSec > 1.5*want {
			t.Errorf("idle consumer sends %.1f commands a second for %d partitions, want about %.0f", perSec, P, want)
		}
	})
}

// An idle poll interval longer than what producers' wake-ups cover is
// refused, naming the value.
func TestIdlePollIntervalBound(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	c := newClient(t, env.Backends[0], Options{})
	h := func(context.Context, *Delivery) error { return nil }
	_, err := c.NewConsumer(ConsumerOptions{Topic: "t", IdlePollInterval: 6 * time.Second}, h)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "IdlePollInterval 6s") {
		t.Fatalf("IdlePollInterval 6s: got %v, want ErrInvalid naming it", err)
	}
	if _, err := c.NewConsumer(ConsumerOptions{Topic: "t", IdlePollInterval: DefaultIdlePollInterval}, h); err != nil {
		t.Fatalf("IdlePollInterval %v: %v", DefaultIdlePollInterval, err)
	}
}
