package store

// The fence of a partition: the fencing token each acquisition of its
// lease draws (NextToken), and the reserved member of its scheduled ZSET
// that holds the newest one (RaiseFence). Every script that writes to a
// partition's indexes on an owner's behalf compares the owner's token
// with it (see FencedError); TakeOver and HandOver (handover.go) raise and
// mark it at a change of owner.

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// NextToken returns a new fencing token for the partition: its epoch
// counter plus one, or nowMS when that is more (see tokenScript), so that
// a counter a backend failover took back still yields a token above any
// fence raised before. It takes topic and p apart, not a TopicPartition,
// as lease.Membership declares it: package lease imports only clock.
func (s *Store) NextToken(ctx context.Context, topic string, p int, nowMS int64) (int64, error) {
	r, err := s.script(ctx, tokenScript, keys.Epoch(s.ns, topic, p), nowMS)
	if err != nil {
		return 0, fmt.Errorf("token of partition %d: %w", p, err)
	}
	return redis.Int64(r, nil)
}

// RaiseFence raises partition tp's fence to token. A *FencedError means a
// newer token holds the fence: the caller's lease is superseded.
func (s *Store) RaiseFence(ctx context.Context, tp TopicPartition, token int64) error {
	r, err := s.script(ctx, raiseScript, keys.Scheduled(s.ns, tp.Topic, tp.P), keys.Fence, token)
	if err != nil {
		return fmt.Errorf("raise fence of partition %d: %w", tp.P, err)
	}
	cur, err := redis.Int64(r, nil)
	if err != nil {
		return fmt.Errorf("raise fence of partition %d: %w", tp.P, err)
	}
	if cur != token {
		return &FencedError{Token: token, Newest: cur}
	}
	return nil
}
