package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// Concurrent Enqueue calls are coalesced: fewer round trips than calls,
// each call gets its own outcome.
func TestCoalescedEnqueue(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 8})
		if _, err := c.Enqueue(ctx, Message{Topic: "co", ID: "dup", Delay: time.Hour}); err != nil {
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
					_, errs[i] = c.Enqueue(ctx, Message{Topic: "co", ID: id, Body: []byte(id), Delay: time.Hour})
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
		st, err := c.Stats(ctx, "co")
		if err != nil || st.Scheduled != 400 {
			t.Fatalf("scheduled = %+v, %v; want 400", st, err)
		}
		in, err := c.Get(ctx, "co", "co-123")
		if err != nil || string(in.Body) != "co-123" {
			t.Fatalf("get co-123 = %+v, %v", in, err)
		}
		c.Close()
		if _, err := c.Enqueue(ctx, Message{Topic: "co", ID: "late"}); !errors.Is(err, ErrClosed) {
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
	if res, err := c.EnqueueBatch(ctx, batch("a", 64)); err != nil || res[0].Err != nil {
		t.Fatalf("first batch: %v", err)
	}
	env.RestartBackend(t, 0) // data kept (AOF), scripts forgotten
	msgs := append(batch("b", 64), batch("a", 8)...)
	var res []EnqueueResult
	waitFor(t, 10*time.Second, "a batch through the restarted backend", func() bool {
		var err error
		res, err = c.EnqueueBatch(ctx, msgs)
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
	st, err := c.Stats(ctx, "nos")
	if err != nil || st.Scheduled != 128 {
		t.Fatalf("scheduled = %+v, %v; want 128", st, err)
	}
}
