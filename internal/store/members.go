package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Heartbeat records consumer id as live in topic's members ZSET until
// expiresMS and returns the number of members live at nowMS (id included).
// Members whose heartbeat expired long ago (before nowMS - gcMS) are
// removed, a few per call.
func (s *Store) Heartbeat(ctx context.Context, topic, id string, nowMS, expiresMS, gcMS int64) (int, error) {
	k := keys.Members(s.ns, topic)
	r, err := s.do(ctx,
		cmd{"ZADD", []any{k, expiresMS, id}},
		cmd{"ZCOUNT", []any{k, nowMS, "+inf"}},
		cmd{"ZRANGEBYSCORE", []any{k, 0, nowMS - gcMS, "LIMIT", 0, 16}},
	)
	if err != nil {
		return 0, fmt.Errorf("heartbeat of %s in %s: %w", id, topic, err)
	}
	live, _ := redis.Int(r[1], nil)
	if old, _ := redis.Strings(r[2], nil); len(old) > 0 {
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

// Members returns the live members of topic at nowMS with their heartbeat
// expiry (unix ms).
func (s *Store) Members(ctx context.Context, topic string, nowMS int64) (map[string]int64, error) {
	r, err := s.do(ctx, cmd{"ZRANGEBYSCORE", []any{keys.Members(s.ns, topic), nowMS, "+inf", "WITHSCORES"}})
	if err != nil {
		return nil, err
	}
	vals, _ := redis.Strings(r[0], nil)
	out := map[string]int64{}
	for i := 0; i+1 < len(vals); i += 2 {
		v, _ := redis.Int64([]byte(vals[i+1]), nil)
		out[vals[i]] = v
	}
	return out, nil
}
