package delayq

import (
	"context"
	"testing"
	"time"
)

// A consumer owning P idle partitions sends about P commands per poll
// interval: one claim per partition per poll, plus a fifth of one for
// expired deadlines, a reconciler pass every ReconcileInterval and lease
// extensions every Lease/3.
func TestIdleCost(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		const P, poll = 16, 200 * time.Millisecond
		c := newClient(t, addr, Options{Partitions: P})
		k := runConsumer(t, c, ConsumerOptions{Topic: "idle", PollInterval: poll}, func(context.Context, *Delivery) error { return nil })
		waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
		// Let the start-up burst (acquisitions, fences) pass.
		before, start := c.Commands(), time.Now()
		waitFor(t, 10*time.Second, "4 s of idling", func() bool { return time.Since(start) >= 4*time.Second })
		perPoll := float64(c.Commands()-before) / (float64(time.Since(start)) / float64(poll))
		t.Logf("idle: %.1f commands per poll interval for %d partitions", perPoll, P)
		if perPoll > 1.5*P {
			t.Errorf("idle consumer sends %.1f commands per poll interval for %d partitions, want about %d", perPoll, P, P)
		}
	})
}
