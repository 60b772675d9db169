package delayq

import (
	"encoding/json"
	"time"

	"github.com/delayq/delayq/internal/wire"
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

// MarshalJSON encodes the message with snake_case keys, times in RFC 3339
// UTC, and the body as "body" (UTF-8) or "body_base64" (anything else).
func (in *Info) MarshalJSON() ([]byte, error) {
	v := infoJSON{
		Topic: in.Topic, ID: in.ID, Partition: in.Partition, State: string(in.State),
		Due: wire.Time(in.Due), Deadline: wire.Time(in.Deadline), DiedAt: wire.Time(in.DiedAt),
		Attempts: in.Attempts, MaxAttempts: in.MaxAttempts,
		Created: wire.Time(in.Created), Updated: wire.Time(in.Updated), LastError: in.LastError,
	}
	v.Body, v.BodyBase64 = wire.Body(in.Body)
	return json.Marshal(v)
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

// MarshalJSON encodes the pause's end in RFC 3339 UTC with three-digit
// milliseconds (see PartitionStats.MarshalJSON).
func (p PauseState) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Paused      bool   `json:"paused"`
		PausedUntil string `json:"paused_until,omitempty"`
	}{p.Paused, wireTime(p.PausedUntil)})
}

// MarshalJSON encodes the change's progress with its times in RFC 3339
// UTC with three-digit milliseconds (see PartitionStats.MarshalJSON).
func (p PartitionsInfo) MarshalJSON() ([]byte, error) {
	type plain PartitionsInfo
	return json.Marshal(struct {
		plain
		Since       string `json:"since,omitempty"`
		SettleUntil string `json:"settle_until,omitempty"`
	}{plain(p), wireTime(p.Since), wireTime(p.SettleUntil)})
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
