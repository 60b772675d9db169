package main

import (
	"context"
	"fmt"
	"time"
)

// benchBurst is the burst workload: n messages (default 20000) all due at
// one instant, the consumer running before it. The line gives the drain
// rate from that instant, the lateness (handler start - due) and the
// consumer's commands per message.
func benchBurst(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(20000)
	return withDelivery(ctx, cfg, n, func(r *delivery) (string, error) {
		// All due at T, far enough ahead for the enqueue to finish before it.
		T := time.Now().Add(2*time.Second + time.Duration(n)*50*time.Microsecond).Truncate(time.Millisecond)
		if err := r.enqueue(ctx, cfg, n, "b", at(T)); err != nil {
			return "", err
		}
		if time.Now().After(T) {
			return "", fmt.Errorf("enqueueing %d messages took past their due time; use a smaller --n", n)
		}
		cmds0 := r.cons.Commands()
		if err := waitDone(ctx, r.l, time.Until(T)+time.Duration(n)*time.Millisecond+30*time.Second); err != nil {
			return "", err
		}
		drain := r.l.last.Sub(T)
		cmds := float64(r.cons.Commands()-cmds0) / float64(n)
		return fmt.Sprintf("workload=burst n=%d drain_rate=%.0f %s cmds_per_msg=%.2f duplicates=%d",
			n, float64(n)/drain.Seconds(), r.l.summary(), cmds, r.l.dups), nil
	})
}
