package wire

import (
	"encoding/base64"
	"time"
	"unicode/utf8"
)

// TimeLayout is the form of every time delayq prints: RFC 3339 in UTC
// with milliseconds, always three digits, so that times line up in
// columns and sort as text. Due times are stored in milliseconds: it
// loses nothing of them.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time formats t in TimeLayout, in UTC; the zero time is "".
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}

// Body returns body as a string when it is valid UTF-8, else as standard
// base64: exactly one of the two is set.
func Body(body []byte) (text *string, b64 string) {
	if utf8.Valid(body) {
		s := string(body)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(body)
}
