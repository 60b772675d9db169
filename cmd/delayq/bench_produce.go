package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
)

// enqueueMode is how producers enqueue.
type enqueueMode int

const (
	modeSingle enqueueMode = iota // Send
	modeAsync                     // SendAsync
	modeBatch                     // SendBatch
)

// String names the mode as the enqueue line's mode= does.
func (m enqueueMode) String() string { return [...]string{"single", "async", "batch"}[m] }

// numbered returns n messages to topic, each with body, due at due(i)
// and its index after prefix as its id: x00000042.
func numbered(topic, prefix string, n int, body []byte, due func(i int) time.Time) []delayq.Message {
	msgs := make([]delayq.Message, n)
	for i := range msgs {
		msgs[i] = delayq.Message{Topic: topic, ID: fmt.Sprintf("%s%08d", prefix, i), Body: body, At: due(i)}
	}
	return msgs
}

// at is a due for numbered: every message at t.
func at(t time.Time) func(int) time.Time {
	return func(int) time.Time { return t }
}

// fill enqueues msgs as produce does, with SendBatch whatever --batch
// and --async say, and returns the time it took.
func fill(ctx context.Context, cfg benchConfig, c *delayq.Client, msgs []delayq.Message) (time.Duration, error) {
	cfg.mode = modeBatch
	return produce(ctx, cfg, c, msgs, "")
}

// produce enqueues msgs from cfg.producers goroutines and returns the
// time it took. Unless want is empty, a single or batch call whose
// outcome is another fails the run (SendAsync reports no outcome).
func produce(ctx context.Context, cfg benchConfig, c *delayq.Client, msgs []delayq.Message, want delayq.Outcome) (time.Duration, error) {
	check := func(id string, got delayq.Outcome) error {
		if want != "" && got != want {
			return fmt.Errorf("send %q: outcome %s, want %s", id, got, want)
		}
		return nil
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	var wg, writes sync.WaitGroup
	start := time.Now()
	for range cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step := 1
			if cfg.mode == modeBatch {
				step = cfg.batchSize
			}
			for {
				lo := int(next.Add(int64(step))) - step
				if lo >= len(msgs) || ctx.Err() != nil {
					return
				}
				switch cfg.mode {
				case modeAsync:
					writes.Add(1)
					written := func(res delayq.SendResult) {
						err := res.Err
						if err != nil {
							fail(err)
						}
						writes.Done()
					}
					if err := c.SendAsync(ctx, msgs[lo], written); err != nil {
						writes.Done()
						fail(err)
						return
					}
					continue
				case modeSingle:
					res, err := c.Send(ctx, msgs[lo])
					if err == nil {
						err = check(msgs[lo].ID, res.Outcome)
					}
					if err != nil {
						fail(err)
						return
					}
					continue
				}
				res, err := c.SendBatch(ctx, msgs[lo:min(lo+step, len(msgs))])
				if err != nil {
					fail(err)
					return
				}
				for _, r := range res {
					err := r.Err
					if err == nil {
						err = check(r.ID, r.Outcome)
					}
					if err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	writes.Wait()
	return time.Since(start), firstErr
}
