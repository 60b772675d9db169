package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// DeadEntry is one message of the dead set.
type DeadEntry struct {
	ID     string
	DiedAt int64 // unix ms
	Record *Record
}

// ListDead returns up to limit dead messages of partition tp, oldest death first.
func (s *Store) ListDead(ctx context.Context, tp TopicPartition, limit int) ([]DeadEntry, error) {
	out, err := s.deadRange(ctx, tp, limit)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	recs, err := s.Records(ctx, tp, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Record = recs[i]
	}
	return out, nil
}

// deadRange returns up to limit entries of partition tp's dead set, oldest
// death first, without their records.
func (s *Store) deadRange(ctx context.Context, tp TopicPartition, limit int) ([]DeadEntry, error) {
	r, err := s.do(ctx, cmd{"ZRANGE", []any{keys.Dead(s.ns, tp.Topic, tp.P), 0, limit - 1, "WITHSCORES"}})
	if err != nil {
		return nil, fmt.Errorf("dead of partition %d: %w", tp.P, err)
	}
	vals, _ := redis.Strings(r[0], nil)
	var out []DeadEntry
	for i := 0; i+1 < len(vals); i += 2 {
		at, _ := redis.Int64([]byte(vals[i+1]), nil)
		out = append(out, DeadEntry{ID: vals[i], DiedAt: at})
	}
	return out, nil
}

// deadTargets returns the ids a dead-set operation acts on: those of ids
// that are dead (never a live message by mistake), or, when ids is empty,
// up to limit of partition tp's dead set.
func (s *Store) deadTargets(ctx context.Context, tp TopicPartition, ids []string, limit int) ([]string, error) {
	if len(ids) == 0 {
		list, err := s.deadRange(ctx, tp, limit)
		for _, e := range list {
			ids = append(ids, e.ID)
		}
		return ids, err
	}
	dk := keys.Dead(s.ns, tp.Topic, tp.P)
	checks := make([]cmd, len(ids))
	for i, id := range ids {
		checks[i] = cmd{"ZSCORE", []any{dk, id}}
	}
	got, err := s.do(ctx, checks...)
	if err != nil {
		return nil, err
	}
	var dead []string
	for i, id := range ids {
		if got[i] != nil {
			dead = append(dead, id)
		}
	}
	return dead, nil
}

// RequeueDead moves the given dead ids (all of partition tp's when ids is
// empty, up to limit) back to scheduled, due at nowMS with their attempts
// reset. It returns how many it moved.
func (s *Store) RequeueDead(ctx context.Context, tp TopicPartition, ids []string, nowMS int64, limit int) (int, error) {
	dk := keys.Dead(s.ns, tp.Topic, tp.P)
	live, err := s.deadTargets(ctx, tp, ids, limit)
	if err != nil {
		return 0, fmt.Errorf("requeue dead of partition %d: %w", tp.P, err)
	}
	if len(live) == 0 {
		return 0, nil
	}
	recs, err := s.Records(ctx, tp, live)
	if err != nil {
		return 0, err
	}
	var upIDs []string
	var upRecs []*Record
	var gone []any
	for i, id := range live {
		if recs[i] == nil { // tombstone: drop it
			gone = append(gone, id)
			continue
		}
		recs[i].Attempts, recs[i].Due, recs[i].Updated = 0, nowMS, nowMS
		upIDs = append(upIDs, id)
		upRecs = append(upRecs, recs[i])
	}
	zadd := []any{keys.Scheduled(s.ns, tp.Topic, tp.P)}
	var moved []any
	if len(upIDs) > 0 {
		ok, err := s.update(ctx, tp, upIDs, upRecs)
		if err != nil {
			return 0, fmt.Errorf("requeue dead of partition %d: %w", tp.P, err)
		}
		for i, id := range upIDs {
			if !ok[i] { // deleted meanwhile
				gone = append(gone, id)
				continue
			}
			zadd = append(zadd, nowMS, id)
			moved = append(moved, id)
		}
	}
	var first []cmd
	if len(zadd) > 1 {
		first = append(first, cmd{"ZADD", zadd})
	}
	if _, err := s.steps(ctx, first, []cmd{{"ZREM", append(append([]any{dk}, moved...), gone...)}}); err != nil {
		return 0, fmt.Errorf("requeue dead of partition %d: %w", tp.P, err)
	}
	return len(moved), nil
}

// PurgeDead deletes the given dead ids (all of partition tp's when ids is
// empty, up to limit): records (with any running marks) first, then dead
// entries. Returns how many.
func (s *Store) PurgeDead(ctx context.Context, tp TopicPartition, ids []string, limit int) (int, error) {
	ids, err := s.deadTargets(ctx, tp, ids, limit)
	if err != nil {
		return 0, fmt.Errorf("purge dead of partition %d: %w", tp.P, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	_, err = s.steps(ctx,
		[]cmd{{"HDEL", append(runningFields([]any{keys.Records(s.ns, tp.Topic, tp.P)}, ids), strs(ids)...)}},
		[]cmd{{"ZREM", append([]any{keys.Dead(s.ns, tp.Topic, tp.P)}, strs(ids)...)}})
	if err != nil {
		return 0, fmt.Errorf("purge dead of partition %d: %w", tp.P, err)
	}
	return len(ids), nil
}
