package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// TestDropTopic fills every key of a topic (records, a segment, the
// indexes, lease, epoch, members, change counter, metadata), drops it and checks
// that none of them is left and that another topic kept all of its keys,
// directly and through Twemproxy.
func TestDropTopic(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	const n = 4
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			s := openTest(t, tg.Addr)
			fill := func(topic string) []string {
				t.Helper()
				if got, err := s.EnsureTopic(ctx, topic, n, time.Now().UnixMilli()); err != nil || got.Count != n {
					t.Fatalf("ensure topic %s of %d partitions: %+v, %v", topic, n, got, err)
				}
				due := time.Now().Add(time.Hour).UnixMilli()
				rec := func() *Record { return &Record{Due: due, Body: []byte("body")} }
				seg := []NewMessage{{ID: "0000000000000000000000aa01", Record: rec()}, {ID: "0000000000000000000000aa02", Record: rec()}}
				var all []string
				for p := range n {
					groups := []Group{{Topic: topic, P: p, Msgs: seg, Fresh: true}, {Topic: topic, P: p, Msgs: []NewMessage{{ID: "given", Record: rec()}}}}
					if _, err := s.AddMany(ctx, groups); err != nil {
						t.Fatal(err)
					}
					if _, err := s.do(ctx,
						cmd{"ZADD", []any{keys.InFlight(s.ns, topic, p), due, "x"}},
						cmd{"ZADD", []any{keys.Dead(s.ns, topic, p), due, "y"}},
						cmd{"SET", []any{keys.Lease(s.ns, topic, p), keys.LeaseValue("w", "r"), "PX", 60000}},
						cmd{"INCR", []any{keys.Epoch(s.ns, topic, p)}},
					); err != nil {
						t.Fatal(err)
					}
					all = append(all, keys.Scheduled(s.ns, topic, p), keys.InFlight(s.ns, topic, p), keys.Dead(s.ns, topic, p),
						keys.Records(s.ns, topic, p), keys.Lease(s.ns, topic, p), keys.Epoch(s.ns, topic, p))
				}
				if _, err := s.do(ctx, cmd{"ZADD", []any{keys.Members(s.ns, topic), due, "w"}}, cmd{"HINCRBY", []any{keys.Changes(s.ns), topic, 1}}); err != nil {
					t.Fatal(err)
				}
				return append(all, keys.Members(s.ns, topic), keys.Meta(s.ns, topic))
			}
			existing := func(ks []string) []string {
				t.Helper()
				var out []string
				for _, k := range ks {
					r, err := s.do(ctx, cmd{"EXISTS", []any{k}})
					if err != nil {
						t.Fatal(err)
					}
					if e, _ := redis.Int(r[0], nil); e == 1 {
						out = append(out, k)
					}
				}
				return out
			}
			drop, keep := "drop-"+tg.Name, "keep-"+tg.Name
			dropKeys, keepKeys := fill(drop), fill(keep)
			if got := existing(dropKeys); len(got) != len(dropKeys) {
				t.Fatalf("before the drop %d of %d keys exist", len(got), len(dropKeys))
			}
			if err := s.DropTopic(ctx, drop); err != nil {
				t.Fatal(err)
			}
			if left := existing(dropKeys); len(left) > 0 {
				t.Errorf("left after the drop: %q", left)
			}
			if got := existing(keepKeys); len(got) != len(keepKeys) {
				t.Errorf("the other topic kept %d of its %d keys", len(got), len(keepKeys))
			}
			if ch, err := s.Changes(ctx, []string{drop, keep}); err != nil || ch[0] != 0 || ch[1] != 1 {
				t.Errorf("change counters after the drop: %v, %v; want [0 1] (the dropped topic's field gone)", ch, err)
			}
			topics, err := s.Topics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(topics, drop) || !slices.Contains(topics, keep) {
				t.Errorf("topics after dropping %s: %q", drop, topics)
			}
			// An unknown (or already dropped) topic is no error.
			if err := s.DropTopic(ctx, drop); err != nil {
				t.Errorf("dropping it again: %v", err)
			}
		})
	}
}

// TestDropTopicAfterShrink: a topic shrunk from 8 to 4 partitions keeps
// the epoch and fence of partitions 4-7 (what their owners left); its
// drop deletes them, whether the largest count was recorded as the
// change began or, for a change older than that record, not at all.
func TestDropTopicAfterShrink(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	for _, recorded := range []bool{true, false} {
		topic := fmt.Sprintf("shrunk-%v", recorded)
		now := time.Now().UnixMilli()
		if _, err := s.EnsureTopic(ctx, topic, 8, now); err != nil {
			t.Fatal(err)
		}
		var left []string
		for p := 4; p < 8; p++ {
			token, err := s.NextToken(ctx, topic, p, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RaiseFence(ctx, TopicPartition{Topic: topic, P: p}, token); err != nil {
				t.Fatal(err)
			}
			left = append(left, keys.Epoch(s.ns, topic, p), keys.Scheduled(s.ns, topic, p))
		}
		if _, err := s.BeginChange(ctx, topic, 4, now); err != nil {
			t.Fatal(err)
		}
		// The change ends as the last mover's MarkMoved ends it.
		meta := keys.Meta(s.ns, topic)
		end := []cmd{{"HSET", []any{meta, keys.MetaPartitions, 4}}, {"HDEL", []any{meta, keys.MetaNext, keys.MetaSince}},
			{"HSET", []any{meta, keys.MetaChanged, now}}}
		if !recorded {
			end = append(end, cmd{"HDEL", []any{meta, keys.MetaMost}})
		}
		if _, err := s.do(ctx, end...); err != nil {
			t.Fatal(err)
		}
		if n, err := s.TopicPartitions(ctx, topic); err != nil || n != 4 {
			t.Fatalf("%s: %d partitions after the change, %v; want 4", topic, n, err)
		}
		if err := s.DropTopic(ctx, topic); err != nil {
			t.Fatal(err)
		}
		for _, k := range left {
			r, err := s.do(ctx, cmd{"EXISTS", []any{k}})
			if err != nil {
				t.Fatal(err)
			}
			if e, _ := redis.Int(r[0], nil); e == 1 {
				t.Errorf("%s: %s left after the drop", topic, k)
			}
		}
	}
}
