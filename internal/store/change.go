package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// A change of a topic's partition count, as its fields of the meta HASH
// record it (see docs/architecture.md, Changing the partition count): its
// beginning and cancelling, the source partitions marked moved (the last
// mark ends it) and the count of messages moved. The moves themselves are
// in move.go, the layout a change runs in layout.go.

// BeginChange starts changing topic's partition count to n, as of nowMS,
// and returns the layout after the call: unchanged when the count is n
// already or a change to n runs. It fails with ErrNoTopic for a topic
// that does not exist, ErrChangeRunning (naming both counts) while a change to
// another count runs, and ErrAutoPartitions while the topic's count is
// automatic (see AutoOn). n must be a multiple or a divisor of the count;
// the caller checks.
func (s *Store) BeginChange(ctx context.Context, topic string, n int, nowMS int64) (Layout, error) {
	meta := keys.Meta(s.ns, topic)
	r, err := s.script(ctx, changeScript, meta, keys.MetaPartitions, keys.MetaNext, keys.MetaSince, n, nowMS,
		keys.MetaMovedCount, keys.MetaReversed, keys.MetaMost, keys.MetaAuto)
	if err != nil {
		return Layout{}, fmt.Errorf("change partitions of %s: %w", topic, err)
	}
	// changeReply's errors name the topic, and a sentinel's text leads
	// (the command line prints it as is).
	return changeReply(topic, r)
}

// CancelChange cancels the change of topic's partition count that l
// (the layout the caller read) runs: the change becomes its reverse, from
// l.Next back to l.Count, as of nowMS (see cancelScript). It returns the
// layout after the call: the reverse change, the same when it was
// cancelled already, or one with no change when it ended meanwhile. It
// fails with ErrNotFound for a topic never used, ErrChangeRunning when
// another change than l's runs, and ErrAutoPartitions while the topic's
// count is automatic (see AutoOn).
func (s *Store) CancelChange(ctx context.Context, topic string, l Layout, nowMS int64) (Layout, error) {
	meta := keys.Meta(s.ns, topic)
	r, err := s.script(ctx, cancelScript, meta, keys.MetaPartitions, keys.MetaNext, keys.MetaSince, keys.MetaMovedPrefix,
		keys.MetaMovedCount, keys.MetaReversed, l.Count, l.Next, nowMS, keys.MetaAuto)
	if err != nil {
		return Layout{}, fmt.Errorf("cancel the change of partitions of %s: %w", topic, err)
	}
	out, err := changeReply(topic, r)
	if err != nil {
		return Layout{}, err
	}
	out.Reversed = out.Changing()
	return out, nil
}

// changeReply reads the {count, next, since} reply of changeScript and
// cancelScript.
func changeReply(topic string, r any) (Layout, error) {
	vals, err := redis.Int64s(r, nil)
	if err != nil || len(vals) != 3 {
		return Layout{}, fmt.Errorf("change partitions of %s: bad reply %v: %v", topic, r, err)
	}
	switch {
	case vals[0] == -1:
		return Layout{}, NoTopic(topic)
	case vals[0] == -2:
		return Layout{}, fmt.Errorf("%w: topic %q is changing from %d to %d partitions; wait for it to end, or cancel it (delayq partitions --topic %s [--wait | --cancel])",
			ErrChangeRunning, topic, vals[1], vals[2], topic)
	case vals[0] == -3:
		return Layout{}, AutoOn(topic, Layout{Count: int(vals[1]), Next: int(vals[2])})
	}
	return Layout{Count: int(vals[0]), Next: int(vals[1]), Since: vals[2]}, nil
}

// MarkMoved records that partition tp holds nothing left to move for the
// change l runs, and ends the change when every source partition is
// marked (the count becomes l.Next; nowMS is recorded as its end). It returns whether the change ended
// with this call; a mark for a change that is no longer running (ended,
// or cancelled: another next or since) is ignored.
func (s *Store) MarkMoved(ctx context.Context, tp TopicPartition, l Layout, nowMS int64) (ended bool, err error) {
	meta := keys.Meta(s.ns, tp.Topic)
	r, err := s.script(ctx, markMovedScript, meta, keys.MetaPartitions, keys.MetaNext, keys.MetaSince, keys.MetaMovedPrefix,
		tp.P, l.Next, l.Since, keys.MetaMovedCount, keys.MetaReversed, keys.MetaChanged, nowMS)
	if err != nil {
		return false, fmt.Errorf("mark partition %d of %s moved: %w", tp.P, tp.Topic, err)
	}
	n, _ := redis.Int(r, nil)
	return n == 2, nil
}

// CountMoved adds n to the count of messages the change l runs moved;
// nothing when another change (or none) runs.
func (s *Store) CountMoved(ctx context.Context, topic string, l Layout, n int) error {
	if _, err := s.script(ctx, countMovedScript, keys.Meta(s.ns, topic), keys.MetaSince, l.Since, keys.MetaMovedCount, n); err != nil {
		return fmt.Errorf("count messages moved in %s: %w", topic, err)
	}
	return nil
}

// MovedMarks returns which source partitions of l are marked moved, and
// how many messages the change moved so far.
func (s *Store) MovedMarks(ctx context.Context, topic string, l Layout) (map[int]bool, int64, error) {
	src := l.Sources()
	args := []any{keys.Meta(s.ns, topic), keys.MetaMovedCount}
	for _, p := range src {
		args = append(args, keys.MetaMovedPrefix+strconv.Itoa(p))
	}
	r, err := s.do(ctx, cmd{"HMGET", args})
	if err != nil {
		return nil, 0, fmt.Errorf("moved marks of %s: %w", topic, err)
	}
	vals, _ := redis.Values(r[0], nil)
	if len(vals) != len(args)-1 {
		return nil, 0, fmt.Errorf("moved marks of %s: bad reply %v", topic, r[0])
	}
	moved, _ := redis.Int64(vals[0], nil)
	out := map[int]bool{}
	for i, v := range vals[1:] {
		if n, err := redis.Int(v, nil); err == nil && n == l.Next {
			out[src[i]] = true
		}
	}
	return out, moved, nil
}
