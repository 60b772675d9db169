package delayq

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/wire"
)

// Schedules in exports. An export of a whole topic carries the topic's
// schedule definitions as lines of their own, before its messages, so
// that a move between clusters takes the cron along. The occurrences'
// messages stay in the export (a backup holds them, and "delete --in"
// removes them from the source), but an import leaves them out: an
// occurrence's id holds the version of its schedule and is steered to the
// schedule's partition under the source's partition count, so in another
// cluster it would either be acked unrun as stale or, under another
// count, be a second message for the same occurrence. The schedule's line
// carries instead the time of its pending occurrence (Next), and the
// import writes that occurrence in the destination's own chain.

// ExportedSchedule is a schedule as an export of its topic carries it
// (see ExportSchedules) and ImportSchedule writes it.
type ExportedSchedule struct {
	Schedule
	Paused  bool
	Created time.Time
	// Updated is the last change, from which @every counts.
	Updated time.Time
	// Next is the time of the schedule's pending occurrence in the topic
	// it was exported from: the one its chain delivers next. Zero when it
	// has none (paused, or its chain cut).
	Next time.Time
}

// ExportSchedules returns the schedules of topic, sorted by name, each
// with the time of its pending occurrence, for an export of the topic.
// It writes nothing (a topic never used has none).
func (ins *Inspector) ExportSchedules(ctx context.Context, topic string) ([]ExportedSchedule, error) {
	c := ins.c
	all, err := c.Inspector().Schedules(ctx, topic)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	l, err := c.store.ReadLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]ExportedSchedule, 0, len(all))
	for _, s := range all {
		e := ExportedSchedule{Schedule: s.Schedule, Paused: s.Paused, Created: s.Created, Updated: s.Updated}
		if !s.Paused && l.Count > 0 {
			mark, live, err := c.scheduleMarkLive(ctx, topic, s.Name, l)
			if err != nil {
				return nil, err
			}
			if _, v, at, ok := ParseScheduleID(mark); ok && live && v == s.Version {
				e.Next = at
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// ImportSchedule adds an exported schedule to topic, with its paused
// state and its created and updated times, unless the topic has a
// schedule of that name: then it changes nothing and returns an error
// matching ErrExists, as AddSchedule does. Its chain goes on at s.Next,
// the occurrence that was pending where it was exported (delivered at
// once when that time is past, or skipped as missed by the schedule's
// policy when it is more than MissedAfter past), or when s.Next is zero
// at its next occurrence after now. Import the topic's messages without
// the occurrences of the source (ids beginning with ScheduleIDPrefix,
// which Import refuses): this writes the pending one.
func (adm *Admin) ImportSchedule(ctx context.Context, topic string, s ExportedSchedule) (*ScheduleInfo, error) {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if _, err := c.validateSchedule(&s.Schedule); err != nil {
		return nil, err
	}
	now := c.opts.Now()
	r := &schedRecord{
		Version: now.UnixMilli(), Spec: s.Spec, TZ: s.TimeZone, Body: s.Body, MaxAttempts: s.MaxAttempts, Policy: s.Policy,
		Paused: s.Paused, Created: s.Created.UnixMilli(), Updated: s.Updated.UnixMilli(),
	}
	if s.Created.IsZero() {
		r.Created = now.UnixMilli()
	}
	if s.Updated.IsZero() {
		r.Updated = now.UnixMilli()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	ok, err := c.store.PutSchedule(ctx, topic, s.Name, b, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		old, err := c.readSchedule(ctx, topic, s.Name)
		if err != nil {
			return nil, err
		}
		if old == nil { // deleted meanwhile: say so rather than retry
			return nil, fmt.Errorf("schedule %q of topic %s: changed concurrently during its import", s.Name, topic)
		}
		if old.sameImport(r) {
			// Written by an import of this same line that may have
			// died before its chain began: begin it (once: the mark).
			if err := c.importChain(ctx, topic, s.Name, old, s.Next, now); err != nil {
				return nil, err
			}
		}
		return nil, errScheduleExists(topic, s.Name, old)
	}
	if err := c.importChain(ctx, topic, s.Name, r, s.Next, now); err != nil {
		return nil, err
	}
	return r.info(topic, s.Name), nil
}

// importChain begins the chain of an imported schedule r at next, or
// when next is zero at its next occurrence after now. Run again, it
// writes nothing more: the mark refuses an occurrence written before.
func (c *Client) importChain(ctx context.Context, topic, name string, r *schedRecord, next, now time.Time) error {
	var err error
	switch {
	case r.Paused:
		err = c.startChain(ctx, topic, name, r, time.Time{})
	case next.IsZero():
		err = c.startChain(ctx, topic, name, r, now)
	default:
		l, lerr := c.ensureTopic(ctx, topic)
		if err = lerr; err == nil {
			_, err = c.writeOccurrence(ctx, occurrenceWrite{topic: topic, name: name, def: r, at: time.UnixMilli(next.UnixMilli()), layout: l, now: now})
		}
	}
	if err != nil {
		return fmt.Errorf("schedule %q of topic %s: imported, but its chain did not begin (import it again): %w", name, topic, err)
	}
	return nil
}

// sameImport says whether the stored definition r is what importing i
// writes, but for the version: an earlier import of the same line.
func (r *schedRecord) sameImport(i *schedRecord) bool {
	return r.Spec == i.Spec && r.TZ == i.TZ && bytes.Equal(r.Body, i.Body) && r.MaxAttempts == i.MaxAttempts &&
		r.Policy == i.Policy && r.Paused == i.Paused && r.Created == i.Created && r.Updated == i.Updated && r.TOML == "" && r.From == ""
}

// scheduleLineJSON is the line of a schedule in the export format: one
// member, "schedule", which an importer that knows only messages refuses
// as an unknown field rather than misreading the line.
type scheduleLineJSON struct {
	Schedule *exportScheduleJSON `json:"schedule"`
}

// exportScheduleJSON is an ExportedSchedule in the export format.
type exportScheduleJSON struct {
	Name        string  `json:"name"`
	Spec        string  `json:"spec"`
	TZ          string  `json:"tz,omitempty"`
	Policy      string  `json:"policy,omitempty"`
	MaxAttempts int     `json:"max_attempts,omitempty"`
	Paused      bool    `json:"paused,omitempty"`
	Created     string  `json:"created,omitempty"`
	Updated     string  `json:"updated,omitempty"`
	Next        string  `json:"next,omitempty"`
	Body        *string `json:"body,omitempty"`
	BodyBase64  *string `json:"body_base64,omitempty"`
}

// MarshalJSON encodes the schedule as its line of the export format:
//
//	{"schedule":{"name":"daily","spec":"0 3 * * *","tz":"Asia/Shanghai",
//	 "policy":"skip","max_attempts":3,"created":"...","updated":"...",
//	 "next":"2026-11-26T19:00:00.000Z","body":"..."}}
//
// Times are RFC 3339 in UTC with milliseconds; next is the pending
// occurrence's time, left out when there is none, as paused is when
// false; the body is "body" when it is valid UTF-8, "body_base64"
// otherwise.
func (s *ExportedSchedule) MarshalJSON() ([]byte, error) {
	v := exportScheduleJSON{
		Name: s.Name, Spec: s.Spec, TZ: s.TimeZone, Policy: string(s.Policy), MaxAttempts: s.MaxAttempts, Paused: s.Paused,
		Created: wire.Time(s.Created), Updated: wire.Time(s.Updated), Next: wire.Time(s.Next),
	}
	v.Body, v.BodyBase64 = exportBody(s.Body)
	out, err := appendLine(nil, scheduleLineJSON{&v})
	if err != nil {
		return nil, fmt.Errorf("encode schedule %q: %w", s.Name, err)
	}
	return out, nil
}

// UnmarshalJSON reads the line of a schedule in the export format (see
// MarshalJSON): name and spec are required, unknown fields are errors,
// and each error names the field. The definition itself is checked by
// ImportSchedule.
func (s *ExportedSchedule) UnmarshalJSON(line []byte) error {
	var v scheduleLineJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return errors.New("invalid JSON: more than one value on the line")
	}
	j := v.Schedule
	switch {
	case j == nil:
		return errors.New(`"schedule" is missing`)
	case j.Name == "":
		return errors.New(`"schedule": "name" is missing`)
	case j.Spec == "":
		return fmt.Errorf(`schedule %q: "spec" is missing`, j.Name)
	}
	out := ExportedSchedule{
		Schedule: Schedule{Name: j.Name, Spec: j.Spec, TimeZone: j.TZ, MaxAttempts: j.MaxAttempts, Policy: Policy(j.Policy)},
		Paused:   j.Paused,
	}
	for _, f := range []struct {
		name, s string
		dst     *time.Time
	}{{"created", j.Created, &out.Created}, {"updated", j.Updated, &out.Updated}, {"next", j.Next, &out.Next}} {
		if f.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.s)
		if err != nil {
			return fmt.Errorf("schedule %q: %q: %v", j.Name, f.name, err)
		}
		*f.dst = t
	}
	switch {
	case j.Body != nil && j.BodyBase64 != nil:
		return fmt.Errorf(`schedule %q: both "body" and "body_base64" are set`, j.Name)
	case j.Body != nil:
		out.Body = []byte(*j.Body)
	case j.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*j.BodyBase64)
		if err != nil {
			return fmt.Errorf(`schedule %q: "body_base64": %v`, j.Name, err)
		}
		out.Body = b
	}
	*s = out
	return nil
}

// isLineOf says whether a line that is not a message is meant as a line
// of the given kind: a JSON object with that member ("schedule" or
// "controls").
func isLineOf(line []byte, member string) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	_, ok := probe[member]
	return ok
}
