// Package wire holds the text forms delayq prints, shared by the root
// package's JSON, the CLI and the HTTP API, so that every output writes
// times and bodies the same way.
package wire

import (
	"encoding/base64"
	"time"
	"unicode/utf8"
)

// Time formats t as RFC 3339 with nanoseconds in UTC, the form of every
// time delayq prints; the zero time is "".
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
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
