package delayq

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/wire"
)

// ExportedMessage is one message of a topic as Export reads it and Import
// writes it, and one line of the JSON lines format of both (see
// MarshalJSON).
type ExportedMessage struct {
	ID          string
	State       State     // scheduled, in flight, dead or done
	Due         time.Time // when it is (or was last) due
	DiedAt      time.Time // when it died, when dead
	Attempts    int       // deliveries that ended so far
	MaxAttempts int       // 0: the consumer's default
	LastError   string
	Created     time.Time
	Updated     time.Time // last transition
	// WindowOpened is when the message's debounce window opened (see
	// Message.MaxWait): zero for a message no Replace or Debounce send
	// wrote, or whose delivery started since.
	WindowOpened time.Time
	// Traceparent is the W3C trace context stored with the message by
	// an enqueue made under a span (see Client.Send), empty for none:
	// an import keeps it, so that the message's deliveries stay in its
	// trace.
	Traceparent string
	// UniqueFor is the message's uniqueness window (see
	// Message.UniqueFor), 0 for none: an import keeps it, so that the
	// message's id stays taken after its delivery there.
	UniqueFor time.Duration
	Body      []byte
	// Finished and UniqueUntil are a done message's (State StateDone: a
	// message delivered within its uniqueness window, of which only its
	// id is kept): when its delivery was acked, and when its id is free
	// again. A done message has no other field but its ID; the others
	// have neither.
	Finished, UniqueUntil time.Time
}

// exportTime is the form of the times of the export format: RFC 3339 in
// UTC with milliseconds, the precision delayq stores, as every output
// prints times.
const exportTime = wire.TimeLayout

// exportJSON is the JSON line of an ExportedMessage. Pointers tell absent
// fields from zero values when a line is read.
type exportJSON struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Due         string  `json:"due"`
	DiedAt      string  `json:"died_at,omitempty"`
	Attempts    *int    `json:"attempts,omitempty"`
	MaxAttempts *int    `json:"max_attempts,omitempty"`
	LastError   string  `json:"last_error,omitempty"`
	Created     string  `json:"created,omitempty"`
	Updated     string  `json:"updated,omitempty"`
	Window      string  `json:"window_opened,omitempty"`
	Traceparent string  `json:"traceparent,omitempty"`
	UniqueForMS int64   `json:"unique_for_ms,omitempty"`
	Body        *string `json:"body,omitempty"`
	BodyBase64  *string `json:"body_base64,omitempty"`
	Finished    string  `json:"finished,omitempty"`
	UniqueUntil string  `json:"unique_until,omitempty"`
}

// doneJSON is the JSON line of a done message: its id and times only.
type doneJSON struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Finished    string `json:"finished"`
	UniqueUntil string `json:"unique_until"`
}

// MarshalJSON encodes the message as one line of the export format:
//
//	{"id":"...","state":"scheduled","due":"2026-11-25T21:00:00.000Z",
//	 "attempts":0,"max_attempts":0,"created":"...","updated":"...","body":"..."}
//
// state is "scheduled", "inflight", "dead" or "done"; times are RFC 3339
// in UTC with milliseconds; died_at is set when dead, last_error when not
// empty, window_opened when a debounce window is open (see
// Message.MaxWait), traceparent when the message was enqueued under a
// span, unique_for_ms when it has a uniqueness window (see
// Message.UniqueFor, in milliseconds); the body is "body" when it is
// valid UTF-8 and "body_base64" (standard base64) otherwise.
//
// A done message (an id kept after its delivery, until the end of its
// uniqueness window) is a line of its own, with no due, body or
// attempts:
//
//	{"id":"...","state":"done","finished":"2026-11-25T21:00:00.000Z",
//	 "unique_until":"2026-11-26T21:00:00.000Z"}
//
// finished is when its delivery was acked, unique_until when its id is
// free again.
func (m *ExportedMessage) MarshalJSON() ([]byte, error) {
	return m.appendJSON(nil)
}

