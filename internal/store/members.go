package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/lease"
	"github.com/gomodule/redigo/redis"
)

// Heartbeat records consumer b.ID as live in b.Topic's members ZSET
// until b.ExpiresMS and returns the ids of the members live at b.NowMS
// (b.ID included, unless leaving), and the earliest expiry among the others
// (unix ms; 0 when there are none).
// A leaving consumer (one stopping, its partitions handed over) is kept
// as a member with minus its expiry as score: the givers' watch still
// sees it alive, and it counts in no one's fair share. Members whose
// heartbeat expired long ago (before b.NowMS - b.GCMS) are removed. Two
// commands: the ZADD and one read of the whole set.
func (s *Store) Heartbeat(ctx context.Context, b lease.Beat) (live []string, nextExpiryMS int64, err error) {
	topic, id, leaving, nowMS, expiresMS, gcMS := b.Topic, b.ID, b.Leaving, b.NowMS, b.ExpiresMS, b.GCMS
	k := keys.Members(s.ns, topic)
	score := expiresMS
	if leaving {
		score = -expiresMS
	}
	// The whole set in one read: a topic has a member per consumer, and
	// the old ones are forgotten here.
	r, err := s.do(ctx,
		cmd{"ZADD", []any{k, score, id}},
		cmd{"ZRANGE", []any{k, 0, -1, "WITHSCORES"}},
	)
	if err != nil {
		return nil, 0, fmt.Errorf("heartbeat of %s in %s: %w", id, topic, err)
	}
	all, err := redis.Strings(r[1], nil)
	if err != nil {
		return nil, 0, fmt.Errorf("heartbeat of %s in %s: %w", id, topic, err)
	}
	var old []string
	for i := 0; i+1 < len(all); i += 2 {
		member := all[i]
		sc, err := strconv.ParseFloat(all[i+1], 64)
		if err != nil {
			return nil, 0, fmt.Errorf("heartbeat of %s in %s: score %q of %s: %w", id, topic, all[i+1], member, err)
		}
		switch ms := int64(sc); {
		case ms >= nowMS:
			live = append(live, member)
			if member != id && (nextExpiryMS == 0 || ms < nextExpiryMS) {
				nextExpiryMS = ms
			}
		case ms >= 0 && ms <= nowMS-gcMS, ms < 0 && -ms <= nowMS-gcMS:
			old = append(old, member) // expired, or left, gcMS ago
		}
	}
	if len(old) > 0 {
		if _, err := s.do(ctx, cmd{"ZREM", append([]any{k}, strs(old)...)}); err != nil {
			return live, nextExpiryMS, fmt.Errorf("forget old members of %s: %w", topic, err)
		}
	}
	return live, nextExpiryMS, nil
}

// LiveMembers counts topic's members whose heartbeat is current at nowMS
// (unix ms), leaving ones not counted (they are scored minus their
// expiry): one ZCOUNT, whatever the number of members.
func (s *Store) LiveMembers(ctx context.Context, topic string, nowMS int64) (int, error) {
	r, err := s.do(ctx, s.liveMembersCmd(topic, nowMS))
	if err != nil {
		return 0, fmt.Errorf("live members of %s: %w", topic, err)
	}
	return redis.Int(r[0], nil)
}

// liveMembersCmd counts topic's members live at nowMS: leaving members
// are scored minus their expiry, and are not counted.
func (s *Store) liveMembersCmd(topic string, nowMS int64) cmd {
	return cmd{"ZCOUNT", []any{keys.Members(s.ns, topic), "(" + itoa(nowMS), "+inf"}}
}

// Leave removes consumer id from topic's members.
func (s *Store) Leave(ctx context.Context, topic, id string) error {
	if _, err := s.do(ctx, cmd{"ZREM", []any{keys.Members(s.ns, topic), id}}); err != nil {
		return fmt.Errorf("leave %s: %w", topic, err)
	}
	return nil
}
