package delayq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
)

// dueNow sends n messages due at once, one at a time and 20-100 ms apart
// at random (a fixed spacing would meet the owners' reads of the wake-up
// counters at a fixed phase), to
// an idle topic that two consumers with the defaults (an idle partition
// looks every 5 s) run, and returns each one's lateness: from its own due to its handler's
// start, on this process's clock.
func dueNow(t *testing.T, producer *Client, consumers *Client, topic string, n int) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	late := map[string]time.Duration{}
	h := func(_ context.Context, d *Delivery) error {
		at := time.Now()
		mu.Lock()
		late[d.ID] = at.Sub(d.Due)
		mu.Unlock()
		return nil
	}
	var ks []*Consumer
	for i := range 2 {
		ks = append(ks, runConsumer(t, consumers, ConsumerOptions{Topic: topic, ID: fmt.Sprintf("%s-%d", topic, i)}, h))
	}
	waitFor(t, 10*time.Second, "the partitions shared by the two consumers", func() bool {
		return len(ks[0].Stats().Owned) == 8 && len(ks[1].Stats().Owned) == 8
	})
	time.Sleep(1500 * time.Millisecond) // idle: past the polls of the start, into the idle looks
	ctx := context.Background()
	for i := range n {
		if _, err := producer.Enqueue(ctx, Message{Topic: topic, ID: fmt.Sprintf("now-%d", i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20*time.Millisecond + rand.N(80*time.Millisecond))
	}
	waitFor(t, 10*time.Second, "every message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(late) == n
	})
	mu.Lock()
	defer mu.Unlock()
	out := make([]time.Duration, 0, n)
	for _, d := range late {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// A message due now, sent to an idle topic, wakes its partition's owner:
// with the defaults (an idle partition looks every 5 s), two consumers start 50 such
// messages within 100 ms of their due, p99, through Twemproxy.
func TestWakeDueNow(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	c := newClient(t, env.Proxy, Options{})
	late := dueNow(t, c, c, "wake", 50)
	p99 := late[len(late)*99/100-1]
	testenv.Figure(t, "scenario=due-now messages=50 consumers=2 lateness_ms p50=%.1f p99=%.1f max=%.1f",
		ms(late[len(late)/2]), ms(p99), ms(late[len(late)-1]))
	if p99 > 100*time.Millisecond {
		t.Errorf("p99 lateness %v of messages due now, want within 100 ms", p99)
	}
}

// A producer whose wake-ups never arrive (killed between its write and
// the wake-up, or a proxy error then) delays its messages due now by at
// most an idle partition's poll interval (5 s, with 10% jitter): none is
// lost.
func TestWakeLost(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	changes := keys.Changes(DefaultNamespace)
	var mu sync.Mutex
	refused := 0
	producer := newClient(t, env.Proxy, Options{hook: func(cmd string, args []any) error {
		if (cmd == "EVALSHA" || cmd == "EVAL") && len(args) > 2 && args[2] == changes {
			mu.Lock()
			refused++
			mu.Unlock()
			return fmt.Errorf("crash before the wake-up: %w", portable.ErrInjected)
		}
		return nil
	}})
	consumers := newClient(t, env.Proxy, Options{})
	late := dueNow(t, producer, consumers, "wake-lost", 20)
	mu.Lock()
	defer mu.Unlock()
	if refused < 20 {
		t.Errorf("%d wake-ups refused, want one per message (20)", refused)
	}
	worst := late[len(late)-1]
	testenv.Figure(t, "scenario=due-now-lost-wakeups messages=20 lateness_ms p50=%.1f max=%.1f", ms(late[len(late)/2]), ms(worst))
	if bound := DefaultIdlePollInterval*11/10 + 300*time.Millisecond; worst > bound { // the look, its jitter, a claim
		t.Errorf("max lateness %v without wake-ups, want within an idle poll interval (%v)", worst, bound)
	}
}

// ms is d in milliseconds, for figures.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
