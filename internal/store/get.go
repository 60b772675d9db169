package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// State is where a message is.
type State int

// States of a message.
const (
	StateUnknown   State = iota
	StateScheduled       // in the scheduled ZSET
	StateInFlight        // claimed, in the in-flight ZSET
	StateDead            // in the dead ZSET
	// StateDone: acked with a uniqueness window, its id kept as a Done
	// (whose Until the caller compares with its clock).
	StateDone
)

// Found is a message as Get sees it.
type Found struct {
	Record *Record
	State  State
	Score  int64 // due (scheduled), visibility deadline (in flight), died at (dead) or finished (done)
	Done   Done  // StateDone's
	// Indexed is false for a record in no index (a crash between two
	// steps), reported as scheduled at its recorded due.
	Indexed bool
}

// Get reads one message: its record and the index that holds it. A record
// without an index entry (a crash between two steps, repaired by the
// reconciler) is reported as scheduled at its recorded due time.
func (s *Store) Get(ctx context.Context, tp TopicPartition, id string) (*Found, error) {
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	cmds := []cmd{
		{"HGET", []any{mk, id}},
		{"ZSCORE", []any{keys.Scheduled(s.ns, tp.Topic, tp.P), id}},
		{"ZSCORE", []any{keys.InFlight(s.ns, tp.Topic, tp.P), id}},
		{"ZSCORE", []any{keys.Dead(s.ns, tp.Topic, tp.P), id}},
	}
	r, err := s.do(ctx, append(cmds, segReads(mk, id)...)...)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", id, err)
	}
	if r[0] == nil {
		e, err := segHeld(r[4:], id)
		if err != nil {
			return nil, fmt.Errorf("get %q: %w", id, err)
		}
		if e == nil {
			return nil, fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, tp.Topic)
		}
		rec, err := DecodeRecord(e.rec)
		if err != nil {
			return nil, fmt.Errorf("get %q: %w", id, err)
		}
		return &Found{Record: rec, State: StateScheduled, Score: e.due, Indexed: true}, nil
	}
	b, _ := redis.Bytes(r[0], nil)
	if d, ok := DecodeDone(b); ok {
		return &Found{State: StateDone, Score: d.Finished, Done: d, Indexed: true}, nil
	}
	rec, err := DecodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", id, err)
	}
	f := &Found{Record: rec, State: StateScheduled, Score: rec.Due}
	for i, st := range []State{StateScheduled, StateInFlight, StateDead} {
		if r[1+i] != nil {
			sc, _ := redis.Int64(r[1+i], nil)
			f.State, f.Score, f.Indexed = st, sc, true
			break
		}
	}
	return f, nil
}
