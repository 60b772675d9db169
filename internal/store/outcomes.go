package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Ack removes delivered messages: records and in-flight entries, in one
// pipelined round trip. Should only the ZREM land (a backend failed in
// between), the record is found in no index and re-indexed by the
// reconciler: a duplicate delivery after a fault, never a loss.
func (s *Store) Ack(ctx context.Context, topic string, p int, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.do(ctx,
		cmd{"HDEL", append([]any{keys.Records(s.ns, topic, p)}, strs(ids)...)},
		cmd{"ZREM", append([]any{keys.InFlight(s.ns, topic, p)}, strs(ids)...)})
	if err != nil {
		return fmt.Errorf("ack %d in partition %d: %w", len(ids), p, err)
	}
	return nil
}

// Drop removes in-flight entries without touching records (tombstones).
func (s *Store) Drop(ctx context.Context, topic string, p int, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.do(ctx, cmd{"ZREM", append([]any{keys.InFlight(s.ns, topic, p)}, strs(ids)...)})
	if err != nil {
		return fmt.Errorf("drop %d in partition %d: %w", len(ids), p, err)
	}
	return nil
}

// Move is an in-flight message going back to scheduled or to dead.
type Move struct {
	ID     string
	Dead   bool    // to the dead ZSET (scored Score = time of death) instead of scheduled (Score = due)
	Score  int64   // unix ms
	Record *Record // written when not nil (and only if the record still exists)
}

// Moves writes the records that carry one (only where the record still
// exists: a message deleted meanwhile is not brought back), then the
// destinations (ZADD to scheduled and dead), then removes the in-flight
// entries. Used for retries, deaths, expired visibility deadlines and held
// messages returned at shutdown. It returns how many moves were skipped
// because their record was gone.
func (s *Store) Moves(ctx context.Context, topic string, p int, moves []Move) (gone int, err error) {
	if len(moves) == 0 {
		return 0, nil
	}
	var ids []string
	var recs []*Record
	for _, m := range moves {
		if m.Record != nil {
			ids = append(ids, m.ID)
			recs = append(recs, m.Record)
		}
	}
	alive := map[string]bool{}
	if len(ids) > 0 {
		ok, err := s.update(ctx, topic, p, ids, recs)
		if err != nil {
			return 0, fmt.Errorf("move %d in partition %d: %w", len(moves), p, err)
		}
		for i, id := range ids {
			alive[id] = ok[i]
		}
	}
	sched := []any{keys.Scheduled(s.ns, topic, p)}
	dead := []any{keys.Dead(s.ns, topic, p)}
	rem := []any{keys.InFlight(s.ns, topic, p)}
	for _, m := range moves {
		rem = append(rem, m.ID)
		if m.Record != nil && !alive[m.ID] {
			gone++
			continue
		}
		if m.Dead {
			dead = append(dead, m.Score, m.ID)
		} else {
			sched = append(sched, m.Score, m.ID)
		}
	}
	var first []cmd
	if len(sched) > 1 {
		first = append(first, cmd{"ZADD", sched})
	}
	if len(dead) > 1 {
		first = append(first, cmd{"ZADD", dead})
	}
	if _, err := s.steps(ctx, first, []cmd{{"ZREM", rem}}); err != nil {
		return gone, fmt.Errorf("move %d in partition %d: %w", len(moves), p, err)
	}
	return gone, nil
}

// update overwrites the records of ids that still exist and reports, per
// id, whether it did.
func (s *Store) update(ctx context.Context, topic string, p int, ids []string, recs []*Record) ([]bool, error) {
	args := make([]any, 0, 1+2*len(ids))
	args = append(args, keys.Records(s.ns, topic, p))
	for i, id := range ids {
		args = append(args, id, recs[i].Encode())
	}
	r, err := s.script(ctx, updateScript, args...)
	if err != nil {
		return nil, fmt.Errorf("update records in partition %d: %w", p, err)
	}
	vals, err := intsOf(r, len(ids))
	if err != nil {
		return nil, fmt.Errorf("update records in partition %d: %w", p, err)
	}
	ok := make([]bool, len(ids))
	for i, v := range vals {
		ok[i] = v == 1
	}
	return ok, nil
}

// CorruptMove returns the move of an in-flight message whose record could
// not be decoded (rec.Corrupt set) to the dead set, at nowMS: its record
// is replaced by one whose body is the stored bytes and whose last error
// is the decode error, so that it is listed, requeued and purged like any
// dead message, and nothing is lost.
func CorruptMove(id string, rec *Record, nowMS int64) Move {
	r := &Record{
		Due: nowMS, Created: nowMS, Updated: nowMS,
		LastError: fmt.Sprintf("undecodable record (%d bytes): %v", len(rec.Body), rec.Corrupt),
		Body:      rec.Body,
	}
	return Move{ID: id, Dead: true, Score: nowMS, Record: r}
}

// Expired returns up to limit in-flight ids whose visibility deadline is at
// or before nowMS, with their records (nil for tombstones).
func (s *Store) Expired(ctx context.Context, topic string, p int, nowMS int64, limit int) ([]string, []*Record, error) {
	r, err := s.do(ctx, cmd{"ZRANGEBYSCORE", []any{keys.InFlight(s.ns, topic, p), 0, nowMS, "LIMIT", 0, limit}})
	if err != nil {
		return nil, nil, fmt.Errorf("expired in partition %d: %w", p, err)
	}
	ids, _ := redis.Strings(r[0], nil)
	if len(ids) == 0 {
		return nil, nil, nil
	}
	recs, err := s.Records(ctx, topic, p, ids)
	return ids, recs, err
}

// Records reads the records of ids (nil for missing ones, Corrupt set on
// undecodable ones).
func (s *Store) Records(ctx context.Context, topic string, p int, ids []string) ([]*Record, error) {
	r, err := s.do(ctx, cmd{"HMGET", append([]any{keys.Records(s.ns, topic, p)}, strs(ids)...)})
	if err != nil {
		return nil, fmt.Errorf("records in partition %d: %w", p, err)
	}
	raw, _ := redis.ByteSlices(r[0], nil)
	return decodeAll(raw, len(ids)), nil
}
