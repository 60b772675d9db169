package delayq

import (
	"context"
	"encoding/json"
	"time"

	"github.com/delayq/delayq/internal/wire"
)

// PartitionStats is a snapshot of one partition.
type PartitionStats struct {
	Partition int        `json:"partition"`
	Scheduled int64      `json:"scheduled"`
	DueNow    int64      `json:"due_now"` // of Scheduled, those due when read (see TopicStats.DueNow)
	InFlight  int64      `json:"inflight"`
	Dead      int64      `json:"dead"`
	OldestDue *time.Time `json:"oldest_due,omitempty"` // earliest scheduled due time; nil if none
	Owner     string     `json:"owner,omitempty"`      // id of the consumer holding the lease; "" if none
	Token     int64      `json:"token"`                // newest fencing token of the partition
}

// TopicStats is a snapshot of a topic.
type TopicStats struct {
	Topic string `json:"topic"`
	// Count is the topic's partition count, and ChangingTo the count a
	// running change goes to (0 when none runs); Partitions has a row
	// for each partition of both.
	Count      int `json:"partition_count"`
	ChangingTo int `json:"changing_to,omitempty"`
	// Change is the progress of the running change (as Partitions
	// reports it); nil when none runs.
	Change    *PartitionsInfo `json:"change,omitempty"`
	Scheduled int64           `json:"scheduled"`
	InFlight  int64           `json:"inflight"`
	Dead      int64           `json:"dead"`
	// DueNow counts the scheduled messages whose due time has come when
	// Stats read them and that no consumer has claimed yet: the backlog
	// more consumers would drain. It is 0 while the consumers keep up
	// (they claim messages a little ahead of their due time), and grows
	// while the topic is paused or they fall behind. A segment (up to 16
	// messages of one write, due a minute or more after it; see
	// docs/architecture.md, Segments) counts once until a consumer claims
	// it.
	DueNow int64 `json:"due_now"`
	// Lag is how long the oldest of those messages has waited past its
	// due time (to the millisecond); 0 when DueNow is 0. JSON: "lag_ms".
	Lag time.Duration `json:"-"`
	// Consumers counts the topic's live consumers: members whose
	// heartbeat is current and that are not leaving. A consumer past the
	// partition count owns no partition.
	Consumers  int              `json:"consumers"`
	Partitions []PartitionStats `json:"partitions"`
	// Pause is the topic's pause (see Admin.Pause).
	Pause PauseState `json:"pause"`
	// Limits are the topic's fleet-wide limits (see Admin.SetLimits),
	// with what runs against them.
	Limits LimitsState `json:"limits"`
}

// Stats reads the counters of every partition of topic. It wraps
// ErrNoTopic when the topic does not exist, as ListDead, RequeueDead,
// PurgeDead, Delete, DeleteMany and Reschedule do: none of them creates
// a topic.
func (ins *Inspector) Stats(ctx context.Context, topic string) (*TopicStats, error) {
	c := ins.c
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	now := c.opts.Now().UnixMilli()
	st, err := c.store.StatsAt(ctx, topic, l.Span(), now)
	if err != nil {
		return nil, err
	}
	all := st.Partitions
	ts := &TopicStats{Topic: topic, Count: l.Count, Consumers: int(st.Live)}
	ctrl, _, err := c.store.ReadControls(ctx, topic)
	if err != nil {
		return nil, err
	}
	ts.Pause = pauseState(ctrl, c.opts.Now())
	if ts.Limits, err = c.limitsState(ctx, topic, ctrl); err != nil {
		return nil, err
	}
	if l.Changing() {
		ts.ChangingTo = l.Next
		if ts.Change, err = c.changeInfo(ctx, topic, l, all); err != nil {
			return nil, err
		}
	}
	var oldest int64 // the earliest due of the messages due now
	for p, s := range all {
		ps := PartitionStats{
			Partition: p, Scheduled: s.Scheduled, DueNow: s.DueNow, InFlight: s.InFlight, Dead: s.Dead,
			Owner: s.Owner, Token: s.Token,
		}
		if s.OldestDue != 0 {
			t := msTime(s.OldestDue).UTC()
			ps.OldestDue = &t
		}
		if s.DueNow > 0 && s.OldestDue > 0 && (oldest == 0 || s.OldestDue < oldest) {
			oldest = s.OldestDue
		}
		ts.Partitions = append(ts.Partitions, ps)
		ts.Scheduled += s.Scheduled
		ts.DueNow += s.DueNow
		ts.InFlight += s.InFlight
		ts.Dead += s.Dead
	}
	if oldest > 0 {
		ts.Lag = time.Duration(max(0, now-oldest)) * time.Millisecond
	}
	return ts, nil
}

// wireTime is *t in wire.TimeLayout, or "" (left out) when t is nil.
func wireTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return wire.Time(*t)
}

// MarshalJSON encodes the partition's snapshot with its oldest due time
// in RFC 3339 UTC with three-digit milliseconds, as every time delayq
// prints (encoding/json would drop trailing zeros).
func (p PartitionStats) MarshalJSON() ([]byte, error) {
	type plain PartitionStats // its fields, without this method
	return json.Marshal(struct {
		plain
		OldestDue string `json:"oldest_due,omitempty"`
	}{plain(p), wireTime(p.OldestDue)})
}

// MarshalJSON encodes the topic's snapshot with its lag as "lag_ms", in
// whole milliseconds (as the API's "delay_ms"), and its times as
// PartitionStats.MarshalJSON does.
func (s TopicStats) MarshalJSON() ([]byte, error) {
	type plain TopicStats
	return json.Marshal(struct {
		plain
		LagMS int64 `json:"lag_ms"`
	}{plain(s), s.Lag.Milliseconds()})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *TopicStats) UnmarshalJSON(b []byte) error {
	type plain TopicStats
	v := struct {
		*plain
		LagMS int64 `json:"lag_ms"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.Lag = time.Duration(v.LagMS) * time.Millisecond
	return nil
}
