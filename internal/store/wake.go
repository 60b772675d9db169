package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// The counters of the changes hash (keys.Changes), which a process reads
// in one HMGET per tick (Changes) to act at once: a topic's change counter,
// bumped when a consumer joins, leaves or gives a partition up, or the
// partition count changes (Changed), and a partition's wake-up counter,
// bumped after a write of messages due soon, for its owner to poll at once
// (Wake). The controls' and slots' counters of the same hash are bumped
// with what they announce (setControl, ReleaseSlots).

// Every bump of a counter bumps the hash's version too (keys.VersionField),
// in the same round trip: a process reads the version alone at each tick
// (Version), and the counters only when it moved.

// bump returns the commands that bump field of the changes hash, and its
// version.
func (s *Store) bump(field string) []cmd {
	k := keys.Changes(s.ns)
	return []cmd{{"HINCRBY", []any{k, field, 1}}, {"HINCRBY", []any{k, keys.VersionField, 1}}}
}

// Version reads the changes hash's version, which every bump of one of
// its counters bumps: one HGET, whatever the fields.
func (s *Store) Version(ctx context.Context) (int64, error) {
	r, err := s.do(ctx, cmd{"HGET", []any{keys.Changes(s.ns), keys.VersionField}})
	if err != nil {
		return 0, fmt.Errorf("version of the changes: %w", err)
	}
	if r[0] == nil {
		return 0, nil
	}
	v, err := redis.Int64(r[0], nil)
	if err != nil {
		return 0, fmt.Errorf("version of the changes: %w", err)
	}
	return v, nil
}

// Changed bumps the topic's change counter, a field of the namespace's
// changes hash, for consumers watching it.
func (s *Store) Changed(ctx context.Context, topic string) error {
	if _, err := s.do(ctx, s.bump(topic)...); err != nil {
		return fmt.Errorf("bump changes of %s: %w", topic, err)
	}
	return nil
}

// Wake bumps the wake-up counters of partitions ps (see
// keys.WakeField), of any topics, in one command, for their owners to poll
// at once.
func (s *Store) Wake(ctx context.Context, ps []TopicPartition) error {
	args := []any{keys.Changes(s.ns), keys.VersionField}
	for _, tp := range ps {
		args = append(args, keys.WakeField(tp.Topic, tp.P))
	}
	if _, err := s.script(ctx, wakeScript, args...); err != nil {
		return fmt.Errorf("wake %d partitions: %w", len(ps), err)
	}
	return nil
}

// Changes reads counters of the changes hash (0 before a field's first
// bump: see keys.Changes): topics' change counters and partitions' wake-up
// counters, in one command, in the order of fields.
func (s *Store) Changes(ctx context.Context, topics []string) ([]int64, error) {
	r, err := s.do(ctx, cmd{"HMGET", append([]any{keys.Changes(s.ns)}, strs(topics)...)})
	if err != nil {
		return nil, fmt.Errorf("changes of %d topics: %w", len(topics), err)
	}
	vals, err := redis.Values(r[0], nil)
	if err != nil || len(vals) != len(topics) {
		return nil, fmt.Errorf("changes of %d topics: bad reply %v (%v)", len(topics), r[0], err)
	}
	out := make([]int64, len(topics))
	for i, v := range vals {
		if v != nil {
			if out[i], err = redis.Int64(v, nil); err != nil {
				return nil, fmt.Errorf("changes of %s: %w", topics[i], err)
			}
		}
	}
	return out, nil
}
