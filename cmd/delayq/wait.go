package main

import (
	"context"
	"time"
)

// waitFor waits d, or until ctx is done: then it returns ctx.Err().
func waitFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
