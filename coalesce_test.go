package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
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
