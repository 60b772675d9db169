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

// seenPause waits until consumer k follows its topic's pause as want.
func seenPause(t *testing.T, k *Consumer, want bool) {
	t.Helper()
	waitFor(t, 2*time.Second, fmt.Sprintf("consumer sees paused=%v", want), func() bool { return k.ctrl.pausedAt(time.Now()) == want })
}

// While a topic is paused no delivery starts, whatever falls due; after
// Resume every message is delivered once, none before its due; stats and
// partitions show the pause.
func TestPauseHoldsDue(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const P, N = 4, 200
		c := newClient(t, addr, Options{Partitions: P})
		topic := "paused"
		rec := newRecorder()
		k := runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
		waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
		if err := c.Admin().Pause(ctx, topic, PauseOptions{}); err != nil {
			t.Fatal(err)
		}
		seenPause(t, k, true)
		start := time.Now()
		due := map[string]time.Time{}
		for i := range N {
			d := time.Duration(i%16) * 100 * time.Millisecond
			id := fmt.Sprintf("m%03d", i)
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id, Delay: d}); err != nil {
				t.Fatal(err)
			}
			due[id] = start.Add(d)
		}
		ts, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !ts.Pause.Paused || ts.Pause.PausedUntil != nil {
			t.Errorf("stats of a paused topic: pause %+v, want paused until resumed", ts.Pause)
		}
		info, err := c.Inspector().Partitions(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Pause.Paused {
			t.Errorf("partitions of a paused topic: pause %+v, want paused", info.Pause)
		}
		// Everything falls due during the pause (the last 1.5 s after the
		// start), and a poll interval more passes: nothing may start.
		time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
		if n := rec.total(); n != 0 {
			t.Fatalf("%d deliveries started while the topic was paused", n)
		}
		if ts, err = c.Inspector().Stats(ctx, topic); err != nil {
			t.Fatal(err)
		}
		if ts.Scheduled != N || ts.InFlight != 0 {
			t.Errorf("paused: %d scheduled, %d in flight, want %d and 0", ts.Scheduled, ts.InFlight, N)
		}
		resumed := time.Now()
		if err := c.Admin().Resume(ctx, topic); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "every message delivered after resume", func() bool { return rec.total() >= N })
		t.Logf("%d messages delivered %v after resume", N, time.Since(resumed).Round(time.Millisecond))
		time.Sleep(200 * time.Millisecond) // a second delivery would show by now
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for id, at := range rec.at {
			if len(at) != 1 {
				t.Errorf("%s delivered %d times", id, len(at))
			}
			if at[0].Before(due[id]) || at[0].Before(resumed) {
				t.Errorf("%s delivered at %v: due %v, resumed %v", id, at[0], due[id], resumed)
			}
			if d := rec.seen[id][0]; d.Attempt != 1 {
				t.Errorf("%s: attempt %d, want 1 (a pause spends no attempt)", id, d.Attempt)
			}
		}
		if ts, err = c.Inspector().Stats(ctx, topic); err != nil {
			t.Fatal(err)
		}
		if ts.Pause.Paused {
			t.Errorf("stats after resume: %+v, want not paused", ts.Pause)
		}
	})
}

