package delayq

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// starts records when each delivery started and ended, and how many ran
// at once at most.
type starts struct {
	mu       sync.Mutex
	at       []time.Time
	ids      map[string]int
	late     []time.Duration // each start after its due
	early    int
	running  atomic.Int64
	maxRun   atomic.Int64
	hold     time.Duration
	finished atomic.Int64
}

func newStarts(hold time.Duration) *starts { return &starts{ids: map[string]int{}, hold: hold} }

func (s *starts) handle(ctx context.Context, d *Delivery) error {
	now := time.Now()
	n := s.running.Add(1)
	for {
		m := s.maxRun.Load()
		if n <= m || s.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	s.mu.Lock()
	s.at = append(s.at, now)
	s.ids[d.ID]++
	s.late = append(s.late, now.Sub(d.Due))
	if now.Before(d.Due) {
		s.early++
	}
	s.mu.Unlock()
	time.Sleep(s.hold)
	s.running.Add(-1)
	s.finished.Add(1)
	return nil
}

// rate returns the starts per second within [from, to).
func (s *starts) rate(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.at {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

func (s *starts) check(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) != n || s.early != 0 {
		t.Errorf("%d of %d messages delivered, %d early", len(s.ids), n, s.early)
	}
	for id, k := range s.ids {
		if k != 1 {
			t.Errorf("%s delivered %d times", id, k)
		}
	}
}

// enqueueDueNow writes n messages due at once and returns when.
func enqueueDueNow(t *testing.T, c *Client, topic string, n int) time.Time {
	t.Helper()
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Topic: topic, ID: fmt.Sprintf("m%05d", i)}
	}
	at := time.Now()
	mustBatch(t, c, msgs)
	return at
}

// limitedFleet sends topic a first message, sets its limits to lim and
// runs 2 consumers of 8 handlers each on s, and returns once the first
// message was delivered and both consumers follow lim.
func limitedFleet(t *testing.T, c *Client, topic string, lim Limits, s *starts) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "first"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, topic, lim); err != nil {
		t.Fatal(err)
	}
	var ks []*Consumer
	for range 2 {
		ks = append(ks, runConsumer(t, c, ConsumerOptions{Topic: topic, Concurrency: 8}, s.handle))
	}
	waitFor(t, 10*time.Second, "first delivered", func() bool { return s.finished.Load() == 1 })
	for _, k := range ks {
		seenLimits(t, k, lim)
	}
}

