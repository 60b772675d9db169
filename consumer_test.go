package delayq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// forEachTarget runs f against a Redis server directly and through
// Twemproxy (3 backends, no hash_tag). The two have separate servers, so
// the runs cannot see each other's keys.
func forEachTarget(t *testing.T, f func(t *testing.T, addr string)) {
	direct := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	proxied := testenv.Start(t, testenv.Options{Backends: 3})
	t.Run("direct", func(t *testing.T) { f(t, direct.Backends[0]) })
	t.Run("twemproxy", func(t *testing.T) { f(t, proxied.Proxy) })
}

func newClient(t *testing.T, addr string, o Options) *Client {
	t.Helper()
	o.Addr = addr
	if o.Logger == nil {
		o.Logger = quiet
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = testenv.WaitFor

type recorder struct {
	mu   sync.Mutex
	seen map[string][]*Delivery
	at   map[string][]time.Time
	fail func(d *Delivery) error
}

func newRecorder() *recorder {
	return &recorder{seen: map[string][]*Delivery{}, at: map[string][]time.Time{}}
}

func (r *recorder) handle(ctx context.Context, d *Delivery) error {
	r.mu.Lock()
	r.seen[d.ID] = append(r.seen[d.ID], d)
	r.at[d.ID] = append(r.at[d.ID], time.Now())
	f := r.fail
	r.mu.Unlock()
	if f != nil {
		return f(d)
	}
	return nil
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[id])
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.seen {
		n += len(v)
	}
	return n
}

func runConsumer(t *testing.T, c *Client, o ConsumerOptions, h Handler) *Consumer {
	t.Helper()
	k, err := c.NewConsumer(o, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return k
}

func TestLifecycle(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		topic := "life"
		now := time.Now()
		for i := range 20 {
			want := fmt.Sprintf("m%d", i)
			id, err := c.Enqueue(ctx, Message{Topic: topic, ID: want, Body: []byte(fmt.Sprintf("body %d", i)), Delay: time.Duration(i%5) * 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if id != want {
				t.Fatalf("enqueue of id %q returned %q", want, id)
			}
		}
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "m3"}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("duplicate enqueue: err = %v, want ErrDuplicate", err)
		}
		if err := c.Delete(ctx, topic, "m4"); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, topic, "m4"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		newDue := now.Add(1500 * time.Millisecond)
		if _, err := c.Reschedule(ctx, topic, "m5", newDue); err != nil {
			t.Fatal(err)
		}
		in, err := c.Get(ctx, topic, "m5")
		if err != nil || in.State != StateScheduled || !in.Due.Equal(clock.CeilMS(newDue)) {
			t.Fatalf("get m5 = %+v, %v", in, err)
		}
		rec := newRecorder()
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 200 * time.Millisecond, Lease: 3 * time.Second}, rec.handle)
		waitFor(t, 10*time.Second, "19 deliveries", func() bool { return rec.total() >= 19 })
		waitFor(t, 5*time.Second, "acks", func() bool { return k.Stats().Acked >= 19 })
		if rec.count("m4") != 0 {
			t.Errorf("deleted m4 was delivered")
		}
		for id, ds := range rec.seen {
			if len(ds) != 1 {
				t.Errorf("%s delivered %d times", id, len(ds))
			}
			if rec.at[id][0].Before(ds[0].Due) {
				t.Errorf("%s delivered at %v, before its due time %v", id, rec.at[id][0], ds[0].Due)
			}
		}
		if at := rec.at["m5"][0]; at.Before(newDue) {
			t.Errorf("rescheduled m5 delivered at %v, before %v", at, newDue)
		}
		st, err := c.Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.Scheduled != 0 || st.InFlight != 0 || st.Dead != 0 {
			t.Errorf("stats after draining: %+v", st)
		}
		if _, err := c.Get(ctx, topic, "m1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("acked message still found: %v", err)
		}
	})
}

func TestRetryAndDead(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic := "retry"
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "flaky", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: "doomed", Body: []byte("y"), MaxAttempts: 2}); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		rec.fail = func(d *Delivery) error {
			if d.ID == "doomed" || d.Attempt < 3 {
				return fmt.Errorf("fail attempt %d", d.Attempt)
			}
			return nil
		}
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: time.Second,
			Backoff: []time.Duration{200 * time.Millisecond}}, rec.handle)
		waitFor(t, 10*time.Second, "flaky acked and doomed dead", func() bool {
			s := k.Stats()
			return s.Acked >= 1 && s.Dead >= 1
		})
		if n := rec.count("flaky"); n != 3 {
			t.Errorf("flaky delivered %d times, want 3", n)
		}
		rec.mu.Lock()
		gap := rec.at["flaky"][1].Sub(rec.at["flaky"][0])
		rec.mu.Unlock()
		if gap < 200*time.Millisecond {
			t.Errorf("retry after %v, before the 200ms backoff", gap)
		}
		dead, err := c.ListDead(ctx, topic, 10)
		if err != nil || len(dead) != 1 || dead[0].ID != "doomed" || dead[0].Attempts != 2 || dead[0].LastError != "fail attempt 2" {
			t.Fatalf("dead = %+v, %v", dead, err)
		}
		n, err := c.RequeueDead(ctx, topic)
		if err != nil || n != 1 {
			t.Fatalf("requeue dead = %d, %v", n, err)
		}
		waitFor(t, 10*time.Second, "doomed dead again", func() bool { return k.Stats().Dead >= 2 })
		n, err = c.PurgeDead(ctx, topic)
		if err != nil || n != 1 {
			t.Fatalf("purge dead = %d, %v", n, err)
		}
		if _, err := c.Get(ctx, topic, "doomed"); !errors.Is(err, ErrNotFound) {
			t.Errorf("purged message found: %v", err)
		}
	})
}
