package delayq

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
)

// Consumers of three topics made from one client read the three change
// counters together (with the wake-up counters of their partitions), one
// HMGET per tick, and none alone; a consumer of one
// of the topics joining from another client still makes the first hand a
// partition over at once, not at a heartbeat.
func TestWatchOneReadPerTick(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	var mu sync.Mutex
	var reads [][]any // the arguments of each read of the change counters
	changes := keys.Changes(DefaultNamespace)
	hook := func(cmd string, args []any) error {
		if len(args) > 0 && args[0] == changes && cmd != "HINCRBY" {
			mu.Lock()
			reads = append(reads, append([]any{cmd}, args[1:]...))
			mu.Unlock()
		}
		return nil
	}
	c := newClient(t, env.Proxy, Options{Partitions: 2, hook: hook})
	// Heartbeats far apart: only a change can move a partition soon.
	opts := ConsumerOptions{Lease: time.Minute, ChangePoll: 50 * time.Millisecond}
	var ks []*Consumer
	for i := range 3 {
		o := opts
		o.Topic, o.ID = fmt.Sprintf("watch%d", i), "a"
		ks = append(ks, runConsumer(t, c, o, func(context.Context, *Delivery) error { return nil }))
	}
	waitFor(t, 10*time.Second, "each consumer owning its topic's 2 partitions", func() bool {
		for _, k := range ks {
			if len(k.Stats().Owned) != 2 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	reads = nil
	mu.Unlock()
	start := time.Now()
	other := newClient(t, env.Proxy, Options{Partitions: 2})
	o := opts
	o.Topic, o.ID = "watch1", "b"
	k := runConsumer(t, other, o, func(context.Context, *Delivery) error { return nil })
	waitFor(t, 10*time.Second, "a partition handed over to the newcomer", func() bool {
		return len(k.Stats().Owned) == 1 && len(ks[1].Stats().Owned) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	elapsed := time.Since(start)
	if len(reads) == 0 {
		t.Error("no read of the change counters")
	}
	// A few reads of slack for the ticks at the edges of the window; three
	// topics read apart would take three a tick.
	if max := int(elapsed/opts.ChangePoll) + 4; len(reads) > max {
		t.Errorf("%d reads of the change counters in %v, want at most %d (one per tick)", len(reads), elapsed, max)
	}
	for _, r := range reads {
		// The three topics' counters, and the wake-up counters of the
		// partitions the client's consumers own.
		if r[0] != "HMGET" || !slices.Contains(r, any("watch0")) || !slices.Contains(r, any("watch1")) || !slices.Contains(r, any("watch2")) {
			t.Errorf("read %v, want one HMGET of the three topics and more", r)
			break
		}
	}
}
