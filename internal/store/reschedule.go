package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Reschedule moves a scheduled message to a new due time (unix ms).
// ErrNotFound if there is no such message, ErrNotScheduled if it is in
// flight or dead (or was claimed while this ran).
func (s *Store) Reschedule(ctx context.Context, topic string, p int, id string, dueMS, nowMS int64) error {
	// Twice at most: a message moved out of its segment by a claim
	// meanwhile is rescheduled as a record of its own.
	for try := 0; ; try++ {
		err := s.reschedule(ctx, topic, p, id, dueMS, nowMS)
		if !errors.Is(err, errExploded) {
			return err
		}
		if try == 1 {
			return fmt.Errorf("%w: %q in topic %s was claimed meanwhile", ErrNotScheduled, id, topic)
		}
	}
}

// errExploded says a message left its segment while Reschedule ran.
var errExploded = errors.New("segment exploded meanwhile")

func (s *Store) reschedule(ctx context.Context, topic string, p int, id string, dueMS, nowMS int64) error {
	sk, mk := keys.Scheduled(s.ns, topic, p), keys.Records(s.ns, topic, p)
	r, err := s.do(ctx, append([]cmd{{"HGET", []any{mk, id}}, {"ZSCORE", []any{sk, id}}}, segReads(mk, id)...)...)
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	if r[0] == nil {
		e, err := segHeld(r[2:], id)
		if err != nil {
			return fmt.Errorf("reschedule %q: %w", id, err)
		}
		if e == nil {
			return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
		}
		return s.rescheduleHeld(ctx, topic, p, id, e, dueMS, nowMS)
	}
	if r[1] == nil {
		return fmt.Errorf("%w: %q in topic %s is in flight or dead", ErrNotScheduled, id, topic)
	}
	b, _ := redis.Bytes(r[0], nil)
	rec, err := DecodeRecord(b)
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	old, _ := redis.Int64(r[1], nil)
	rec.Due, rec.Updated = dueMS, nowMS
	// The record is rewritten only if it still exists: a message claimed
	// and acked since the read above must not come back.
	ok, err := s.update(ctx, topic, p, []string{id}, []*Record{rec})
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	if !ok[0] {
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
	}
	r2, err := s.do(ctx, cmd{"ZADD", []any{sk, "XX", "CH", dueMS, id}},
		cmd{"ZSCORE", []any{keys.InFlight(s.ns, topic, p), id}},
		cmd{"ZSCORE", []any{keys.Dead(s.ns, topic, p), id}})
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	if ch, _ := redis.Int64(r2[0], nil); ch == 0 && old != dueMS && (r2[1] != nil || r2[2] != nil) {
		return fmt.Errorf("%w: %q in topic %s was claimed meanwhile", ErrNotScheduled, id, topic)
	}
	// Rescheduled; or its entry went meanwhile, but not to flight or
	// death (a move of a change of the partition count took it): then
	// the record, which has the new due, is in no index, and is indexed
	// at that due by the mover or the reconciler.
	return nil
}

// rescheduleHeld reschedules a message held by a segment: it moves it out
// with its new due time, then indexes it. Should it stop in between, the
// record is in no index and the reconciler indexes it at its new due time.
func (s *Store) rescheduleHeld(ctx context.Context, topic string, p int, id string, e *segEntry, dueMS, nowMS int64) error {
	rec, err := DecodeRecord(e.rec)
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	rec.Due, rec.Updated = dueMS, nowMS
	mk := keys.Records(s.ns, topic, p)
	r, err := s.script(ctx, segMoveOutScript, mk, id, keys.SegmentField(id[:SegmentPrefixLen]), id[SegmentPrefixLen:], rec.Encode())
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	switch n, _ := redis.Int(r, nil); n {
	case 0:
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
	case 2:
		return errExploded
	}
	if _, err := s.do(ctx, cmd{"ZADD", []any{keys.Scheduled(s.ns, topic, p), dueMS, id}}); err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	return nil
}
