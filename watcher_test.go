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

// Consumers of three topics made from one client read the changes' version
// once per tick, and the three change counters together (with the
// wake-up counters of their partitions) in one HMGET when it moved, and
// none alone; a consumer of one of the topics joining from another client
// still makes the first hand a partition over at once, not at a
// heartbeat; while nothing changes, a tick reads the version only.
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
	// count returns the reads of the version and of the counters so far,
	// checking what each read.
	count := func() (versions, counters int) {
		t.Helper()
		for _, r := range reads {
			switch {
			case r[0] == "HGET" && len(r) == 2 && r[1] == keys.VersionField:
				versions++
			case r[0] == "HMGET" && slices.Contains(r, any("watch0")) && slices.Contains(r, any("watch1")) && slices.Contains(r, any("watch2")):
				// The three topics' counters, and the wake-up counters of
				// the partitions the client's consumers own.
				counters++
			default:
				t.Fatalf("read %v, want an HGET of the version or one HMGET of the three topics and more", r)
			}
		}
		return versions, counters
	}
	mu.Lock()
	elapsed := time.Since(start)
	versions, counters := count()
	if counters == 0 {
		t.Error("no read of the change counters after a change")
	}
	// A few reads of slack for the ticks at the edges of the window; three
	// topics read apart would take three a tick.
	if max := int(elapsed/opts.ChangePoll) + 4; versions > max || counters > versions+1 {
		t.Errorf("%d reads of the version and %d of the counters in %v, want at most %d (one per tick), the counters at most as often", versions, counters, elapsed, max)
	}
	reads = nil
	mu.Unlock()
	// ticks waits for n reads of the version since reads was last reset.
	ticks := func(n int, what string) {
		waitFor(t, 10*time.Second, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			v, _ := count()
			return v >= n
		})
	}
	// The last bumps of the handover (the giver's, after its release)
	// pass within a few ticks.
	ticks(5, "5 ticks")
	mu.Lock()
	reads = nil
	mu.Unlock()
	ticks(20, "20 ticks with nothing changing")
	mu.Lock()
	defer mu.Unlock()
	if _, counters := count(); counters != 0 {
		t.Errorf("%d reads of the counters while nothing changed, want none", counters)
	}
}
