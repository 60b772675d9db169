package delayq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/wire"
)

// State is where a message is in its life.
type State string

// States of a message.
const (
	StateScheduled State = "scheduled" // waiting for its due time
	StateInFlight  State = "inflight"  // claimed by a consumer, being delivered
	StateDead      State = "dead"      // out of attempts, kept with its last error
	// StateDone: delivered, its id kept until the end of its uniqueness
	// window (Message.UniqueFor); nothing else of it is kept.
	StateDone State = "done"
)

// validState says whether s is one of the states of a message.
func validState(s State) bool {
	return s == StateScheduled || s == StateInFlight || s == StateDead || s == StateDone
}

// ParseStates reads a comma-separated list of states ("scheduled,dead"),
// as the command line's --state and the API's ?state= give them. A name
// that is not a state is an error naming it (not wrapped: the callers
// say where the list came from).
func ParseStates(list string) ([]State, error) {
	var out []State
	for _, s := range strings.Split(list, ",") {
		st := State(strings.TrimSpace(s))
		if !validState(st) {
			return nil, fmt.Errorf("state %q: want scheduled, inflight, dead or done", s)
		}
		out = append(out, st)
	}
	return out, nil
}

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
	// UniqueFor is the message's uniqueness window (see
	// Message.UniqueFor), 0 for none.
	UniqueFor time.Duration
	// Finished and UniqueUntil, when done: when its delivery was acked,
	// and when its id is free again. A done message has nothing else.
	Finished, UniqueUntil time.Time
}

// infoJSON is the wire form of Info shared by the CLI and the HTTP API.
type infoJSON struct {
	Topic       string  `json:"topic"`
	ID          string  `json:"id"`
	Partition   int     `json:"partition"`
	State       string  `json:"state"`
	Due         string  `json:"due"`
	Deadline    string  `json:"deadline,omitempty"` // when in flight
	DiedAt      string  `json:"died_at,omitempty"`  // when dead
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	Created     string  `json:"created"`
	Updated     string  `json:"updated"`
	LastError   string  `json:"last_error"`
	Body        *string `json:"body,omitempty"`        // when the body is UTF-8, even if empty
	BodyBase64  string  `json:"body_base64,omitempty"` // otherwise
	UniqueForMS int64   `json:"unique_for_ms,omitempty"`
}

// doneInfoJSON is the wire form of a done message's Info.
type doneInfoJSON struct {
	Topic       string `json:"topic"`
	ID          string `json:"id"`
	Partition   int    `json:"partition"`
	State       string `json:"state"`
	Finished    string `json:"finished"`
	UniqueUntil string `json:"unique_until"`
}

