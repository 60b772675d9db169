package delayq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // every process computes the same occurrences, whatever zone files its host has

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/wire"
	"github.com/robfig/cron/v3"
)

// Recurring messages. A schedule belongs to a topic and delivers one
// ordinary message to the topic's handlers per occurrence of its cron
// spec, due at the occurrence's time. Each occurrence's id is derived
// from the schedule and the time (see ScheduleID), and all of a
// schedule's occurrences land in one partition, where a mark records the
// newest one ever written: a consumer that starts delivering an
// occurrence first writes the next one, and the mark lets that write
// happen once whatever the crashes, pauses and redeliveries, so each
// occurrence is one message.

// Policy says what a schedule does with occurrences missed while no
// consumer ran (see MissedAfter).
type Policy string

// Missed-occurrence policies.
const (
	// PolicySkip delivers only the latest missed occurrence. The default.
	PolicySkip Policy = "skip"
	// PolicyAll delivers every missed occurrence, at most MaxCatchUp of
	// them (the latest MaxCatchUp).
	PolicyAll Policy = "all"
)

const (
	// MissedAfter is how late an occurrence must be, when a consumer
	// starts delivering it, for the occurrences after it that are due
	// already to count as missed: the fleet was down. A takeover after a
	// crash (about two leases) is not that: its occurrences all come.
	MissedAfter = time.Minute
	// MaxCatchUp bounds the missed occurrences PolicyAll delivers.
	MaxCatchUp = 100
	// ScheduleIDPrefix begins the id of every occurrence; ids given to
	// Send cannot begin with it.
	ScheduleIDPrefix = keys.ScheduleIDPrefix
	// maxScheduleName is the longest schedule name.
	maxScheduleName = 100
)

// Schedule defines a recurring message.
type Schedule struct {
	// Name identifies the schedule in its topic: 1 to 100 characters of
	// [A-Za-z0-9._-].
	Name string `json:"name"`
	// Spec is a cron spec: 5 fields (minute hour day-of-month month
	// day-of-week), or 6 with seconds first, or a descriptor such as
	// @hourly, @daily or "@every 30s" (see docs/schedules.md).
	Spec string `json:"spec"`
	// TimeZone is the IANA zone the spec's fields are read in, such as
	// "Asia/Shanghai". Default UTC.
	TimeZone string `json:"tz,omitempty"`
	// Body of every occurrence's message.
	Body []byte `json:"body,omitempty"`
	// MaxAttempts of every occurrence's message; 0 means the consumer's.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Policy for missed occurrences. Default PolicySkip.
	Policy Policy `json:"policy,omitempty"`
}

// ScheduleInfo is a stored schedule.
type ScheduleInfo struct {
	Schedule
	Topic   string
	Paused  bool
	Version int64 // changes with every change of the schedule
	Created time.Time
	Updated time.Time
	// Source is "toml" for a schedule last written from a configuration
	// file's [[topic.schedule]], empty otherwise.
	Source string
}

// Next returns the schedule's next n occurrences after from (none when
// paused).
func (s *ScheduleInfo) Next(from time.Time, n int) []time.Time {
	if s.Paused || n <= 0 {
		return nil
	}
	cs, err := parseSpec(s.Name, s.Spec, s.TimeZone)
	if err != nil {
		return nil
	}
	if every, ok := cs.(cron.ConstantDelaySchedule); ok && !s.Updated.IsZero() {
		// @every counts from the last add, replace or resume (see
		// startChain), not from from.
		t := next(cs, s.Updated)
		if !t.After(from) {
			t = t.Add((from.Sub(t)/every.Delay + 1) * every.Delay)
		}
		return append([]time.Time{t}, nextN(cs, t, n-1)...)
	}
	return nextN(cs, from, n)
}

// scheduleJSON is the wire form of ScheduleInfo shared by the CLI and the
// HTTP API.
type scheduleJSON struct {
	Topic       string   `json:"topic"`
	Name        string   `json:"name"`
	Spec        string   `json:"spec"`
	TZ          string   `json:"tz"`
	Policy      string   `json:"policy"`
	MaxAttempts int      `json:"max_attempts"`
	Paused      bool     `json:"paused"`
	Version     int64    `json:"version"`
	Created     string   `json:"created"`
	Updated     string   `json:"updated"`
	Source      string   `json:"source,omitempty"`
	Next        []string `json:"next"`                  // the next 3 occurrences from now; empty when paused
	Body        *string  `json:"body,omitempty"`        // when the body is UTF-8, even if empty
	BodyBase64  string   `json:"body_base64,omitempty"` // otherwise
}

