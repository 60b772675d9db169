package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// New is a message to add.
type New struct {
	ID     string
	Record *Record
}

// Group is the messages to add to one partition.
type Group struct {
	Topic string
	P     int
	Msgs  []New
}

// Add writes the messages of one partition; see AddMany.
func (s *Store) Add(ctx context.Context, topic string, p int, msgs []New) (errs []error, err error) {
	all, err := s.AddMany(ctx, []Group{{Topic: topic, P: p, Msgs: msgs}})
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// AddMany writes messages of any number of partitions in two pipelined
// round trips: first each partition's records with one script that
// HSETNXes them all (an existing id is ErrDuplicate in its slot of the
// result), then, once those replies are in, one ZADD per partition of the
// accepted ids into its scheduled ZSET: two commands per partition however
// many messages it gets.
// errs[g][i] is nil when groups[g].Msgs[i] was accepted. err is a failure
// of the whole call, after which some messages may have been written
// (records without their ZADD are re-indexed by the reconciler).
func (s *Store) AddMany(ctx context.Context, groups []Group) (errs [][]error, err error) {
	var adds []cmd
	for _, g := range groups {
		if len(g.Msgs) == 0 {
			continue
		}
		args := make([]any, 0, 2+2*len(g.Msgs))
		args = append(args, addScript.Hash(), 1, keys.Records(s.ns, g.Topic, g.P))
		for _, n := range g.Msgs {
			args = append(args, n.ID, n.Record.Encode())
		}
		adds = append(adds, cmd{"EVALSHA", args})
	}
	errs = make([][]error, len(groups))
	if len(adds) == 0 {
		return errs, nil
	}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := pipeScripts(ctx, c, addScript, adds)
	if err != nil {
		return nil, fmt.Errorf("add messages to %d partitions: %w", len(adds), err)
	}
	var zadds []cmd
	k := 0
	for gi, g := range groups {
		errs[gi] = make([]error, len(g.Msgs))
		if len(g.Msgs) == 0 {
			continue
		}
		if e, ok := r[k].(redis.Error); ok {
			return nil, fmt.Errorf("add to partition %d: %w", g.P, e)
		}
		set, err := redis.Ints(r[k], nil)
		if err != nil || len(set) != len(g.Msgs) {
			return nil, fmt.Errorf("add to partition %d: bad reply %v (%v)", g.P, r[k], err)
		}
		k++
		zadd := []any{keys.Scheduled(s.ns, g.Topic, g.P)}
		for i, n := range g.Msgs {
			if set[i] == 0 {
				errs[gi][i] = fmt.Errorf("%w: %q in topic %s", ErrDuplicate, n.ID, g.Topic)
			} else {
				zadd = append(zadd, n.Record.Due, n.ID)
			}
		}
		if len(zadd) > 1 {
			zadds = append(zadds, cmd{"ZADD", zadd})
		}
	}
	if len(zadds) > 0 {
		rz, err := pipe(ctx, c, zadds)
		if err != nil {
			return nil, fmt.Errorf("index %d partitions: %w", len(zadds), err)
		}
		if err := firstErr(rz); err != nil {
			return nil, fmt.Errorf("index %d partitions: %w", len(zadds), err)
		}
	}
	return errs, nil
}

// State is where a message is.
type State int

// States of a message.
const (
	StateUnknown   State = iota
	StateScheduled       // in the scheduled ZSET
	StateInFlight        // claimed, in the in-flight ZSET
	StateDead            // in the dead ZSET
)

// Found is a message as Get sees it.
type Found struct {
	Record *Record
	State  State
	Score  int64 // due (scheduled), visibility deadline (in flight) or died at (dead)
}

// Get reads one message: its record and the index that holds it. A record
// without an index entry (a crash between two steps, repaired by the
// reconciler) is reported as scheduled at its recorded due time.
func (s *Store) Get(ctx context.Context, topic string, p int, id string) (*Found, error) {
	r, err := s.do(ctx,
		cmd{"HGET", []any{keys.Records(s.ns, topic, p), id}},
		cmd{"ZSCORE", []any{keys.Scheduled(s.ns, topic, p), id}},
		cmd{"ZSCORE", []any{keys.InFlight(s.ns, topic, p), id}},
		cmd{"ZSCORE", []any{keys.Dead(s.ns, topic, p), id}},
	)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", id, err)
	}
	if r[0] == nil {
		return nil, fmt.Errorf("%w: %q in topic %s", ErrNotFound, id, topic)
	}
	b, _ := redis.Bytes(r[0], nil)
	rec, err := DecodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", id, err)
	}
	f := &Found{Record: rec, State: StateScheduled, Score: rec.Due}
	for i, st := range []State{StateScheduled, StateInFlight, StateDead} {
		if r[1+i] != nil {
			sc, _ := redis.Int64(r[1+i], nil)
			f.State, f.Score = st, sc
			break
		}
	}
	return f, nil
}

// Delete removes a message from wherever it is: the record first, then its
// index entries, so a crash in between leaves a tombstone, never a message
// that comes back. ErrNotFound if there was nothing to remove.
func (s *Store) Delete(ctx context.Context, topic string, p int, id string) error {
	r, err := s.steps(ctx,
		[]cmd{{"HDEL", []any{keys.Records(s.ns, topic, p), id}}},
		[]cmd{
			{"ZREM", []any{keys.Scheduled(s.ns, topic, p), id}},
			{"ZREM", []any{keys.InFlight(s.ns, topic, p), id}},
			{"ZREM", []any{keys.Dead(s.ns, topic, p), id}},
		})
	if err != nil {
		return fmt.Errorf("delete %q: %w", id, err)
	}
	if n, _ := redis.Int64(r[0][0], nil); n == 0 {
		return fmt.Errorf("%w: %q in topic %s", ErrNotFound, id, topic)
	}
	return nil
}

// Reschedule moves a scheduled message to a new due time (unix ms).
// ErrNotFound if there is no such message, ErrNotScheduled if it is in
// flight or dead (or was claimed while this ran).
func (s *Store) Reschedule(ctx context.Context, topic string, p int, id string, dueMS, nowMS int64) error {
	sk, mk := keys.Scheduled(s.ns, topic, p), keys.Records(s.ns, topic, p)
	r, err := s.do(ctx, cmd{"HGET", []any{mk, id}}, cmd{"ZSCORE", []any{sk, id}})
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	if r[0] == nil {
		return fmt.Errorf("%w: %q in topic %s", ErrNotFound, id, topic)
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
		return fmt.Errorf("%w: %q in topic %s", ErrNotFound, id, topic)
	}
	r2, err := s.do(ctx, cmd{"ZADD", []any{sk, "XX", "CH", dueMS, id}})
	if err != nil {
		return fmt.Errorf("reschedule %q: %w", id, err)
	}
	if ch, _ := redis.Int64(r2[0], nil); ch == 0 && old != dueMS {
		return fmt.Errorf("%w: %q in topic %s was claimed meanwhile", ErrNotScheduled, id, topic)
	}
	return nil
}
