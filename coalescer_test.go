package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// Concurrent Send calls are coalesced: fewer round trips than calls,
// each call gets its own outcome.
func TestCoalescedEnqueue(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 8})
		if _, err := c.Send(ctx, Message{Topic: "co", ID: "dup", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		before := c.Commands()
		var wg sync.WaitGroup
		errs := make([]error, 400)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(errs); i += 16 {
					id := fmt.Sprintf("co-%d", i)
					if i == 7 {
						id = "dup"
					}
					_, errs[i] = c.Send(ctx, Message{Topic: "co", ID: id, Body: []byte(id), Delay: time.Hour})
				}
			}()
		}
		wg.Wait()
		if n := c.Commands() - before; n >= 2*400 {
			t.Errorf("400 enqueues sent %d commands: not coalesced", n)
		} else {
			t.Logf("400 concurrent enqueues: %d commands", n)
		}
		for i, err := range errs {
			if i == 7 {
				if !errors.Is(err, ErrDuplicate) {
					t.Errorf("duplicate in a coalesced batch: %v", err)
				}
				continue
			}
			if err != nil {
				t.Errorf("enqueue %d: %v", i, err)
			}
		}
		st, err := c.Inspector().Stats(ctx, "co")
		if err != nil || st.Scheduled != 400 {
			t.Fatalf("scheduled = %+v, %v; want 400", st, err)
		}
		in, err := c.Get(ctx, "co", "co-123")
		if err != nil || string(in.Body) != "co-123" {
			t.Fatalf("get co-123 = %+v, %v", in, err)
		}
		c.Close()
		if _, err := c.Send(ctx, Message{Topic: "co", ID: "late"}); !errors.Is(err, ErrClosed) {
			t.Errorf("enqueue after Close: %v, want ErrClosed", err)
		}
	})
}

// A batch whose script is cached on some backends and not on others (one
// restarted) runs it once everywhere: no message is reported as a
// duplicate of itself, and real duplicates still are.
func TestBatchAfterScriptCacheLoss(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, AppendOnly: true})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 8})
	batch := func(prefix string, n int) []Message {
		var msgs []Message
		for i := range n {
			msgs = append(msgs, Message{Topic: "nos", ID: fmt.Sprintf("%s-%d", prefix, i), Delay: time.Hour})
		}
		return msgs
	}
	if res, err := c.SendBatch(ctx, batch("a", 64)); err != nil || res[0].Err != nil {
		t.Fatalf("first batch: %v", err)
	}
	env.RestartBackend(t, 0) // data kept (AOF), scripts forgotten
	msgs := append(batch("b", 64), batch("a", 8)...)
	var res []SendResult
	waitFor(t, 10*time.Second, "a batch through the restarted backend", func() bool {
		var err error
		res, err = c.SendBatch(ctx, msgs)
		return err == nil
	})
	for i, r := range res {
		dup := errors.Is(r.Err, ErrDuplicate)
		if i < 64 && r.Err != nil {
			t.Errorf("%s: %v", r.ID, r.Err)
		}
		if i >= 64 && !dup {
			t.Errorf("%s: %v, want ErrDuplicate", r.ID, r.Err)
		}
	}
	st, err := c.Inspector().Stats(ctx, "nos")
	if err != nil || st.Scheduled != 128 {
		t.Fatalf("scheduled = %+v, %v; want 128", st, err)
	}
}

// SendAsync returns before the write; every queued message gets exactly
// one callback with its outcome, and Close writes whatever is still queued.
func TestSendAsync(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 8})
		if _, err := c.Send(ctx, Message{Topic: "as", ID: "dup", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := c.SendAsync(ctx, Message{Topic: "no such/topic", ID: "x"}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad topic: %v, want ErrInvalid", err)
		}
		if err := c.SendAsync(ctx, Message{Topic: "as", ID: "x", Delay: -time.Second}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("negative delay: %v, want ErrInvalid", err)
		}
		const n = 3000
		var mu sync.Mutex
		outcomes := map[string][]error{}
		done := func(res SendResult) {
			id, err := res.ID, res.Err
			mu.Lock()
			outcomes[id] = append(outcomes[id], err)
			mu.Unlock()
		}
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += 16 {
					id := fmt.Sprintf("as-%d", i)
					if i == 7 {
						id = "dup"
					}
					if err := c.SendAsync(ctx, Message{Topic: "as", ID: id, Body: []byte(id), Delay: time.Hour}, done); err != nil {
						t.Errorf("enqueue %s: %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
		// No waiting for the callbacks: Close must write what is queued.
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if len(outcomes) != n {
			t.Fatalf("%d ids got a callback, want %d", len(outcomes), n)
		}
		for id, errs := range outcomes {
			switch {
			case len(errs) != 1:
				t.Errorf("%s: %d callbacks", id, len(errs))
			case id == "dup" && !errors.Is(errs[0], ErrDuplicate):
				t.Errorf("dup: %v, want ErrDuplicate", errs[0])
			case id != "dup" && errs[0] != nil:
				t.Errorf("%s: %v", id, errs[0])
			}
		}
		if err := c.SendAsync(ctx, Message{Topic: "as", ID: "late"}, done); !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
		c2 := newClient(t, addr, Options{Partitions: 8})
		st, err := c2.Inspector().Stats(ctx, "as")
		if err != nil || st.Scheduled != n {
			t.Fatalf("scheduled = %+v, %v; want %d", st, err, n)
		}
		in, err := c2.Get(ctx, "as", "as-2999")
		if err != nil || string(in.Body) != "as-2999" {
			t.Fatalf("get as-2999 = %+v, %v", in, err)
		}
	})
}

// Close does not hang when producers are waiting on a full queue and
// callbacks enqueue again while it runs: every call is either queued (and
// written) or refused with ErrClosed.
func TestSendAsyncCloseUnderLoad(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		var mu sync.Mutex
		var queued, refused, written int
		enqueue := func(id string, done func(SendResult)) bool {
			err := c.SendAsync(ctx, Message{Topic: "ac", ID: id, Delay: time.Hour}, done)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				queued++
			case errors.Is(err, ErrClosed):
				refused++
			default:
				t.Errorf("enqueue %s: %v", id, err)
			}
			return err == nil
		}
		var done func(SendResult)
		done = func(res SendResult) {
			id, err := res.ID, res.Err
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			mu.Lock()
			written++
			mu.Unlock()
			if !strings.HasSuffix(id, "+") {
				enqueue(id+"+", done) // from the callback, as a retry would
			}
		}
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; enqueue(fmt.Sprintf("ac-%d-%d", g, i), done); i++ {
				}
			}()
		}
		waitFor(t, 10*time.Second, "20000 calls queued", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return queued >= 20000
		})
		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Close did not return")
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if written != queued {
			t.Errorf("%d written, %d queued: every queued call must be written by Close", written, queued)
		}
		if refused < 16 {
			t.Errorf("%d calls refused, want at least one per producer", refused)
		}
		t.Logf("%d queued and written, %d refused after Close", queued, refused)
	})
}