// appendJSON appends the message's JSON line, without the newline, to b.
func (m *ExportedMessage) appendJSON(b []byte) ([]byte, error) {
	if m.State == StateDone {
		out, err := appendLine(b, doneJSON{ID: m.ID, State: string(m.State), Finished: wire.Time(m.Finished), UniqueUntil: wire.Time(m.UniqueUntil)})
		if err != nil {
			return b, fmt.Errorf("encode done message %q: %w", m.ID, err)
		}
		return out, nil
	}
	attempts, maxAttempts := m.Attempts, m.MaxAttempts
	v := exportJSON{
		ID: m.ID, State: string(m.State), Due: wire.Time(m.Due), DiedAt: wire.Time(m.DiedAt),
		Attempts: &attempts, MaxAttempts: &maxAttempts, LastError: m.LastError,
		Created: wire.Time(m.Created), Updated: wire.Time(m.Updated), Window: wire.Time(m.WindowOpened),
		Traceparent: m.Traceparent, UniqueForMS: uniqueForMSOf(m.UniqueFor),
	}
	v.Body, v.BodyBase64 = exportBody(m.Body)
	out, err := appendLine(b, v)
	if err != nil {
		return b, fmt.Errorf("encode message %q: %w", m.ID, err)
	}
	return out, nil
}

// uniqueForMSOf is a uniqueness window in the export format's
// milliseconds: one under a millisecond is kept as one, as a send keeps
// it.
func uniqueForMSOf(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return ms
}

// maxUniqueForMS is the longest uniqueness window a line can give, in
// ms: the longest time.Duration.
const maxUniqueForMS = int64(1<<63-1) / int64(time.Millisecond)

// exportBody is a body as the export format writes it: "body" when it is
// valid UTF-8, "body_base64" otherwise; exactly one is set.
func exportBody(body []byte) (text, b64 *string) {
	text, s := wire.Body(body)
	if text == nil {
		return nil, &s
	}
	return text, nil
}

