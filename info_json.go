package delayq

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

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
}

// FormatTime formats t as RFC 3339 with nanoseconds in UTC, the form of
// every time delayq prints; the zero time is "".
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// BodyFields returns body as a string when it is valid UTF-8, else as
// standard base64: exactly one of the two is set.
func BodyFields(body []byte) (text *string, b64 string) {
	if utf8.Valid(body) {
		s := string(body)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(body)
}

// MarshalJSON encodes the message with snake_case keys, times in RFC 3339
// UTC, and the body as "body" (UTF-8) or "body_base64" (anything else).
func (in *Info) MarshalJSON() ([]byte, error) {
	v := infoJSON{
		Topic: in.Topic, ID: in.ID, Partition: in.Partition, State: string(in.State),
		Due: FormatTime(in.Due), Deadline: FormatTime(in.Deadline), DiedAt: FormatTime(in.DiedAt),
		Attempts: in.Attempts, MaxAttempts: in.MaxAttempts,
		Created: FormatTime(in.Created), Updated: FormatTime(in.Updated), LastError: in.LastError,
	}
	v.Body, v.BodyBase64 = BodyFields(in.Body)
	return json.Marshal(v)
}
