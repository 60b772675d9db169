package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
)

// EnsureTopic records the topic with n partitions on first use and
// returns its stored layout: n partitions for a topic it created, the
// count stored earlier (and any change of it running) otherwise. The
// stored count is the truth; n is only a proposal for a new topic.
func (s *Store) EnsureTopic(ctx context.Context, topic string, n int, nowMS int64) (Layout, error) {
	meta := keys.Meta(s.ns, topic)
	r, err := s.doAgain(ctx,
		cmd{"HSETNX", []any{meta, keys.MetaPartitions, n}},
		cmd{"HSETNX", []any{meta, keys.MetaCreated, nowMS}},
		layoutReads(meta),
		cmd{"ZADD", []any{keys.Topics(s.ns), "NX", nowMS, topic}},
	)
	if err != nil {
		return Layout{}, fmt.Errorf("topic %s meta: %w", topic, err)
	}
	l, err := layoutOf(r[2])
	if err == nil && l.Count < 1 {
		err = fmt.Errorf("partitions is %d", l.Count)
	}
	if err != nil {
		return Layout{}, fmt.Errorf("topic %s meta in %s: %w", topic, meta, err)
	}
	return l, nil
}

// TopicPartitions returns how many partitions of topic may hold messages
// (its stored count, or the larger of the two counts while a change
// runs); 0 if the topic is unknown.
func (s *Store) TopicPartitions(ctx context.Context, topic string) (int, error) {
	l, err := s.ReadLayout(ctx, topic)
	if err != nil {
		return 0, err
	}
	return l.Span(), nil
}

// Topics lists known topics.
func (s *Store) Topics(ctx context.Context) ([]string, error) {
	r, err := s.do(ctx, cmd{"ZRANGE", []any{keys.Topics(s.ns), 0, -1}})
	if err != nil {
		return nil, err
	}
	return redis.Strings(r[0], nil)
}

// DropTopic deletes every key of topic: those of its partitions (as many
// as the largest count it has had, keys.MetaMost: a shrink leaves the
// epoch and fence of the partitions past its new count), its
// members, its schedules, its entry among the topics, and last its
// metadata, so that a drop cut short can be run again. It checks nothing:
// Admin.DeleteTopic checks first that nothing uses the topic;
// benchmarks and tests drop their throwaway topics with it. A client or
// consumer still using the topic writes some of its keys again.
func (s *Store) DropTopic(ctx context.Context, topic string) error {
	meta := keys.Meta(s.ns, topic)
	r, err := s.do(ctx, layoutReads(meta), cmd{"HMGET", []any{meta, keys.MetaMost, keys.MetaChanged}})
	if err != nil {
		return fmt.Errorf("drop topic %s: %w", topic, err)
	}
	l, err := layoutOf(r[0])
	if err != nil {
		return fmt.Errorf("drop topic %s: %w", topic, err)
	}
	most, err := mostOf(r[1])
	if err != nil {
		return fmt.Errorf("drop topic %s: %w", topic, err)
	}
	n := max(l.Span(), most)
	del := func(k string) cmd { return cmd{"DEL", []any{k}} }
	var cmds []cmd
	for p := range n {
		for _, k := range keys.OfPartition(s.ns, topic, p) {
			cmds = append(cmds, del(k))
		}
	}
	fields := []any{keys.Changes(s.ns), topic, keys.ControlsField(topic), keys.SlotsField(topic)}
	for p := range n {
		fields = append(fields, keys.WakeField(topic, p))
	}
	cmds = append(cmds, del(keys.Members(s.ns, topic)), del(keys.Schedules(s.ns, topic)),
		del(keys.Rate(s.ns, topic)), del(keys.Slots(s.ns, topic)), cmd{"HDEL", fields}, cmd{"ZREM", []any{keys.Topics(s.ns), topic}})
	if _, err := s.steps(ctx, cmds, []cmd{del(meta)}); err != nil {
		return fmt.Errorf("drop topic %s: %w", topic, err)
	}
	return nil
}

// mostOf reads the reply of an HMGET of a topic's fields most and
// changed: the largest partition count it has had (keys.MetaMost), 0
// when it never changed; partition.MaxPartitions for a topic whose count
// changed before the largest was recorded, whose leftover partitions
// cannot be told otherwise.
func mostOf(r any) (int, error) {
	vals, err := redis.Values(r, nil)
	if err != nil || len(vals) != 2 {
		return 0, fmt.Errorf("largest partition count: bad reply %v (%v)", r, err)
	}
	switch {
	case vals[0] != nil:
		return redis.Int(vals[0], nil)
	case vals[1] != nil:
		return partition.MaxPartitions, nil
	}
	return 0, nil
}
