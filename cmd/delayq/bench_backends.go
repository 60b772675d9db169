package main

import (
	"context"
	"strings"
	"time"
)

// sumBackends sums what read reads from each backend of --backends,
// straight from it, never through --addr: 0 without --backends.
func sumBackends[N int64 | time.Duration](ctx context.Context, cfg benchConfig, read func(ctx context.Context, addr, password string) (N, error)) (N, error) {
	var total N
	for _, b := range cfg.backends {
		v, err := read(ctx, strings.TrimSpace(b), cfg.c.password)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}
