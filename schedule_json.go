package delayq

import (
	"encoding/json"
	"time"

	"github.com/delayq/delayq/internal/wire"
)

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