// appendLine appends v's JSON, without the newline and with no escape of
// HTML characters, to b.
func appendLine(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// UnmarshalJSON reads one line of the export format (see MarshalJSON).
// id, state and due are required; attempts and max_attempts default to 0,
// created and updated to the zero time (Import writes the time of the
// import then), died_at to updated, unique_for_ms to 0 (no window);
// "body" and "body_base64" are exclusive, and neither is an empty body.
// A done line requires finished and unique_until (not before finished)
// and has no other field; the other states have neither. Unknown fields
// are errors, so that a misspelt field does not go unnoticed; each error
// names the field.
func (m *ExportedMessage) UnmarshalJSON(line []byte) error {
	var v exportJSON
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' {
		return errors.New("invalid JSON: not an object")
	}
	if json.Unmarshal(line, &v) != nil || members(line) != v.set() {
		// Something is off (an unknown, repeated, null or empty field, a
		// syntax error): the decoder that refuses unknown fields says
		// what, or accepts the line after all.
		v = exportJSON{}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("invalid JSON: %v", err)
		}
		if dec.More() {
			return errors.New("invalid JSON: more than one value on the line")
		}
	}
	out := ExportedMessage{ID: v.ID, State: State(v.State), LastError: v.LastError, Traceparent: v.Traceparent}
	switch {
	case v.ID == "":
		return errors.New(`"id" is missing`)
	case v.State == "":
		return errors.New(`"state" is missing`)
	case !validState(out.State):
		return fmt.Errorf(`"state" %q: want %q, %q, %q or %q`, v.State, StateScheduled, StateInFlight, StateDead, StateDone)
	case out.State == StateDone:
		if err := v.checkDone(); err != nil {
			return err
		}
	case v.Due == "":
		return errors.New(`"due" is missing`)
	case v.Finished != "" || v.UniqueUntil != "":
		return fmt.Errorf(`"finished" or "unique_until" is set on a message in state %q (only a done line has them)`, v.State)
	case v.Traceparent != "" && !parseTraceparent(v.Traceparent).IsValid():
		return fmt.Errorf(`"traceparent" %q: want a W3C traceparent such as "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, v.Traceparent)
	case v.UniqueForMS < 0:
		return fmt.Errorf(`"unique_for_ms" %d is negative`, v.UniqueForMS)
	case v.UniqueForMS > maxUniqueForMS:
		return fmt.Errorf(`"unique_for_ms" %d is over %d`, v.UniqueForMS, maxUniqueForMS)
	}
	out.UniqueFor = time.Duration(v.UniqueForMS) * time.Millisecond
	for _, f := range []struct {
		name string
		s    string
		dst  *time.Time
	}{{"due", v.Due, &out.Due}, {"died_at", v.DiedAt, &out.DiedAt}, {"created", v.Created, &out.Created}, {"updated", v.Updated, &out.Updated},
		{"window_opened", v.Window, &out.WindowOpened}, {"finished", v.Finished, &out.Finished}, {"unique_until", v.UniqueUntil, &out.UniqueUntil}} {
		if f.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.s)
		if err != nil {
			return fmt.Errorf("%q: %v", f.name, err)
		}
		*f.dst = t
	}
	if out.State == StateDone {
		if out.UniqueUntil.Before(out.Finished) {
			return fmt.Errorf(`"unique_until" %s is before "finished" %s`, v.UniqueUntil, v.Finished)
		}
		*m = out
		return nil
	}
	if v.Attempts != nil {
		out.Attempts = *v.Attempts
	}
	if v.MaxAttempts != nil {
		out.MaxAttempts = *v.MaxAttempts
	}
	switch {
	case out.Attempts < 0:
		return fmt.Errorf(`"attempts" %d is negative`, out.Attempts)
	case out.MaxAttempts < 0:
		return fmt.Errorf(`"max_attempts" %d is negative`, out.MaxAttempts)
	case out.State != StateDead && !out.DiedAt.IsZero():
		return fmt.Errorf(`"died_at" is set on a message in state %q`, out.State)
	}
	switch {
	case v.Body != nil && v.BodyBase64 != nil:
		return errors.New(`both "body" and "body_base64" are set`)
	case v.Body != nil:
		out.Body = []byte(*v.Body)
	case v.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*v.BodyBase64)
		if err != nil {
			return fmt.Errorf(`"body_base64": %v`, err)
		}
		out.Body = b
	}
	*m = out
	return nil
}

// checkDone checks the fields of a done line: finished and unique_until,
// and nothing else but its id and state.
func (v *exportJSON) checkDone() error {
	switch {
	case v.Finished == "":
		return errors.New(`"finished" is missing (a done line needs it)`)
	case v.UniqueUntil == "":
		return errors.New(`"unique_until" is missing (a done line needs it)`)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"due", v.Due != ""}, {"died_at", v.DiedAt != ""}, {"attempts", v.Attempts != nil}, {"max_attempts", v.MaxAttempts != nil},
		{"last_error", v.LastError != ""}, {"created", v.Created != ""}, {"updated", v.Updated != ""}, {"window_opened", v.Window != ""},
		{"traceparent", v.Traceparent != ""}, {"unique_for_ms", v.UniqueForMS != 0}, {"body", v.Body != nil}, {"body_base64", v.BodyBase64 != nil},
	} {
		if f.set {
			return fmt.Errorf(`%q is set on a done line (it has only "id", "state", "finished" and "unique_until")`, f.name)
		}
	}
	return nil
}

// set counts the fields of v that a line set: when it is the number of
// the line's members, every member was a field of v, once (a quick check
// in place of json.Decoder.DisallowUnknownFields, which costs half as
// much again as the decoding).
func (v *exportJSON) set() int {
	n := 0
	for _, s := range []string{v.ID, v.State, v.Due, v.DiedAt, v.LastError, v.Created, v.Updated, v.Window, v.Traceparent, v.Finished, v.UniqueUntil} {
		if s != "" {
			n++
		}
	}
	for _, set := range []bool{v.Attempts != nil, v.MaxAttempts != nil, v.Body != nil, v.BodyBase64 != nil, v.UniqueForMS != 0} {
		if set {
			n++
		}
	}
	return n
}

// members counts the members of the JSON object b, which is valid JSON:
// the colons outside strings at depth 1.
func members(b []byte) int {
	n, depth := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ':' && depth == 1:
			n++
		}
	}
	return n
}