// MarshalJSON encodes the schedule with snake_case keys, times in RFC
// 3339 UTC, its next three occurrences from now, and the body as "body"
// (UTF-8) or "body_base64" (anything else).
func (s *ScheduleInfo) MarshalJSON() ([]byte, error) {
	tz := s.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	v := scheduleJSON{
		Topic: s.Topic, Name: s.Name, Spec: s.Spec, TZ: tz, Policy: string(s.Policy), MaxAttempts: s.MaxAttempts,
		Paused: s.Paused, Version: s.Version, Created: wire.Time(s.Created), Updated: wire.Time(s.Updated),
		Source: s.Source, Next: []string{},
	}
	for _, t := range s.Next(time.Now(), 3) {
		v.Next = append(v.Next, wire.Time(t))
	}
	v.Body, v.BodyBase64 = wire.Body(s.Body)
	return json.Marshal(v)
}

// schedRecord is the stored definition: JSON whose first member is the
// version (the store's scripts read it there).
type schedRecord struct {
	Version     int64  `json:"version"`
	Spec        string `json:"spec"`
	TZ          string `json:"tz,omitempty"`
	Body        []byte `json:"body,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	Policy      Policy `json:"policy,omitempty"`
	Paused      bool   `json:"paused,omitempty"`
	Created     int64  `json:"created"`
	Updated     int64  `json:"updated"`
	// TOML is the hash of the [[topic.schedule]] definition last applied
	// from a configuration file (see ApplySchedules); changes at run time
	// keep it.
	TOML string `json:"toml,omitempty"`
	// From is "toml" when the last change came from a configuration file.
	From string `json:"from,omitempty"`
}

func (r *schedRecord) info(topic, name string) *ScheduleInfo {
	in := &ScheduleInfo{
		Schedule: Schedule{Name: name, Spec: r.Spec, TimeZone: r.TZ, Body: r.Body, MaxAttempts: r.MaxAttempts, Policy: r.Policy},
		Topic:    topic, Paused: r.Paused, Version: r.Version,
		Created: msTime(r.Created), Updated: msTime(r.Updated),
	}
	if in.Policy == "" {
		in.Policy = PolicySkip
	}
	in.Source = r.From
	return in
}

func decodeSched(topic, name string, b []byte) (*schedRecord, error) {
	var r schedRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("schedule %q of topic %s: bad stored definition: %v", name, topic, err)
	}
	return &r, nil
}

// validateSchedule checks s for this client and returns its parsed spec.
func (c *Client) validateSchedule(s *Schedule) (cron.Schedule, error) {
	cs, err := checkSchedule(s)
	if err != nil {
		return nil, err
	}
	if len(s.Body) > c.opts.MaxBodyBytes {
		return nil, fmt.Errorf("%w: schedule %q: body is %d bytes, the limit is %d", ErrInvalid, s.Name, len(s.Body), c.opts.MaxBodyBytes)
	}
	return cs, nil
}

// errScheduleNotFound is the error for a missing schedule: it names the
// schedule and the topic, and matches ErrNotFound.
func errScheduleNotFound(topic, name string) error {
	return &namedError{fmt.Sprintf("delayq: schedule %q of topic %s not found", name, topic), ErrNotFound}
}

// errScheduleExists is AddSchedule's error for a schedule of that name:
// it names the schedule, the topic and the stored definition, and
// matches ErrExists.
func errScheduleExists(topic, name string, old *schedRecord) error {
	tz := old.TZ
	if tz == "" {
		tz = "UTC"
	}
	return &namedError{fmt.Sprintf("delayq: schedule %q of topic %s exists already (spec %q in %s)", name, topic, old.Spec, tz), ErrExists}
}

// readSchedule returns the stored definition of name, nil if none.
func (c *Client) readSchedule(ctx context.Context, topic, name string) (*schedRecord, error) {
	b, err := c.store.GetSchedule(ctx, topic, name)
	if err != nil || b == nil {
		return nil, err
	}
	return decodeSched(topic, name, b)
}

// changeSchedule applies change to the stored definition of name (nil if
// none) and writes the result (nil: delete), retrying while concurrent
// changes win. change returns errUnchanged to write nothing. It returns
// the definitions before and after.
func (c *Client) changeSchedule(ctx context.Context, topic, name string, change func(old *schedRecord) (*schedRecord, error)) (old, cur *schedRecord, err error) {
	for range 20 {
		old, err = c.readSchedule(ctx, topic, name)
		if err != nil {
			return nil, nil, err
		}
		cur, err = change(old)
		if err != nil {
			return old, nil, err
		}
		var expect int64
		var b []byte
		if old != nil {
			expect = old.Version
		}
		if cur != nil {
			now := c.opts.Now().UnixMilli()
			// Versions rise with the clock, so that a schedule deleted
			// and added again never reuses a version.
			cur.Version = max(expect+1, now)
			cur.Updated = now
			if cur.Created == 0 {
				cur.Created = now
			}
			if b, err = json.Marshal(cur); err != nil {
				return old, nil, err
			}
		}
		ok, err := c.store.PutSchedule(ctx, topic, name, b, expect)
		if err != nil {
			return old, nil, err
		}
		if ok {
			return old, cur, nil
		}
	}
	return nil, nil, fmt.Errorf("schedule %q of topic %s: changed concurrently 20 times in a row", name, topic)
}

var errUnchanged = errors.New("unchanged")

// SetSchedule adds a schedule to topic, or replaces the one of that name:
// the replaced schedule's pending occurrence is removed and the next
// occurrence of the new definition is written, at once for every
// consumer. A paused schedule stays paused. It returns the schedule as
// stored. To refuse a name in use instead, use AddSchedule.
func (adm *Admin) SetSchedule(ctx context.Context, topic string, s Schedule) (*ScheduleInfo, error) {
	c := adm.c
	in, _, err := c.setSchedule(ctx, topic, s, "", false)
	return in, err
}

// AddSchedule adds a schedule to topic, as SetSchedule does, unless the
// topic has a schedule of that name: then it changes nothing and returns
// an error that names the schedule and matches ErrExists. The check and
// the write are one compare-and-set: of two adds of a name at once, one
// fails.
func (adm *Admin) AddSchedule(ctx context.Context, topic string, s Schedule) (*ScheduleInfo, error) {
	c := adm.c
	in, _, err := c.setSchedule(ctx, topic, s, "", true)
	return in, err
}

// setSchedule is SetSchedule, or with onlyNew AddSchedule; toml is the
// hash of the configuration file's definition it comes from, if it does:
// then a stored schedule last applied from the same definition is kept as
// it is. It returns what it did: "created", "replaced" or "kept".
func (c *Client) setSchedule(ctx context.Context, topic string, s Schedule, toml string, onlyNew bool) (*ScheduleInfo, string, error) {
	if err := validateTopic(topic); err != nil {
		return nil, "", err
	}
	if _, err := c.validateSchedule(&s); err != nil {
		return nil, "", err
	}
	old, cur, err := c.changeSchedule(ctx, topic, s.Name, func(old *schedRecord) (*schedRecord, error) {
		if toml != "" && old != nil && old.TOML == toml {
			return nil, errUnchanged
		}
		if onlyNew && old != nil {
			return nil, errScheduleExists(topic, s.Name, old)
		}
		r := &schedRecord{Spec: s.Spec, TZ: s.TimeZone, Body: s.Body, MaxAttempts: s.MaxAttempts, Policy: s.Policy, TOML: toml}
		if toml != "" {
			r.From = "toml"
		}
		if old != nil {
			r.Created, r.Paused = old.Created, old.Paused
			if toml == "" {
				r.TOML = old.TOML
			}
		}
		return r, nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		return old.info(topic, s.Name), "kept", c.ensureChain(ctx, topic, s.Name, old)
	case err != nil:
		return nil, "", err
	}
	if err := c.startChain(ctx, topic, s.Name, cur, time.Time{}); err != nil {
		return nil, "", err
	}
	action := "created"
	if old != nil {
		action = "replaced"
	}
	return cur.info(topic, s.Name), action, nil
}

// GetSchedule returns a schedule, or an error wrapping ErrNotFound.
func (ins *Inspector) GetSchedule(ctx context.Context, topic, name string) (*ScheduleInfo, error) {
	c := ins.c
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if err := validateScheduleName(name); err != nil {
		return nil, err
	}
	if _, err := c.topicLayout(ctx, topic); err != nil {
		return nil, err
	}
	r, err := c.readSchedule(ctx, topic, name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errScheduleNotFound(topic, name)
	}
	return r.info(topic, name), nil
}

// Schedules returns every schedule of topic, sorted by name. It reads
// them with HSCAN, a page of a few hundred per round trip.
func (ins *Inspector) Schedules(ctx context.Context, topic string) ([]ScheduleInfo, error) {
	c := ins.c
	if _, err := c.topicLayout(ctx, topic); err != nil {
		return nil, err
	}
	var out []ScheduleInfo
	seen := map[string]bool{}
	cursor := "0"
	for {
		next, names, defs, err := c.store.ScanSchedules(ctx, topic, cursor, 500)
		if err != nil {
			return nil, err
		}
		for i, name := range names {
			if seen[name] { // HSCAN may return a field twice
				continue
			}
			seen[name] = true
			r, err := decodeSched(topic, name, defs[i])
			if err != nil {
				return nil, err
			}
			out = append(out, *r.info(topic, name))
		}
		if cursor = next; cursor == "0" {
			break
		}
	}
	sortSchedules(out)
	return out, nil
}

func sortSchedules(s []ScheduleInfo) {
	slices.SortFunc(s, func(a, b ScheduleInfo) int { return strings.Compare(a.Name, b.Name) })
}

// PauseSchedule pauses a schedule: its pending occurrence is removed and
// no other is written until ResumeSchedule. Pausing a paused schedule
// does nothing.
func (adm *Admin) PauseSchedule(ctx context.Context, topic, name string) error {
	c := adm.c
	return c.pauseResume(ctx, topic, name, true)
}

// ResumeSchedule resumes a paused schedule from its next occurrence after
// now (the occurrences of the pause are not delivered). Resuming a
// running schedule only mends its chain if it was cut (its pending
// occurrence deleted by id, or a failure between a change and its first
// occurrence): the chain goes on from the next occurrence after now.
func (adm *Admin) ResumeSchedule(ctx context.Context, topic, name string) error {
	c := adm.c
	return c.pauseResume(ctx, topic, name, false)
}

func (c *Client) pauseResume(ctx context.Context, topic, name string, pause bool) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	if err := validateScheduleName(name); err != nil {
		return err
	}
	if _, err := c.topicLayout(ctx, topic); err != nil {
		return err
	}
	old, cur, err := c.changeSchedule(ctx, topic, name, func(old *schedRecord) (*schedRecord, error) {
		if old == nil {
			return nil, errScheduleNotFound(topic, name)
		}
		if old.Paused == pause {
			return nil, errUnchanged
		}
		r := *old
		r.Paused, r.From = pause, ""
		return &r, nil
	})
	if errors.Is(err, errUnchanged) {
		return c.ensureChain(ctx, topic, name, old) // resuming a running schedule mends a cut chain
	}
	if err != nil {
		return err
	}
	return c.startChain(ctx, topic, name, cur, time.Time{})
}

// DeleteSchedule removes a schedule and its pending occurrence. It
// returns an error wrapping ErrNotFound if there is no such schedule.
func (adm *Admin) DeleteSchedule(ctx context.Context, topic, name string) error {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return err
	}
	if err := validateScheduleName(name); err != nil {
		return err
	}
	if _, err := c.topicLayout(ctx, topic); err != nil {
		return err
	}
	old, _, err := c.changeSchedule(ctx, topic, name, func(old *schedRecord) (*schedRecord, error) {
		if old == nil {
			return nil, errScheduleNotFound(topic, name)
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return err
	}
	// A version above the deleted one: the mark's pending occurrence is
	// removed with the mark.
	v := max(old.Version+1, c.opts.Now().UnixMilli())
	_, _, err = c.store.ChainSchedule(ctx, store.TopicPartition{Topic: topic, P: schedulePartition(name, l.PlaceCount())}, store.ChainStep{Name: name, Version: v, Mode: store.ChainForget})
	return err
}

// tomlHash returns the hash a configuration file's definition of s is
// stored with (see ApplySchedules).
func tomlHash(s Schedule) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ScheduleApplied is what ApplySchedules did to one schedule.
type ScheduleApplied struct {
	Name   string
	Action string // "created", "replaced" or "kept"
}

// ApplySchedules applies the schedules of a configuration file to topic
// without undoing changes made at run time. Each stored schedule keeps a
// hash of the file's definition last applied to it, which changes made
// at run time (SetSchedule, pause, resume) keep. A schedule is created
// when it does not exist, and replaced only when its definition in the
// file differs from the one last applied (a schedule created at run time
// has none applied): an edit of the file wins over run-time changes, an
// unchanged file never does. A replaced schedule keeps its paused state.
// Schedules absent from the file are left alone: delete them at run
// time. Every definition is checked before any is written.
func (adm *Admin) ApplySchedules(ctx context.Context, topic string, defs []Schedule) ([]ScheduleApplied, error) {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if err := c.checkSchedules(defs); err != nil {
		return nil, err
	}
	var out []ScheduleApplied
	for _, s := range defs {
		_, action, err := c.setSchedule(ctx, topic, s, tomlHash(s), false)
		if err != nil {
			return out, err
		}
		out = append(out, ScheduleApplied{Name: s.Name, Action: action})
	}
	return out, nil
}

// checkSchedules checks a list of schedules for ApplySchedules: each
// valid, no name twice.
func (c *Client) checkSchedules(defs []Schedule) error {
	seen := map[string]bool{}
	for _, s := range defs {
		if _, err := c.validateSchedule(&s); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: schedule %q is listed twice", ErrInvalid, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