// A message claimed ahead before the pause, due 200 ms after it begins,
// goes back to scheduled with no attempt spent, and does not start.
func TestPauseReturnsHeld(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "held"
		rec := newRecorder()
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 2 * time.Second}, rec.handle)
		waitFor(t, 10*time.Second, "the partition owned", func() bool { return len(k.Stats().Owned) == 1 })
		at := time.Now().Add(time.Second)
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "ahead", At: at}); err != nil {
			t.Fatal(err)
		}
		var due time.Time
		waitFor(t, 900*time.Millisecond, "the message claimed ahead", func() bool {
			info, err := c.Get(ctx, topic, "ahead")
			if err == nil {
				due = info.Due
			}
			return err == nil && info.State == StateInFlight
		})
		time.Sleep(time.Until(at.Add(-200 * time.Millisecond)))
		if err := c.Admin().Pause(ctx, topic, PauseOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 2*time.Second, "the held message back in scheduled", func() bool {
			info, err := c.Get(ctx, topic, "ahead")
			return err == nil && info.State == StateScheduled
		})
		info, err := c.Get(ctx, topic, "ahead")
		if err != nil {
			t.Fatal(err)
		}
		if info.Attempts != 0 || !info.Due.Equal(due) {
			t.Errorf("returned message: attempts %d, due %v; want 0 and its own due %v", info.Attempts, info.Due, due)
		}
		time.Sleep(time.Until(at.Add(time.Second)))
		if n := rec.total(); n != 0 {
			t.Fatalf("the held message started during the pause (%d deliveries)", n)
		}
		if err := c.Admin().Resume(ctx, topic); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "delivered after resume", func() bool { return rec.total() == 1 })
		if d := rec.seen["ahead"][0]; d.Attempt != 1 {
			t.Errorf("attempt %d after the pause, want 1", d.Attempt)
		}
	})
}