// MarshalJSON encodes the message with snake_case keys, times in RFC 3339
// UTC, and the body as "body" (UTF-8) or "body_base64" (anything else).
func (in *Info) MarshalJSON() ([]byte, error) {
	if in.State == StateDone { // nothing else of it is kept
		return json.Marshal(doneInfoJSON{Topic: in.Topic, ID: in.ID, Partition: in.Partition, State: string(in.State),
			Finished: wire.Time(in.Finished), UniqueUntil: wire.Time(in.UniqueUntil)})
	}
	v := infoJSON{
		Topic: in.Topic, ID: in.ID, Partition: in.Partition, State: string(in.State),
		Due: wire.Time(in.Due), Deadline: wire.Time(in.Deadline), DiedAt: wire.Time(in.DiedAt),
		Attempts: in.Attempts, MaxAttempts: in.MaxAttempts,
		Created: wire.Time(in.Created), Updated: wire.Time(in.Updated), LastError: in.LastError,
		UniqueForMS: in.UniqueFor.Milliseconds(),
	}
	v.Body, v.BodyBase64 = wire.Body(in.Body)
	return json.Marshal(v)
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
		LastError: rec.LastError, Body: rec.Body, UniqueFor: time.Duration(rec.UniqueFor) * time.Millisecond,
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
		g, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: q}, id)
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
	if f != nil && f.State == store.StateDone && f.Done.Until <= c.opts.Now().UnixMilli() {
		f = nil // its window ended: the id is free
	}
	if f == nil {
		return nil, fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
	}
	if f.State == store.StateDone {
		return &Info{Topic: topic, ID: id, Partition: p, State: StateDone,
			Finished: msTime(f.Done.Finished), UniqueUntil: msTime(f.Done.Until)}, nil
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

// Delete removes a message from wherever it is (scheduled, claimed ahead
// by a consumer, in flight or dead). Once it returned nil, no delivery of
// the message starts. It returns an error wrapping ErrNotFound if there
// is no such message, and one wrapping ErrRunning if a delivery of it had
// started: the message is deleted and never retried, but that delivery
// may run to its end.
func (c *Client) Delete(ctx context.Context, topic, id string) error {
	ps, err := c.check(ctx, topic, id)
	if err != nil {
		return err
	}
	// In every place, the old one first: a move writes the new place
	// before it removes the old one, and leaves a message rewritten or
	// deleted meanwhile where it was.
	found := false
	var running error
	for _, p := range ps {
		err := c.store.Delete(ctx, store.TopicPartition{Topic: topic, P: p}, id)
		switch {
		case err == nil:
			found = true
		case errors.Is(err, ErrRunning):
			found, running = true, err
		case !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: message %q in topic %s", ErrNotFound, id, topic)
	}
	return running
}

// maxDeleteMany bounds the ids one DeleteMany call takes.
const maxDeleteMany = 10000

// DeleteMany removes the messages of ids from topic, wherever each is
// (scheduled, claimed ahead, in flight or dead), as Delete does each but
// with two round trips per partition for them all. found[i] says whether
// there was a message of ids[i] to remove (one whose delivery had started
// counts: it is removed, as Delete does with ErrRunning): one delivered,
// deleted or never there is not an error. It takes up to 10,000 ids
// (ErrInvalid beyond).
func (c *Client) DeleteMany(ctx context.Context, topic string, ids []string) (found []bool, err error) {
	if len(ids) > maxDeleteMany {
		return nil, fmt.Errorf("%w: %d ids to delete from %s, at most %d a call", ErrInvalid, len(ids), topic, maxDeleteMany)
	}
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	// Per partition.
	type part struct {
		ids []string
		idx []int
	}
	var order []int
	byP := map[int]*part{}
	for i, id := range ids {
		if err := validateID(id); err != nil {
			return nil, err
		}
		for _, p := range places(l, id) {
			if byP[p] == nil {
				byP[p] = &part{}
				order = append(order, p)
			}
			byP[p].ids, byP[p].idx = append(byP[p].ids, id), append(byP[p].idx, i)
		}
	}
	// The partitions messages move out of first, as Delete looks in the
	// old place before the new.
	slices.SortStableFunc(order, func(a, b int) int {
		if sa, sb := l.IsSource(a), l.IsSource(b); sa != sb {
			if sa {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	found = make([]bool, len(ids))
	for _, p := range order {
		got, err := c.store.DeleteMany(ctx, store.TopicPartition{Topic: topic, P: p}, byP[p].ids)
		if err != nil {
			return nil, err
		}
		for j, n := range got {
			found[byP[p].idx[j]] = found[byP[p].idx[j]] || n != store.DeleteNone
		}
	}
	return found, nil
}

// Reschedule moves a scheduled message (or one a consumer claimed ahead
// and has not started) to a new due time and returns the due time stored
// (at rounded up to the millisecond). Once it returned, the message is
// delivered at the new due, and never at the old one. It wraps
// ErrNotFound when there is no such message, ErrRunning when a delivery
// of it started (nothing changed) and ErrNotScheduled when it is dead.
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
		err = c.store.Reschedule(ctx, store.TopicPartition{Topic: topic, P: p}, id, due.UnixMilli(), now.UnixMilli())
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