// Two consumers of a topic limited to 100 starts a second start 100 a
// second between them, none early, none twice; raised to 200, the new
// rate holds within a second.
func TestRateLimitFleet(t *testing.T) {
	ctx := context.Background()
	const P, N = 8, 900
	c := newClient(t, testAddr(t), Options{Partitions: P})
	topic := "rated"
	s := newStarts(5 * time.Millisecond)
	limitedFleet(t, c, topic, Limits{Rate: 100}, s)
	t0 := enqueueDueNow(t, c, topic, N-1)
	time.Sleep(time.Until(t0.Add(4 * time.Second)))
	r1 := s.rate(t0.Add(time.Second), t0.Add(4*time.Second))
	if err := c.Admin().SetLimits(ctx, topic, Limits{Rate: 200}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	waitFor(t, 20*time.Second, "every message delivered", func() bool { return s.finished.Load() >= N })
	s.mu.Lock()
	last := s.at[len(s.at)-1]
	s.mu.Unlock()
	r2 := s.rate(t1.Add(time.Second), last)
	t.Logf("rate 100/s: %.1f/s over 3 s; raised to 200/s: %.1f/s over %v", r1, r2, last.Sub(t1.Add(time.Second)).Round(time.Millisecond))
	if r1 < 95 || r1 > 105 {
		t.Errorf("rate limited to 100/s started %.1f/s", r1)
	}
	if r2 < 190 || r2 > 210 {
		t.Errorf("rate raised to 200/s started %.1f/s", r2)
	}
	s.check(t, N)
}

// Two consumers of 8 handlers each, under a cap of 4, never run more
// than 4 deliveries at once, and run about 4 at once all along.
func TestConcurrencyCapFleet(t *testing.T) {
	ctx := context.Background()
	const P, N, hold = 8, 120, 100 * time.Millisecond
	c := newClient(t, testAddr(t), Options{Partitions: P})
	topic := "capped"
	s := newStarts(hold)
	limitedFleet(t, c, topic, Limits{Concurrency: 4}, s)
	t0 := enqueueDueNow(t, c, topic, N-1)
	waitFor(t, 20*time.Second, "every message delivered", func() bool { return s.finished.Load() >= N })
	took := time.Since(t0)
	ideal := time.Duration(N-1) * hold / 4
	t.Logf("cap 4, handlers of %v: %d messages in %v (%.0f%% of the cap's throughput), at most %d at once",
		hold, N-1, took.Round(time.Millisecond), 100*ideal.Seconds()/took.Seconds(), s.maxRun.Load())
	if m := s.maxRun.Load(); m > 4 {
		t.Errorf("%d deliveries ran at once under a cap of 4", m)
	}
	if took > ideal*3/2 {
		t.Errorf("took %v, want within 1.5x of %v", took, ideal)
	}
	s.check(t, N)
	s.mu.Lock()
	sort.Slice(s.at, func(i, j int) bool { return s.at[i].Before(s.at[j]) })
	s.mu.Unlock()
	// The slots go back to the fleet once their holders have no more to
	// deliver.
	waitFor(t, 2*time.Second, "no slot held", func() bool {
		ts, err := c.Inspector().Stats(ctx, topic)
		return err == nil && ts.Limits.Running == 0
	})
}

// Under a rate limit, messages within it start at their due, as without
// one (claimed ahead no farther than the limit reaches), and messages all
// due at one instant start no faster than the bucket allows: its burst
// and a tenth of a second's worth at once, then the rate.
func TestRateLimitClaimAhead(t *testing.T) {
	ctx := context.Background()
	const P = 4
	c := newClient(t, testAddr(t), Options{Partitions: P})
	topic := "rated-ahead"
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "first"}); err != nil {
		t.Fatal(err)
	}
	lim := Limits{Rate: 100}
	if err := c.Admin().SetLimits(ctx, topic, lim); err != nil {
		t.Fatal(err)
	}
	s := newStarts(0)
	k := runConsumer(t, c, ConsumerOptions{Topic: topic}, s.handle)
	waitFor(t, 10*time.Second, "first delivered", func() bool { return s.finished.Load() == 1 })
	seenLimits(t, k, lim)

	// 100 messages due 20 ms apart from 2 s on: 50/s, within the limit.
	t0 := time.Now().Add(2 * time.Second)
	var msgs []Message
	for i := range 100 {
		msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("s%03d", i), At: t0.Add(time.Duration(i) * 20 * time.Millisecond)})
	}
	if _, err := c.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the spread delivered", func() bool { return s.finished.Load() >= 101 })
	s.mu.Lock()
	late := append([]time.Duration(nil), s.late[1:]...)
	s.mu.Unlock()
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	p99 := late[len(late)*99/100-1]
	t.Logf("100 messages at 50/s under a limit of 100/s: lateness p50 %v p99 %v", late[len(late)/2], p99)
	if p99 > 100*time.Millisecond {
		t.Errorf("messages within the rate limit started late: p99 %v", p99)
	}

	// 200 messages all due at T: at most burst + 10 at once, then 100/s.
	T := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	msgs = msgs[:0]
	for i := range 200 {
		msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("b%03d", i), At: T})
	}
	if _, err := c.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the burst delivered", func() bool { return s.finished.Load() >= 301 })
	first := s.rate(T, T.Add(100*time.Millisecond)) / 10
	most := 0
	for at := T; at.Before(T.Add(2 * time.Second)); at = at.Add(10 * time.Millisecond) {
		most = max(most, int(s.rate(at, at.Add(500*time.Millisecond))/2))
	}
	t.Logf("200 messages due at once under 100/s: %.0f started in the first 100 ms, at most %d in any 500 ms", first, most)
	if max := DefaultBurst(100) + 10 + 1; int(first) > max {
		t.Errorf("%.0f started in the first 100 ms, want at most %d (the burst and 100 ms worth)", first, max)
	}
	if most > DefaultBurst(100)+10+50+1 {
		t.Errorf("%d started within 500 ms under 100/s", most)
	}
	s.check(t, 301)
}