// A timed pause ends by itself: messages due during it are delivered
// soon after its end, none before.
func TestPauseUntil(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const P, N = 4, 40
		c := newClient(t, addr, Options{Partitions: P})
		topic := "until"
		rec := newRecorder()
		k := runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
		waitFor(t, 10*time.Second, "all partitions owned", func() bool { return len(k.Stats().Owned) == P })
		until := time.Now().Add(1500 * time.Millisecond)
		if err := c.Admin().Pause(ctx, topic, PauseOptions{Until: until}); err != nil {
			t.Fatal(err)
		}
		seenPause(t, k, true)
		ts, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !ts.Pause.Paused || ts.Pause.PausedUntil == nil || ts.Pause.PausedUntil.Before(until) || ts.Pause.PausedUntil.Sub(until) >= time.Millisecond {
			t.Errorf("stats: pause %+v, want paused until %v", ts.Pause, until)
		}
		for i := range N {
			if _, err := c.Send(ctx, Message{Topic: topic, ID: fmt.Sprintf("u%02d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 5*time.Second, "every message delivered", func() bool { return rec.total() >= N })
		rec.mu.Lock()
		var last time.Time
		for id, at := range rec.at {
			if at[0].Before(until) {
				t.Errorf("%s delivered at %v, before the pause's end %v", id, at[0], until)
			}
			if at[0].After(last) {
				last = at[0]
			}
		}
		rec.mu.Unlock()
		const bound = 500 * time.Millisecond
		t.Logf("last delivery %v after the pause's end", last.Sub(until).Round(time.Millisecond))
		if late := last.Sub(until); late > bound {
			t.Errorf("last delivery %v after the pause's end, want within %v", late, bound)
		}
		if ts, err = c.Inspector().Stats(ctx, topic); err != nil {
			t.Fatal(err)
		}
		if ts.Pause.Paused {
			t.Errorf("stats after the pause's end: %+v, want not paused", ts.Pause)
		}
	})
}

// A paused topic with due messages waiting costs its consumer no more
// commands than an idle topic: its loops neither look nor claim.
func TestPauseIdleCost(t *testing.T) {
	t.Parallel() // compares two topics' commands in one run: runs beside the other parallel tests
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const P = 16
		h := func(context.Context, *Delivery) error { return nil }
		paused := newClient(t, addr, Options{Partitions: P})
		idle := newClient(t, addr, Options{Partitions: P})
		kp := runConsumer(t, paused, ConsumerOptions{Topic: "cost.paused"}, h)
		ki := runConsumer(t, idle, ConsumerOptions{Topic: "cost.idle"}, h)
		waitFor(t, 10*time.Second, "all partitions owned", func() bool {
			return len(kp.Stats().Owned) == P && len(ki.Stats().Owned) == P
		})
		if err := paused.Admin().Pause(ctx, "cost.paused", PauseOptions{}); err != nil {
			t.Fatal(err)
		}
		seenPause(t, kp, true)
		for i := range 100 {
			if _, err := paused.Send(ctx, Message{Topic: "cost.paused", ID: fmt.Sprintf("w%03d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(DefaultIdlePollInterval) // the start-up burst passes
		p0, i0, start := paused.Commands(), idle.Commands(), time.Now()
		waitFor(t, 15*time.Second, "6 s of waiting", func() bool { return time.Since(start) >= 6*time.Second })
		secs := time.Since(start).Seconds()
		pc, ic := float64(paused.Commands()-p0)/secs, float64(idle.Commands()-i0)/secs
		t.Logf("paused topic with 100 due messages: %.1f commands a second; idle topic: %.1f (%d partitions each)", pc, ic, P)
		// Both consumers send the same periodic commands (lease
		// extensions, heartbeats, the idle poll), started at different
		// instants: over the window one may send a tick's worth more.
		// A paused loop that still looked would send 16 a second more.
		if slack := 2 / secs; pc > ic+slack {
			t.Errorf("a paused topic costs %.1f commands a second, an idle one %.1f (+%.2f for the phase of their ticks)", pc, ic, slack)
		}
		if kp.Stats().Delivered != 0 {
			t.Errorf("%d deliveries while paused", kp.Stats().Delivered)
		}
	})
}

// Pause and Resume of a topic that does not exist fail with ErrNoTopic
// and create nothing; an end not in the future is refused.
func TestPauseNoTopic(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	c := newClient(t, addr, Options{})
	ctx := context.Background()
	if err := c.Admin().Pause(ctx, "ghost", PauseOptions{}); !errors.Is(err, ErrNoTopic) {
		t.Errorf("pause of a topic never used: %v, want ErrNoTopic", err)
	}
	if err := c.Admin().Resume(ctx, "ghost"); !errors.Is(err, ErrNoTopic) {
		t.Errorf("resume of a topic never used: %v, want ErrNoTopic", err)
	}
	if meta, listed := testenv.TopicStored(t, addr, "dq", "ghost"); meta || listed {
		t.Errorf("pause and resume of a topic never used wrote it: meta %v, listed %v", meta, listed)
	}
	if _, err := c.Send(ctx, Message{Topic: "real", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Second)
	if err := c.Admin().Pause(ctx, "real", PauseOptions{Until: past}); !errors.Is(err, ErrInvalid) {
		t.Errorf("pause until a past time: %v, want ErrInvalid", err)
	}
	if err := c.Admin().Resume(ctx, "real"); err != nil {
		t.Errorf("resume of a topic not paused: %v", err)
	}
}

// A consumer logs a pause with its end as a time, and does not log a
// pause whose end had passed when it started.
func TestPauseLogged(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := newClient(t, env.Backends[0], Options{Partitions: 2, Logger: log})
	topic := "pauselog"
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "first"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().Pause(ctx, topic, PauseOptions{Until: time.Now().Add(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the pause's end", func() bool {
		ts, err := c.Inspector().Stats(ctx, topic)
		return err == nil && !ts.Pause.Paused
	})
	rec := newRecorder()
	k := runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
	waitFor(t, 10*time.Second, "the message delivered", func() bool { return rec.total() >= 1 })
	if strings.Contains(out.String(), "topic paused") {
		t.Errorf("a pause that had ended was logged:\n%s", out.String())
	}
	until := time.Now().Add(time.Hour)
	if err := c.Admin().Pause(ctx, topic, PauseOptions{Until: until}); err != nil {
		t.Fatal(err)
	}
	seenPause(t, k, true)
	waitFor(t, 5*time.Second, "the pause logged", func() bool { return strings.Contains(out.String(), "topic paused") })
	line := out.String()[strings.Index(out.String(), "topic paused"):]
	line, _, _ = strings.Cut(line, "\n")
	if !strings.Contains(line, "until="+until.UTC().Format("2006-01-02T15:04")) || strings.Contains(line, "until_ms") {
		t.Errorf("pause logged as %q, want its end as a time", line)
	}
}
