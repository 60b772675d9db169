package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// EnsureTopic records the topic with n partitions on first use and
// returns its stored partition count: n for a topic it created, the count
// stored earlier otherwise. The stored count is the truth; n is only a
// proposal for a new topic.
func (s *Store) EnsureTopic(ctx context.Context, topic string, n int, nowMS int64) (int, error) {
	meta := keys.Meta(s.ns, topic)
	r, err := s.do(ctx,
		cmd{"HSETNX", []any{meta, keys.MetaPartitions, n}},
		cmd{"HSETNX", []any{meta, keys.MetaCreated, nowMS}},
		cmd{"HGET", []any{meta, keys.MetaPartitions}},
		cmd{"ZADD", []any{keys.Topics(s.ns), "NX", nowMS, topic}},
	)
	if err != nil {
		return 0, fmt.Errorf("topic %s meta: %w", topic, err)
	}
	stored, err := redis.Int(r[2], nil)
	if err != nil || stored < 1 {
		return 0, fmt.Errorf("topic %s meta: partitions in %s is %v, want a count: %v", topic, meta, r[2], err)
	}
	return stored, nil
}

// TopicPartitions returns the stored partition count of topic, 0 if unknown.
func (s *Store) TopicPartitions(ctx context.Context, topic string) (int, error) {
	r, err := s.do(ctx, cmd{"HGET", []any{keys.Meta(s.ns, topic), keys.MetaPartitions}})
	if err != nil {
		return 0, err
	}
	if r[0] == nil {
		return 0, nil
	}
	return redis.Int(r[0], nil)
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
// as its stored count says), its members, its entry among the topics,
// and last its metadata, so that a drop cut short can be run again. It is
// for benchmarks and tests, which make throwaway topics: a client or
// consumer still using the topic would write some of its keys again.
func (s *Store) DropTopic(ctx context.Context, topic string) error {
	n, err := s.TopicPartitions(ctx, topic)
	if err != nil {
		return fmt.Errorf("drop topic %s: %w", topic, err)
	}
	del := func(k string) cmd { return cmd{"DEL", []any{k}} }
	var cmds []cmd
	for p := range n {
		for _, k := range keys.OfPartition(s.ns, topic, p) {
			cmds = append(cmds, del(k))
		}
	}
	cmds = append(cmds, del(keys.Members(s.ns, topic)), cmd{"HDEL", []any{keys.Changes(s.ns), topic}}, cmd{"ZREM", []any{keys.Topics(s.ns), topic}})
	if _, err := s.steps(ctx, cmds, []cmd{del(keys.Meta(s.ns, topic))}); err != nil {
		return fmt.Errorf("drop topic %s: %w", topic, err)
	}
	return nil
}
