package main

import (
	"context"
	"fmt"
	"time"
)

// benchSpread is the spread workload: n messages (default 5000) due
// evenly over 10 s, enqueued at least 2 s ahead. The line gives the
// lateness (handler start - due) and the consumer's commands per message.
func benchSpread(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(5000)
	return withDelivery(ctx, cfg, n, func(r *delivery) (string, error) {
		start := time.Now().Add(2*time.Second + time.Duration(n)*50*time.Microsecond)
		if err := r.enqueue(ctx, cfg, n, "s", func(i int) time.Time {
			return start.Add(time.Duration(i) * 10 * time.Second / time.Duration(n))
		}); err != nil {
			return "", err
		}
		cmds0 := r.cons.Commands()
		if err := waitDone(ctx, r.l, time.Until(start)+40*time.Second); err != nil {
			return "", err
		}
		cmds := float64(r.cons.Commands()-cmds0) / float64(n)
		return fmt.Sprintf("workload=spread n=%d %s cmds_per_msg=%.2f duplicates=%d", n, r.l.summary(), cmds, r.l.dups.Load()), nil
	})
}
