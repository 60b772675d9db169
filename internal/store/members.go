package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Heartbeat records consumer id as live in topic's members ZSET until
// expiresMS and returns the ids of the members live at nowMS (id
// included, unless leaving).
// A leaving consumer (one stopping, its partitions handed over) is kept
// as a member with minus its expiry as score: the givers' watch still
// sees it alive, and it counts in no one's fair share. Members whose
// heartbeat expired long ago (before nowMS - gcMS) are removed, a few per
// call.
func (s *Store) Heartbeat(ctx context.Context, topic, id string, leaving bool, nowMS, expiresMS, gcMS int64) ([]string, error) {
	k := keys.Members(s.ns, topic)
	score := expiresMS
	if leaving {
		score = -expiresMS
	}
	r, err := s.do(ctx,
		cmd{"ZADD", []any{k, score, id}},
		cmd{"ZRANGEBYSCORE", []any{k, nowMS, "+inf"}},
		cmd{"ZRANGEBYSCORE", []any{k, 0, nowMS - gcMS, "LIMIT", 0, 16}},
		cmd{"ZRANGEBYSCORE", []any{k, -(nowMS - gcMS), "(0", "LIMIT", 0, 16}},
	)
	if err != nil {
		return nil, fmt.Errorf("heartbeat of %s in %s: %w", id, topic, err)
	}
	live, _ := redis.Strings(r[1], nil)
	old, _ := redis.Strings(r[2], nil)
	gone, _ := redis.Strings(r[3], nil)
	if old = append(old, gone...); len(old) > 0 {
		if _, err := s.do(ctx, cmd{"ZREM", append([]any{k}, strs(old)...)}); err != nil {
			return live, fmt.Errorf("forget old members of %s: %w", topic, err)
		}
	}
	return live, nil
}

// Leave removes consumer id from topic's members.
func (s *Store) Leave(ctx context.Context, topic, id string) error {
	if _, err := s.do(ctx, cmd{"ZREM", []any{keys.Members(s.ns, topic), id}}); err != nil {
		return fmt.Errorf("leave %s: %w", topic, err)
	}
	return nil
}
