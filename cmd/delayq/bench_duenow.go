package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/delayq/delayq"
)

// benchDueNow: n messages due at once, sent one at a time 10-50 ms apart
// at random (each call waits for its write; a fixed spacing would meet
// the owners' reads of the wake-up counters, every ChangePoll, at a fixed
// phase) to an idle topic that two consumers run: their lateness shows how
// soon a write wakes its partition's owner.
func benchDueNow(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(200)
	return withDelivery(ctx, cfg, n, func(r *delivery) (line string, err error) {
		k, err := r.cons.NewConsumer(delayq.ConsumerOptions{Topic: r.topic, Concurrency: cfg.concurrency, PollInterval: cfg.poll}, r.l.handle)
		if err != nil {
			return "", err
		}
		kctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- k.Run(kctx) }()
		defer func() {
			cancel()
			err = errors.Join(err, <-done)
		}()
		info, err := r.cons.Inspector().Partitions(ctx, r.topic)
		if err != nil {
			return "", err
		}
		for deadline := time.Now().Add(30 * time.Second); len(k.Stats().Owned) < info.Count/2; {
			if time.Now().After(deadline) {
				return "", fmt.Errorf("the second consumer owns %d partitions after 30s", len(k.Stats().Owned))
			}
			if err := waitFor(ctx, 10*time.Millisecond); err != nil {
				return "", err
			}
		}
		if err := waitFor(ctx, cfg.poll*3/2); err != nil { // past the polls of the start
			return "", err
		}
		body := cfg.body()
		for i := range n {
			if _, err := r.prod.Send(ctx, delayq.Message{Topic: r.topic, ID: fmt.Sprintf("n%08d", i), Body: body}); err != nil {
				return "", err
			}
			if err := waitFor(ctx, 10*time.Millisecond+rand.N(40*time.Millisecond)); err != nil {
				return "", err
			}
		}
		if err := waitDone(ctx, r.l, 30*time.Second); err != nil {
			return "", err
		}
		return fmt.Sprintf("workload=duenow n=%d consumers=2 %s duplicates=%d", n, r.l.summary(), r.l.dups.Load()), nil
	})
}
