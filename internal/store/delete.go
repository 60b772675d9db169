package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Delete removes a message from wherever it is: the record first, then its
// index entries, so a crash in between leaves a tombstone, never a message
// that comes back. ErrNotFound if there was nothing to remove; ErrRunning
// if a delivery of it had started (see StartMany): it is removed all the
// same, and is not retried, but that delivery may run to its end.
func (s *Store) Delete(ctx context.Context, tp TopicPartition, id string) error {
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	var removed any
	var err error
	if len(id) == SegmentIDLen {
		// The record, or the segment's entry.
		removed, err = s.script(ctx, segDeleteScript, mk, id, keys.SegmentField(id[:SegmentPrefixLen]), id[SegmentPrefixLen:])
	} else {
		removed, err = s.script(ctx, deleteScript, mk, id)
	}
	if err != nil {
		return fmt.Errorf("delete %q: %w", id, err)
	}
	_, err = s.do(ctx,
		cmd{"ZREM", []any{keys.Scheduled(s.ns, tp.Topic, tp.P), id}},
		cmd{"ZREM", []any{keys.InFlight(s.ns, tp.Topic, tp.P), id}},
		cmd{"ZREM", []any{keys.Dead(s.ns, tp.Topic, tp.P), id}})
	if err != nil {
		return fmt.Errorf("delete %q: %w", id, err)
	}
	switch n, _ := redis.Int64(removed, nil); n {
	case DeleteNone:
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, tp.Topic)
	case DeleteRunning:
		return fmt.Errorf("%w: message %q in topic %s: deleted, and not retried, but the delivery that started may run to its end", ErrRunning, id, tp.Topic)
	}
	return nil
}

// Outcomes of a delete, per message.
const (
	DeleteNone    = 0 // nothing to remove
	DeleteDone    = 1 // removed before any delivery of it started
	DeleteRunning = 2 // removed, but a delivery of it had started
)

// DeleteMany removes the messages of ids from partition tp as Delete
// removes each, in two round trips for them all: their records first
// (deleteManyScript, which also cuts those a segment holds out of it),
// then their entries in the three indexes. It reports, per id, what it
// did: DeleteNone, DeleteDone or DeleteRunning.
func (s *Store) DeleteMany(ctx context.Context, tp TopicPartition, ids []string) ([]int, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	args := scriptCall(deleteManyScript, mk, 3*len(ids))
	for _, id := range ids {
		if len(id) == SegmentIDLen {
			args = append(args, id, keys.SegmentField(id[:SegmentPrefixLen]), id[SegmentPrefixLen:])
		} else {
			args = append(args, id, "", "")
		}
	}
	r, err := s.do(ctx, cmd{"EVALSHA", args})
	if err != nil {
		return nil, fmt.Errorf("delete %d in partition %d: %w", len(ids), tp.P, err)
	}
	removed, err := intsOf(r[0], len(ids))
	if err != nil {
		return nil, fmt.Errorf("delete %d in partition %d: %w", len(ids), tp.P, err)
	}
	_, err = s.do(ctx,
		cmd{"ZREM", append([]any{keys.Scheduled(s.ns, tp.Topic, tp.P)}, strs(ids)...)},
		cmd{"ZREM", append([]any{keys.InFlight(s.ns, tp.Topic, tp.P)}, strs(ids)...)},
		cmd{"ZREM", append([]any{keys.Dead(s.ns, tp.Topic, tp.P)}, strs(ids)...)})
	if err != nil {
		return nil, fmt.Errorf("delete %d in partition %d: %w", len(ids), tp.P, err)
	}
	return removed, nil
}
