package delayq

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// A rate limit raised from 1/h to 1000/s acts within a second: the
// consumer does not wait out the hour its last refusal computed, nor
// need a restart.
func TestRateRaisedFromHourly(t *testing.T) {
	for _, low := range []float64{1.0 / 3600, 1.0 / 60} {
		t.Run(FormatRate(low), func(t *testing.T) {
			ctx := context.Background()
			const P, N = 4, 20
			c := newClient(t, testAddr(t), Options{Partitions: P})
			topic := "raised"
			s := newStarts(0)
			if _, err := c.Send(ctx, Message{Topic: topic, ID: "first", Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
			lim := Limits{Rate: low}
			if err := c.Admin().SetLimits(ctx, topic, lim); err != nil {
				t.Fatal(err)
			}
			k := runConsumer(t, c, ConsumerOptions{Topic: topic}, s.handle)
			seenLimits(t, k, lim)
			enqueueDueNow(t, c, topic, N)
			// The burst (1) goes at once; then the limit holds the rest.
			waitFor(t, 5*time.Second, "the burst delivered", func() bool { return s.finished.Load() >= 1 })
			time.Sleep(500 * time.Millisecond) // what the loops were refused, they wait for
			if n := s.finished.Load(); n != 1 {
				t.Fatalf("%d started under %s, want the burst of 1", n, FormatRate(low))
			}
			if err := c.Admin().SetLimits(ctx, topic, Limits{Rate: 1000}); err != nil {
				t.Fatal(err)
			}
			raised := time.Now()
			waitFor(t, 5*time.Second, "every message delivered", func() bool { return s.finished.Load() >= N })
			took := time.Since(raised)
			t.Logf("raised from %s to 1000/s: the other %d messages delivered %v after", FormatRate(low), N-1, took.Round(time.Millisecond))
			if took > time.Second {
				t.Errorf("raised from %s to 1000/s, the backlog took %v, want within 1 s", FormatRate(low), took)
			}
			s.check(t, N)
		})
	}
}

// A rate limit lowered from 1000/s to 2/s acts within a second too: the
// starts the fleet took ahead at the old rate are not a debt to pay at
// the new one (100 ms of 1000/s would be 50 s at 2/s).
func TestRateLoweredActs(t *testing.T) {
	ctx := context.Background()
	const P = 4
	c := newClient(t, testAddr(t), Options{Partitions: P})
	topic := "lowered"
	s := newStarts(0)
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "first", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, topic, Limits{Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	k := runConsumer(t, c, ConsumerOptions{Topic: topic, Concurrency: 64}, s.handle)
	seenLimits(t, k, Limits{Rate: 1000})
	enqueueDueNow2(t, c, topic, "x", 3000)
	waitFor(t, 5*time.Second, "some delivered", func() bool { return s.finished.Load() >= 500 })
	lowered := Limits{Rate: 2}
	if err := c.Admin().SetLimits(ctx, topic, lowered); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	seenLimits(t, k, lowered)
	time.Sleep(time.Until(t0.Add(3500 * time.Millisecond)))
	n := s.rate(t0.Add(time.Second), t0.Add(3500*time.Millisecond)) * 2.5
	t.Logf("lowered from 1000/s to 2/s: %.0f started from 1 s to 3.5 s after", n)
	if n < 3 || n > 7 {
		t.Errorf("lowered from 1000/s to 2/s: %.0f started from 1 s to 3.5 s after, want about 5", n)
	}
}

// enqueueDueNow2 writes n messages due at once with ids prefix00000...
func enqueueDueNow2(t *testing.T, c *Client, topic, prefix string, n int) {
	t.Helper()
	enqueueDue(t, c, topic, prefix, n, time.Time{})
}

// enqueueDue writes n messages due at at (zero: at once) with ids
// prefix00000...
func enqueueDue(t *testing.T, c *Client, topic, prefix string, n int, at time.Time) {
	t.Helper()
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Topic: topic, ID: fmt.Sprintf("%s%05d", prefix, i), At: at}
	}
	mustBatch(t, c, msgs)
}

// A burst of 50 cleared and a rate set again without one gets the
// default burst (1 at 5/s): the tokens the old burst left in the bucket
// do not start at once.
func TestBurstAfterClear(t *testing.T) {
	ctx := context.Background()
	const P = 4
	c := newClient(t, testAddr(t), Options{Partitions: P})
	topic := "burst-cleared"
	s := newStarts(0)
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "first"}); err != nil {
		t.Fatal(err)
	}
	big := Limits{Rate: 5, Burst: 50}
	if err := c.Admin().SetLimits(ctx, topic, big); err != nil {
		t.Fatal(err)
	}
	k := runConsumer(t, c, ConsumerOptions{Topic: topic}, s.handle)
	seenLimits(t, k, big)
	waitFor(t, 5*time.Second, "first delivered", func() bool { return s.finished.Load() == 1 })
	time.Sleep(time.Second) // the bucket fills towards its burst of 50
	if err := c.Admin().SetLimits(ctx, topic, Limits{}); err != nil {
		t.Fatal(err)
	}
	seenLimits(t, k, Limits{})
	lim := Limits{Rate: 5}
	if err := c.Admin().SetLimits(ctx, topic, lim); err != nil {
		t.Fatal(err)
	}
	seenLimits(t, k, lim)
	t0 := enqueueDueNow(t, c, topic, 30)
	waitFor(t, 5*time.Second, "the burst delivered", func() bool { return s.finished.Load() >= 2 })
	time.Sleep(time.Until(t0.Add(1500 * time.Millisecond)))
	first := s.rate(t0, t0.Add(300*time.Millisecond)) * 0.3
	all := s.rate(t0, t0.Add(1500*time.Millisecond)) * 1.5
	t.Logf("5/s burst 50, cleared, 5/s again: %.0f started in the first 300 ms, %.0f in 1.5 s", first, all)
	// The default burst (1), and what comes within the take's horizon.
	if first > 2 {
		t.Errorf("%.0f of 30 started within 300 ms at 5/s with the default burst of %d", first, DefaultBurst(5))
	}
	if all > 1+1.5*5+1 {
		t.Errorf("%.0f started within 1.5 s at 5/s", all)
	}
}

