package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// PartitionStats is a snapshot of one partition.
type PartitionStats struct {
	Scheduled, InFlight, Dead int64
	// DueNow counts the scheduled index entries due at or before the
	// time StatsAt was given (a segment counts once); 0 from Stats.
	DueNow    int64
	OldestDue int64  // unix ms of the earliest scheduled message, 0 if none
	Owner     string // worker id in the lease, "" if unowned
	Token     int64  // newest fencing token (the owner's, while the lease is held)
	Fence     int64  // token the fence holds
}

// TopicStats is a snapshot of a topic at a time: its partitions, and its
// live members.
type TopicStats struct {
	Partitions []PartitionStats
	// Live counts the members whose heartbeat expires after the time
	// StatsAt was given and that are not leaving (their score is
	// negative).
	Live int64
}

// Stats reads the counters of partitions 0..n-1 of topic, all in one
// pipelined round trip. It leaves DueNow 0 (see StatsAt).
func (s *Store) Stats(ctx context.Context, topic string, n int) ([]PartitionStats, error) {
	st, err := s.stats(ctx, topic, n, 0)
	if err != nil {
		return nil, err
	}
	return st.Partitions, nil
}

// StatsAt is Stats at now (unix ms, > 0) that also counts each
// partition's entries due by now and the topic's live members, in the
// same round trip: one ZCOUNT more per partition, and one for the topic.
func (s *Store) StatsAt(ctx context.Context, topic string, n int, now int64) (*TopicStats, error) {
	if now <= 0 {
		return nil, fmt.Errorf("stats of %s at %d: want a time after 1970", topic, now)
	}
	return s.stats(ctx, topic, n, now)
}

// stats reads the counters of partitions 0..n-1 of topic and, when now > 0,
// the entries due by now and the live members.
func (s *Store) stats(ctx context.Context, topic string, n int, now int64) (*TopicStats, error) {
	per := 8 // commands per partition, in the order read below
	if now > 0 {
		per++
	}
	cmds := make([]cmd, 0, per*n+1)
	for p := range n {
		sk := keys.Scheduled(s.ns, topic, p)
		cmds = append(cmds,
			cmd{"ZCOUNT", []any{sk, 0, "+inf"}}, // not the fence nor handover marks
			cmd{"ZSCORE", []any{sk, keys.Fence}},
			cmd{"ZCARD", []any{keys.InFlight(s.ns, topic, p)}},
			cmd{"ZCARD", []any{keys.Dead(s.ns, topic, p)}},
			cmd{"ZRANGEBYSCORE", []any{sk, 0, "+inf", "WITHSCORES", "LIMIT", 0, 1}},
			cmd{"GET", []any{keys.Lease(s.ns, topic, p)}},
			cmd{"GET", []any{keys.Epoch(s.ns, topic, p)}},
			cmd{"HGET", []any{keys.Records(s.ns, topic, p), keys.SegmentExtraField}},
		)
		if now > 0 {
			cmds = append(cmds, cmd{"ZCOUNT", []any{sk, 0, now}}) // from 0: not the marks either
		}
	}
	if now > 0 {
		cmds = append(cmds, s.liveMembersCmd(topic, now))
	}
	all, err := s.do(ctx, cmds...)
	if err != nil {
		return nil, fmt.Errorf("stats of %s: %w", topic, err)
	}
	out := &TopicStats{Partitions: make([]PartitionStats, n)}
	for p := range n {
		r, st := all[per*p:per*(p+1)], &out.Partitions[p]
		st.Scheduled, _ = redis.Int64(r[0], nil)
		if r[1] != nil {
			f, _ := redis.Float64(r[1], nil)
			st.Fence = int64(-f)
		}
		st.InFlight, _ = redis.Int64(r[2], nil)
		st.Dead, _ = redis.Int64(r[3], nil)
		if oldest, _ := redis.Strings(r[4], nil); len(oldest) == 2 {
			f, _ := strconv.ParseFloat(oldest[1], 64)
			st.OldestDue = int64(f)
		}
		if r[5] != nil {
			v, _ := redis.String(r[5], nil)
			st.Owner = keys.LeaseOwner(v)
		}
		if r[6] != nil {
			st.Token, _ = redis.Int64(r[6], nil)
		}
		// Each segment is one index entry for all its messages.
		extra, _ := redis.Int64(r[7], nil)
		st.Scheduled += extra
		if now > 0 {
			st.DueNow, _ = redis.Int64(r[8], nil)
		}
	}
	if now > 0 {
		out.Live, _ = redis.Int64(all[per*n], nil)
	}
	return out, nil
}
