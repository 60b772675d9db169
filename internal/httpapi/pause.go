package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
)

// Fields of a pause's body.
const (
	fieldUntil = "until"
	fieldFor   = "for"
)

// maxPauseBytes bounds a pause's body: one short field.
const maxPauseBytes = 4 << 10

// pauseResponse is the reply of the pause and resume routes: the
// topic's pause after the call.
type pauseResponse struct {
	Topic       string `json:"topic"`
	Paused      bool   `json:"paused"`
	PausedUntil string `json:"paused_until,omitempty"`
}

// decodePause decodes the body of POST /v1/topics/{topic}/pause: empty,
// {}, {"for": "5m"} or {"until": "<RFC 3339>"}, and returns the pause's
// end (zero: until resumed) as of now.
func decodePause(r io.Reader, now time.Time) (time.Time, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return time.Time{}, readError(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return time.Time{}, nil
	}
	obj, err := decodeObject(bytes.NewReader(data), fieldUntil, fieldFor)
	if err != nil {
		return time.Time{}, err
	}
	rawFor, hasFor := obj[fieldFor]
	rawUntil, hasUntil := obj[fieldUntil]
	switch {
	case hasFor && hasUntil:
		return time.Time{}, badField(fieldFor, "set only one of for and until")
	case hasFor:
		s, err := decodeString(fieldFor, rawFor)
		if err != nil {
			return time.Time{}, badField(fieldFor, `for must be a duration string like "5m"`)
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return time.Time{}, badField(fieldFor, "for %q is not a positive duration like \"5m\"", s)
		}
		return now.Add(d), nil
	case hasUntil:
		s, err := decodeString(fieldUntil, rawUntil)
		if err != nil {
			return time.Time{}, badField(fieldUntil, "until must be an RFC 3339 time string")
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, badField(fieldUntil, "until %q is not an RFC 3339 time like 2006-01-02T15:04:05Z", s)
		}
		if !t.After(now) {
			return time.Time{}, badField(fieldUntil, "until %q is not in the future", s)
		}
		return t, nil
	}
	return time.Time{}, nil
}

// pauseTopic handles POST /v1/topics/{topic}/pause and .../resume.
func (s *server) pauseTopic(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	var err error
	if r.Pattern == "POST /v1/topics/{topic}/pause" {
		var until time.Time
		if until, err = decodePause(http.MaxBytesReader(w, r.Body, maxPauseBytes), time.Now()); err == nil {
			err = c.Admin().Pause(r.Context(), topic, delayq.PauseOptions{Until: until})
		}
	} else {
		err = c.Admin().Resume(r.Context(), topic)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := c.Inspector().Partitions(r.Context(), topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := pauseResponse{Topic: topic, Paused: info.Pause.Paused}
	if info.Pause.PausedUntil != nil {
		resp.PausedUntil = wire.Time(*info.Pause.PausedUntil)
	}
	writeJSON(w, http.StatusOK, resp)
}
