package delayq

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock a test sets. It is safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Stats counts the messages due at its clock's now (and not those due
// later), the lag of the oldest of them, and the live consumers (as
// Partitions counts them): a consumer that leaves or whose heartbeat
// expired is not counted.
func TestStatsDueNowLagConsumers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const P = 4
		topic := "stats-due"
		base := time.Now().Truncate(time.Millisecond)
		clk := &fakeClock{t: base}
		c := newClient(t, addr, Options{Partitions: P, Now: clk.Now})
		for i := range 5 { // due 1 s, 2 s ... 5 s after base
			if _, err := c.Send(ctx, Message{Topic: topic, ID: "m" + string(rune('a'+i)), At: base.Add(time.Duration(i+1) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"later1", "later2"} {
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id, Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		check := func(at time.Duration, due int64, lag time.Duration) *TopicStats {
			t.Helper()
			clk.Set(base.Add(at))
			ts, err := c.Inspector().Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, p := range ts.Partitions {
				sum += p.DueNow
				if p.DueNow > p.Scheduled {
					t.Errorf("at base+%v: partition %d has %d due of %d scheduled", at, p.Partition, p.DueNow, p.Scheduled)
				}
			}
			if ts.Scheduled != 7 || ts.DueNow != due || sum != due || ts.Lag != lag {
				t.Errorf("at base+%v: scheduled %d, due now %d (partitions: %d), lag %v; want 7, %d, %d, %v",
					at, ts.Scheduled, ts.DueNow, sum, ts.Lag, due, due, lag)
			}
			return ts
		}
		check(0, 0, 0)
		check(999*time.Millisecond, 0, 0)
		check(time.Second, 1, 0) // due at now: due now, waited 0
		check(3500*time.Millisecond, 3, 2500*time.Millisecond)
		ts := check(10*time.Second, 5, 9*time.Second)
		if ts.Consumers != 0 {
			t.Errorf("consumers %d before any ran", ts.Consumers)
		}

		// The topic paused, consumers join without claiming anything (so
		// the counts above hold). Their heartbeats are on the real clock:
		// so is Stats while it counts them.
		if err := c.Admin().Pause(ctx, topic, PauseOptions{}); err != nil {
			t.Fatal(err)
		}
		consumers := func() (stats, partitions int) {
			t.Helper()
			clk.Set(time.Now())
			ts, err := c.Inspector().Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Inspector().Partitions(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			return ts.Consumers, info.Consumers
		}
		var ks []*Consumer
		for range 3 {
			kc := newClient(t, addr, Options{Partitions: P})
			ks = append(ks, runConsumer(t, kc, ConsumerOptions{Topic: topic, Lease: 2 * time.Second}, newRecorder().handle))
		}
		waitFor(t, 10*time.Second, "3 consumers counted", func() bool { s, _ := consumers(); return s == 3 })
		if s, p := consumers(); s != p {
			t.Errorf("stats counts %d consumers, partitions %d", s, p)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := ks[0].Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
		if s, p := consumers(); s != 2 || p != 2 {
			t.Errorf("after a consumer left: stats counts %d consumers, partitions %d; want 2", s, p)
		}
		check(10*time.Second, 5, 9*time.Second) // the paused consumers claimed nothing
		// An hour on, every heartbeat has expired: none is live.
		ts = check(time.Hour-time.Second, 5, time.Hour-2*time.Second)
		if ts.Consumers != 0 {
			t.Errorf("consumers %d an hour on, want 0 (heartbeats expired)", ts.Consumers)
		}
		ts = check(2*time.Hour, 7, 2*time.Hour-time.Second)

		// stats --json and the API carry the figures.
		b, err := json.Marshal(ts)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"due_now":7,`, `"lag_ms":7199000`, `"consumers":0,`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s\nlacks %s", b, want)
			}
		}
		var back TopicStats
		if err := json.Unmarshal(b, &back); err != nil || back.Lag != ts.Lag || back.DueNow != 7 || back.Partitions[0].DueNow != ts.Partitions[0].DueNow {
			t.Errorf("read back: lag %v due %d, %v; want %v and 7", back.Lag, back.DueNow, err, ts.Lag)
		}
	})
}

// A segment (messages of one write due a minute or more ahead) counts as
// one message due until a consumer claims it, as TopicStats.DueNow says;
// Scheduled counts each of its messages.
func TestStatsDueNowSegment(t *testing.T) {
	ctx := context.Background()
	base := time.Now().Truncate(time.Millisecond)
	clk := &fakeClock{t: base}
	c := newClient(t, testAddr(t), Options{Partitions: 2, Now: clk.Now})
	msgs := make([]Message, 10)
	for i := range msgs {
		msgs[i] = Message{Topic: "stats-seg", Delay: time.Hour}
	}
	if _, err := c.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	clk.Set(base.Add(2 * time.Hour))
	ts, err := c.Inspector().Stats(ctx, "stats-seg")
	if err != nil {
		t.Fatal(err)
	}
	if ts.Scheduled != 10 || ts.DueNow != 1 || ts.Lag != time.Hour {
		t.Errorf("a segment of 10 due an hour ago: scheduled %d, due now %d, lag %v; want 10, 1, 1h", ts.Scheduled, ts.DueNow, ts.Lag)
	}
}

// TestStatsTimesFixedWidth: the times of TopicStats and PartitionsInfo
// (stats --json, partitions --json, GET .../stats) have three-digit
// milliseconds, as every other time delayq prints, trailing zeros kept.
func TestStatsTimesFixedWidth(t *testing.T) {
	since := time.Date(2026, 11, 26, 7, 45, 14, 820_000_000, time.UTC)
	settle := since.Add(30 * time.Second)
	due := time.Date(2026, 11, 26, 7, 48, 27, 0, time.UTC)
	until := time.Date(2026, 11, 26, 8, 0, 0, 500_000_000, time.UTC)
	ts := &TopicStats{
		Pause: PauseState{Paused: true, PausedUntil: &until},
		Topic: "orders", Count: 64, ChangingTo: 32,
		Change:     &PartitionsInfo{Topic: "orders", Count: 64, Next: 32, Since: &since, SettleUntil: &settle},
		Partitions: []PartitionStats{{Partition: 0, Scheduled: 1, OldestDue: &due, Owner: "w", Token: 7}, {Partition: 1}},
	}
	b, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"since":"2026-11-26T07:45:14.820Z"`, `"settle_until":"2026-11-26T07:45:44.820Z"`, `"oldest_due":"2026-11-26T07:48:27.000Z"`, `"owner":"w","token":7`,
		`"pause":{"paused":true,"paused_until":"2026-11-26T08:00:00.500Z"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s\nlacks %s", b, want)
		}
	}
	if strings.Count(string(b), "oldest_due") != 1 {
		t.Errorf("%s: oldest_due of a partition with none", b)
	}
	var back TopicStats // what a client of the API reads back
	if err := json.Unmarshal(b, &back); err != nil || !back.Change.Since.Equal(since) || !back.Partitions[0].OldestDue.Equal(due) || back.Partitions[1].OldestDue != nil ||
		!back.Pause.Paused || !back.Pause.PausedUntil.Equal(until) {
		t.Errorf("read back: %+v, %v", back, err)
	}
	b, err = json.Marshal(ts.Change) // partitions --json
	if err != nil || !strings.Contains(string(b), `"since":"2026-11-26T07:45:14.820Z"`) {
		t.Errorf("PartitionsInfo: %s, %v", b, err)
	}
}
