package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// rttStats summarizes timed round trips, in milliseconds.
type rttStats struct {
	Samples  int     `json:"samples"`
	MinMS    float64 `json:"min_ms"`
	MedianMS float64 `json:"median_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// time times n round trips of one command.
func (d *doctor) time(ctx context.Context, n int, cmd string, args ...any) (*rttStats, error) {
	durs := make([]time.Duration, n)
	for i := range durs {
		start := time.Now()
		if _, err := d.do(ctx, cmd, args...); err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		durs[i] = time.Since(start)
	}
	slices.Sort(durs)
	return &rttStats{Samples: n, MinMS: ms(durs[0]), MedianMS: ms(durs[n/2]), MaxMS: ms(durs[n-1])}, nil
}
