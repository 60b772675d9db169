package delayq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// State is where a message is in its life.
type State string

// States of a message.
const (
	StateScheduled State = "scheduled" // waiting for its due time
	StateInFlight  State = "inflight"  // claimed by a consumer, being delivered
	StateDead      State = "dead"      // out of attempts, kept with its last error
)

// Info describes a message.
type Info struct {
	Topic       string
	ID          string
	Partition   int
	State       State
	Due         time.Time // when it is (or was last) due
	Deadline    time.Time // visibility deadline, when in flight
	DiedAt      time.Time // when it died, when dead
	Attempts    int       // deliveries that failed so far
	MaxAttempts int       // 0: the consumer's default
	Created     time.Time
	Updated     time.Time // last transition
	LastError   string
	Body        []byte
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func infoOf(topic, id string, p int, rec *store.Record) *Info {
	return &Info{
		Topic: topic, ID: id, Partition: p, Due: msTime(rec.Due), Attempts: rec.Attempts,
		MaxAttempts: rec.MaxAttempts, Created: msTime(rec.Created), Updated: msTime(rec.Updated),
		LastError: rec.LastError, Body: rec.Body,
	}
}

// Get returns a message by id, or an error wrapping ErrNotFound (and
// ErrNoTopic when the topic does not exist).
func (c *Client) Get(ctx context.Context, topic, id string) (*Info, error) {
	ps, err := c.check(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	var f *store.Found
	p := -1
	for _, q := range ps {
		g, err := c.store.Get(ctx, topic, q, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if f == nil || !f.Indexed { // a record in no index is a move cut short: the next place has the truth
			f, p = g, q
		}
		if f.Indexed {
			break
		}
	}
	if f == nil {
		return nil, fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
	}
	in := infoOf(topic, id, p, f.Record)
	switch f.State {
	case store.StateInFlight:
		in.State, in.Deadline = StateInFlight, msTime(f.Score)
	case store.StateDead:
		in.State, in.DiedAt = StateDead, msTime(f.Score)
	default:
		// An entry earlier than its record is a send's or a retry's that
		// a later one overtook: the message waits for its record's due.
		due := f.Score
		if f.Record != nil && f.Record.Corrupt == nil && f.Record.Due > due {
			due = f.Record.Due
		}
		in.State, in.Due = StateScheduled, msTime(due)
	}
	return in, nil
}

// Delete removes a message from wherever it is (scheduled, in flight or
// dead). A message deleted while scheduled is never delivered. It returns
// an error wrapping ErrNotFound if there is no such message.
func (c *Client) Delete(ctx context.Context, topic, id string) error {
	ps, err := c.check(ctx, topic, id)
	if err != nil {
		return err
	}
	// In every place, the old one first: a move writes the new place
	// before it removes the old one, and leaves a message rewritten or
	// deleted meanwhile where it was.
	found := false
	for _, p := range ps {
		err := c.store.Delete(ctx, topic, p, id)
		if err == nil {
			found = true
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
	}
	return nil
}

// Reschedule moves a scheduled message to a new due time and returns the
// due time stored (at rounded up to the millisecond). It wraps ErrNotFound
// when there is no such message and ErrNotScheduled when it is in flight
// or dead.
func (c *Client) Reschedule(ctx context.Context, topic, id string, at time.Time) (time.Time, error) {
	ps, err := c.check(ctx, topic, id)
	if err != nil {
		return time.Time{}, err
	}
	if at.UnixMilli() <= 0 {
		return time.Time{}, fmt.Errorf("%w: due time %v is before 1970", ErrInvalid, at)
	}
	due := clock.CeilMS(at)
	now := c.opts.Now()
	for _, p := range ps {
		err = c.store.Reschedule(ctx, topic, p, id, due.UnixMilli(), now.UnixMilli())
		if err == nil && due.Before(now.Add(WakeAhead)) {
			c.wakeOwners(ctx, store.TopicPartition{Topic: topic, P: p})
		}
		if !errors.Is(err, ErrNotFound) {
			break
		}
	}
	if err != nil {
		return time.Time{}, err
	}
	return due, nil
}

// check validates topic and id and returns the partitions where the
// message may be, in the order to look in them (see places).
func (c *Client) check(ctx context.Context, topic, id string) ([]int, error) {
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := validateID(id); err != nil {
		return nil, err
	}
	return places(l, id), nil
}

// places returns the partitions where a message of id may be: its
// partition, or during a change of the count its old partition and then
// its new one. Looked at in that order, a message being moved is found:
// a move writes the new place before it removes the old one.
func places(l store.Layout, id string) []int {
	p, old := l.Place(id), l.Old(id)
	if old == p {
		return []int{p}
	}
	return []int{old, p}
}

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
	// Pause is the topic's pause (see Client.Pause).
	Pause PauseState `json:"pause"`
	// Limits are the topic's fleet-wide limits (see Client.SetLimits),
	// with what runs against them.
	Limits LimitsState `json:"limits"`
}

// Stats reads the counters of every partition of topic. It wraps
// ErrNoTopic when the topic does not exist, as ListDead, RequeueDead,
// PurgeDead, Delete, DeleteMany and Reschedule do: none of them creates
// a topic.
func (c *Client) Stats(ctx context.Context, topic string) (*TopicStats, error) {
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

// ListDead returns up to limit dead messages of topic (limit <= 0: 100),
// in partition order.
func (c *Client) ListDead(ctx context.Context, topic string, limit int) ([]*Info, error) {
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	var out []*Info
	for p := 0; p < l.Span() && len(out) < limit; p++ {
		list, err := c.store.ListDead(ctx, topic, p, limit-len(out))
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			if e.Record == nil {
				continue
			}
			in := infoOf(topic, e.ID, p, e.Record)
			in.State, in.DiedAt = StateDead, msTime(e.DiedAt)
			out = append(out, in)
		}
	}
	return out, nil
}

// deadBatch bounds the ids one dead-set operation touches per partition and step.
const deadBatch = 500

// RequeueDead moves dead messages back to scheduled, due now, with their
// attempts reset: the given ids, or every dead message of the topic when
// none are given. It returns how many it moved.
func (c *Client) RequeueDead(ctx context.Context, topic string, ids ...string) (int, error) {
	return c.deadOp(ctx, topic, ids, func(p int, ids []string) (int, error) {
		n, err := c.store.RequeueDead(ctx, topic, p, ids, c.opts.Now().UnixMilli(), deadBatch)
		if n > 0 {
			c.wakeOwners(ctx, store.TopicPartition{Topic: topic, P: p})
		}
		return n, err
	})
}

// PurgeDead deletes dead messages: the given ids, or every dead message of
// the topic when none are given. It returns how many it deleted.
func (c *Client) PurgeDead(ctx context.Context, topic string, ids ...string) (int, error) {
	return c.deadOp(ctx, topic, ids, func(p int, ids []string) (int, error) {
		return c.store.PurgeDead(ctx, topic, p, ids, deadBatch)
	})
}

func (c *Client) deadOp(ctx context.Context, topic string, ids []string, op func(p int, ids []string) (int, error)) (int, error) {
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return 0, err
	}
	total := 0
	if len(ids) > 0 {
		byP := map[int][]string{}
		for _, id := range ids {
			if err := validateID(id); err != nil {
				return total, err
			}
			for _, p := range places(l, id) {
				byP[p] = append(byP[p], id)
			}
		}
		for p, list := range byP {
			n, err := op(p, list)
			total += n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	for p := range l.Span() {
		for {
			n, err := op(p, nil)
			total += n
			if err != nil {
				return total, err
			}
			if n < deadBatch {
				break
			}
		}
	}
	return total, nil
}
