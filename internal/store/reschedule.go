package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Reschedule moves a message that is scheduled, or claimed ahead by a
// consumer and not started, to a new due time (unix ms). ErrNotFound if
// there is no such message, ErrRunning if a delivery of it started (see
// StartMany), ErrNotScheduled if it is dead.
//
// The record is rewritten only while it is the one read, and while no
// delivery of it started (rescheduleScript compares its header, and
// looks for its running mark), then indexed at the new due. A consumer holding the
// message until its old due finds, at its start, a record that is not
// the one it claimed: it does not start it, and returns it to scheduled
// at the record's due (see StartMany). Should Reschedule stop between the
// two writes, the record, which has the new due, is claimed by its old
// entry (and held or returned to its due) or indexed by the reconciler.
func (s *Store) Reschedule(ctx context.Context, tp TopicPartition, id string, dueMS, nowMS int64) error {
	// A few times at most: a message moved out of its segment by a claim,
	// or whose record changed, meanwhile is read again.
	for try := 0; ; try++ {
		err := s.reschedule(ctx, tp, id, dueMS, nowMS)
		if !errors.Is(err, errChanged) {
			return err
		}
		if try == 4 {
			return fmt.Errorf("%w: %q in topic %s kept changing while it was rescheduled", ErrNotScheduled, id, tp.Topic)
		}
	}
}

// errChanged says a message's record changed (or left its segment)
// while Reschedule ran.
var errChanged = errors.New("record changed meanwhile")

// rescheduleScript writes a rescheduled record over the record read,
// unless a delivery of it started meanwhile (its running mark).
// KEYS[1]: records HASH. ARGV[1]: id, ARGV[2]: the new record, ARGV[3]:
// the header of the record read, ARGV[4]: the id's running mark.
// Returns 0 (written), -1 (gone), -2 (a delivery started) or 1 (the
// record changed: read it again).
var rescheduleScript = newScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return -1 end
if redis.call('HGET', KEYS[1], ARGV[4]) then return -2 end
if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then return 1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 0
`)

func (s *Store) reschedule(ctx context.Context, tp TopicPartition, id string, dueMS, nowMS int64) error {
	sk, mk := keys.Scheduled(s.ns, tp.Topic, tp.P), keys.Records(s.ns, tp.Topic, tp.P)
	r, err := s.do(ctx, append([]cmd{{"HGET", []any{mk, id}}, {"ZSCORE", []any{keys.Dead(s.ns, tp.Topic, tp.P), id}}, {"HGET", []any{mk, keys.RunningField(id)}}}, segReads(mk, id)...)...)
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	if r[0] == nil {
		e, err := segHeld(r[3:], id)
		if err != nil {
			return fmt.Errorf("reschedule %q: %w", id, err)
		}
		if e == nil {
			return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, tp.Topic)
		}
		return s.rescheduleHeld(ctx, tp, id, e, dueMS, nowMS)
	}
	b, _ := redis.Bytes(r[0], nil)
	rec, err := DecodeRecord(b)
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	switch {
	case r[2] != nil:
		return fmt.Errorf("%w: message %q in topic %s: not rescheduled", ErrRunning, id, tp.Topic)
	case r[1] != nil:
		return fmt.Errorf("%w: %q in topic %s is dead", ErrNotScheduled, id, tp.Topic)
	}
	was := rec.Header()
	rec.Due, rec.Updated = dueMS, max(nowMS, rec.Updated+1)
	st, err := s.script(ctx, rescheduleScript, mk, id, rec.Encode(), was, keys.RunningField(id))
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	switch n, _ := redis.Int(st, nil); n {
	case -1:
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, tp.Topic)
	case -2:
		return fmt.Errorf("%w: message %q in topic %s: not rescheduled", ErrRunning, id, tp.Topic)
	case 0:
	default:
		return errChanged
	}
	if _, err := s.do(ctx, cmd{"ZADD", []any{sk, dueMS, id}}); err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	return nil
}

// rescheduleHeld reschedules a message held by a segment: it moves it out
// with its new due time, then indexes it. Should it stop in between, the
// record is in no index and the reconciler indexes it at its new due time.
func (s *Store) rescheduleHeld(ctx context.Context, tp TopicPartition, id string, e *segEntry, dueMS, nowMS int64) error {
	rec, err := DecodeRecord(e.rec)
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	rec.Due, rec.Updated = dueMS, nowMS
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	r, err := s.script(ctx, segMoveOutScript, mk, id, keys.SegmentField(id[:SegmentPrefixLen]), id[SegmentPrefixLen:], rec.Encode())
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	switch n, _ := redis.Int(r, nil); n {
	case 0:
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, tp.Topic)
	case 2:
		return errChanged
	}
	if _, err := s.do(ctx, cmd{"ZADD", []any{keys.Scheduled(s.ns, tp.Topic, tp.P), dueMS, id}}); err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	return nil
}