// skewedClient returns a client on addr whose clock is the real one plus
// *off (which the test may change as it runs), logging to log.
func skewedClient(t *testing.T, addr string, p int, off *atomic.Int64, log io.Writer) *Client {
	return newClient(t, addr, Options{Partitions: p, Now: func() time.Time { return time.Now().Add(time.Duration(off.Load())) },
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

// A consumer whose clock is ahead (by 5 s, by an hour) or behind neither
// stalls another consumer's share of the rate limit nor lets the fleet
// pass it; a skew beyond MaxClockSkew is warned about on both sides.
func TestRateLimitSkewedClock(t *testing.T) {
	for _, skew := range []time.Duration{0, 5 * time.Second, time.Hour, -time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			ctx := context.Background()
			const P, N, rate = 8, 700, 100
			addr := testAddr(t)
			var logA, logB testenv.Buffer
			var zero, off atomic.Int64
			off.Store(int64(skew))
			c := skewedClient(t, addr, P, &zero, &logA)
			cs := skewedClient(t, addr, P, &off, &logB)
			topic := "rated-skew"
			s := newStarts(5 * time.Millisecond)
			var byA, byB atomic.Int64
			// Due times are compared with each consumer's clock: the
			// messages are due two hours ago, by every clock of the test.
			if _, err := c.Send(ctx, Message{Topic: topic, ID: "first", Delay: 3 * time.Hour}); err != nil {
				t.Fatal(err)
			}
			lim := Limits{Rate: rate}
			if err := c.Admin().SetLimits(ctx, topic, lim); err != nil {
				t.Fatal(err)
			}
			ka := runConsumer(t, c, ConsumerOptions{Topic: topic, Concurrency: 8}, func(ctx context.Context, d *Delivery) error {
				byA.Add(1)
				return s.handle(ctx, d)
			})
			kb := runConsumer(t, cs, ConsumerOptions{Topic: topic, Concurrency: 8}, func(ctx context.Context, d *Delivery) error {
				byB.Add(1)
				return s.handle(ctx, d)
			})
			seenLimits(t, ka, lim)
			seenLimits(t, kb, lim)
			waitFor(t, 30*time.Second, "each consumer owns partitions", func() bool {
				return len(ka.Stats().Owned) > 0 && len(kb.Stats().Owned) > 0
			})
			t0 := time.Now()
			enqueueDue(t, c, topic, "m", N, t0.Add(-2*time.Hour))
			time.Sleep(time.Until(t0.Add(3 * time.Second)))
			r := s.rate(t0.Add(500*time.Millisecond), t0.Add(3*time.Second))
			a := float64(byA.Load())
			t.Logf("clock %v off: %.1f/s in 2.5 s of a limit of %d/s; %0.f started by the consumer on time, %d by the other", skew, r, rate, a, byB.Load())
			if r < 0.9*rate || r > 1.1*rate {
				t.Errorf("clock %v off: the fleet started %.1f/s under %d/s", skew, r, rate)
			}
			// The consumer on time owns about half the partitions: it
			// gets a share of the rate, not what the other leaves.
			if a < 0.1*rate*2.5 {
				t.Errorf("clock %v off: the consumer on time started %.0f in 3 s of %d/s", skew, a, rate)
			}
			waitFor(t, 20*time.Second, "every message delivered", func() bool { return s.finished.Load() >= N })
			s.check(t, N)
			ahead, behind := &logB, &logA // which log says which
			if skew < 0 {
				ahead, behind = behind, ahead
			}
			warned := strings.Contains(ahead.String(), "this process's clock is ahead") && strings.Contains(behind.String(), "this process's clock is behind")
			if big := skew > MaxClockSkew || skew < -MaxClockSkew; warned != big {
				t.Errorf("clock %v off: warned %v, want %v\nthe one ahead logged: %s\nthe one behind: %s", skew, warned, big, ahead, behind)
			}
		})
	}
}

// A consumer whose clock is ahead (by 5 s, by an hour) or behind does not
// free the slots others hold: the cap holds, and its throughput too.
func TestConcurrencyCapSkewedClock(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Second, time.Hour, -time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			ctx := context.Background()
			const P, N, hold, limit = 8, 120, 100 * time.Millisecond, 4
			addr := testAddr(t)
			c := newClient(t, addr, Options{Partitions: P})
			var off atomic.Int64
			off.Store(int64(skew))
			cs := skewedClient(t, addr, P, &off, io.Discard)
			topic := "capped-skew"
			s := newStarts(hold)
			if _, err := c.Send(ctx, Message{Topic: topic, ID: "first", Delay: 3 * time.Hour}); err != nil {
				t.Fatal(err)
			}
			lim := Limits{Concurrency: limit}
			if err := c.Admin().SetLimits(ctx, topic, lim); err != nil {
				t.Fatal(err)
			}
			ka := runConsumer(t, c, ConsumerOptions{Topic: topic, Concurrency: 8}, s.handle)
			kb := runConsumer(t, cs, ConsumerOptions{Topic: topic, Concurrency: 8}, s.handle)
			seenLimits(t, ka, lim)
			seenLimits(t, kb, lim)
			waitFor(t, 30*time.Second, "each consumer owns partitions", func() bool {
				return len(ka.Stats().Owned) > 0 && len(kb.Stats().Owned) > 0
			})
			t0 := time.Now()
			enqueueDue(t, c, topic, "m", N, t0.Add(-2*time.Hour))
			waitFor(t, 20*time.Second, "every message delivered", func() bool { return s.finished.Load() >= N })
			took := time.Since(t0)
			ideal := time.Duration(N) * hold / limit
			t.Logf("clock %v off, cap %d: %d messages in %v, at most %d at once", skew, limit, N, took.Round(time.Millisecond), s.maxRun.Load())
			if m := s.maxRun.Load(); m > limit {
				t.Errorf("clock %v off: %d deliveries ran at once under a cap of %d", skew, m, limit)
			}
			if took > ideal*3/2 {
				t.Errorf("clock %v off: took %v, want within 1.5x of %v", skew, took, ideal)
			}
			s.check(t, N)
		})
	}
}
