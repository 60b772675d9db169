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
	State       State     // scheduled, in flight or dead
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
	Body        []byte
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
	Body        *string `json:"body,omitempty"`
	BodyBase64  *string `json:"body_base64,omitempty"`
}

// MarshalJSON encodes the message as one line of the export format:
//
//	{"id":"...","state":"scheduled","due":"2026-11-25T21:00:00.000Z",
//	 "attempts":0,"max_attempts":0,"created":"...","updated":"...","body":"..."}
//
// state is "scheduled", "inflight" or "dead"; times are RFC 3339 in UTC
// with milliseconds; died_at is set when dead, last_error when not empty,
// window_opened when a debounce window is open (see Message.MaxWait),
// traceparent when the message was enqueued under a span; the body is
// "body" when it is valid UTF-8 and "body_base64" (standard base64)
// otherwise.
func (m *ExportedMessage) MarshalJSON() ([]byte, error) {
	return m.appendJSON(nil)
}

// appendJSON appends the message's JSON line, without the newline, to b.
func (m *ExportedMessage) appendJSON(b []byte) ([]byte, error) {
	attempts, maxAttempts := m.Attempts, m.MaxAttempts
	v := exportJSON{
		ID: m.ID, State: string(m.State), Due: wire.Time(m.Due), DiedAt: wire.Time(m.DiedAt),
		Attempts: &attempts, MaxAttempts: &maxAttempts, LastError: m.LastError,
		Created: wire.Time(m.Created), Updated: wire.Time(m.Updated), Window: wire.Time(m.WindowOpened),
		Traceparent: m.Traceparent,
	}
	v.Body, v.BodyBase64 = exportBody(m.Body)
	out, err := appendLine(b, v)
	if err != nil {
		return b, fmt.Errorf("encode message %q: %w", m.ID, err)
	}
	return out, nil
}

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
// import then), died_at to updated; "body" and "body_base64" are
// exclusive, and neither is an empty body. Unknown fields are errors, so
// that a misspelt field does not go unnoticed; each error names the
// field.
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
		return fmt.Errorf(`"state" %q: want %q, %q or %q`, v.State, StateScheduled, StateInFlight, StateDead)
	case v.Due == "":
		return errors.New(`"due" is missing`)
	case v.Traceparent != "" && !parseTraceparent(v.Traceparent).IsValid():
		return fmt.Errorf(`"traceparent" %q: want a W3C traceparent such as "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, v.Traceparent)
	}
	for _, f := range []struct {
		name string
		s    string
		dst  *time.Time
	}{{"due", v.Due, &out.Due}, {"died_at", v.DiedAt, &out.DiedAt}, {"created", v.Created, &out.Created}, {"updated", v.Updated, &out.Updated},
		{"window_opened", v.Window, &out.WindowOpened}} {
		if f.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.s)
		if err != nil {
			return fmt.Errorf("%q: %v", f.name, err)
		}
		*f.dst = t
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

// set counts the fields of v that a line set: when it is the number of
// the line's members, every member was a field of v, once (a quick check
// in place of json.Decoder.DisallowUnknownFields, which costs half as
// much again as the decoding).
func (v *exportJSON) set() int {
	n := 0
	for _, s := range []string{v.ID, v.State, v.Due, v.DiedAt, v.LastError, v.Created, v.Updated, v.Window, v.Traceparent} {
		if s != "" {
			n++
		}
	}
	for _, set := range []bool{v.Attempts != nil, v.MaxAttempts != nil, v.Body != nil, v.BodyBase64 != nil} {
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
