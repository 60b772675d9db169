package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

// apiError is an error response: its HTTP status, message and, when one
// field of the request is at fault, that field's JSON name.
type apiError struct {
	status int
	msg    string
	field  string
}

// Error returns the message.
func (e *apiError) Error() string { return e.msg }

func badField(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...), field: field}
}

// Fields of request bodies.
const (
	fieldID          = "id"
	fieldBody        = "body"
	fieldBodyBase64  = "body_base64"
	fieldDelay       = "delay"
	fieldDelayMS     = "delay_ms"
	fieldAt          = "at"
	fieldMaxAttempts = "max_attempts"
)

// enqueueFields are the fields of an enqueue body.
var enqueueFields = []string{fieldID, fieldBody, fieldBodyBase64, fieldDelay, fieldDelayMS, fieldAt, fieldMaxAttempts,
	fieldOnDuplicate, fieldMaxWait, fieldMaxWaitMS, fieldUniqueFor}

// timeFields say when a message is due; a request sets at most one.
var timeFields = []string{fieldDelay, fieldDelayMS, fieldAt}

// maxDelayMS is the largest delay_ms that fits a time.Duration.
const maxDelayMS = math.MaxInt64 / int64(time.Millisecond)

// when is the due time a request asked for: a delay from now, a time, or
// neither (field "").
type when struct {
	field string // the time field that was set: delay, delay_ms, at or ""
	delay time.Duration
	at    time.Time
}

// resolve returns the due time w means at now.
func (w when) resolve(now time.Time) time.Time {
	if w.field == fieldAt {
		return w.at
	}
	return now.Add(w.delay)
}

// enqueueRequest is a decoded POST .../messages body.
type enqueueRequest struct {
	ID          string // "" = generate one
	Body        []byte
	When        when
	MaxAttempts int
	Dup         dupRequest // on_duplicate, max_wait or max_wait_ms, unique_for
}

// message returns the Message to enqueue to topic, def saying what to do
// with an id that exists where the request does not (see
// dupRequest.resolve, whose error it returns).
func (q *enqueueRequest) message(topic string, def Duplicates) (delayq.Message, error) {
	m := delayq.Message{Topic: topic, ID: q.ID, Body: q.Body, MaxAttempts: q.MaxAttempts}
	if q.When.field == fieldAt {
		m.At = q.When.at
	} else {
		m.Delay = q.When.delay
	}
	var err error
	m.OnDuplicate, m.MaxWait, err = q.Dup.resolve(def)
	m.UniqueFor = q.Dup.uniqueFor(def)
	return m, err
}

// decodeEnqueue decodes the body of POST /v1/topics/{topic}/messages:
//
//	{"id"?: "...", "body"?: "...", "body_base64"?: "...",
//	 "delay"?: "5s", "delay_ms"?: 5000, "at"?: "2030-01-02T15:04:05Z",
//	 "max_attempts"?: 3, "on_duplicate"?: "debounce",
//	 "max_wait"?: "30m", "max_wait_ms"?: 1800000, "unique_for"?: "24h"}
//
// with at most one of body and body_base64, at most one of delay,
// delay_ms and at (none: due now) and at most one of max_wait and
// max_wait_ms; a null value counts as absent. Whether max_wait fits the
// policy is checked by message, which knows the topic's default. The
// decoded body may be at most maxBody bytes. Errors are *apiError: 400
// naming the field at fault, or 413 for a body too large (or a reader cut
// off by http.MaxBytesReader).
func decodeEnqueue(r io.Reader, maxBody int) (enqueueRequest, error) {
	var q enqueueRequest
	obj, err := decodeObject(r, enqueueFields...)
	if err != nil {
		return q, err
	}
	if raw, ok := obj[fieldID]; ok {
		if q.ID, err = decodeString(fieldID, raw); err != nil {
			return q, err
		}
		if q.ID != "" {
			if err := partition.ValidateID(q.ID); err != nil {
				return q, badField(fieldID, "id: %v", err)
			}
			if strings.HasPrefix(q.ID, delayq.ScheduleIDPrefix) {
				return q, badField(fieldID, "id: message id %q begins with %q, which is reserved for the occurrences of schedules", q.ID, delayq.ScheduleIDPrefix)
			}
		}
	}
	if q.Body, err = decodeBody(obj, maxBody); err != nil {
		return q, err
	}
	if q.When, err = decodeWhen(obj, false); err != nil {
		return q, err
	}
	if raw, ok := obj[fieldMaxAttempts]; ok {
		if err := json.Unmarshal(raw, &q.MaxAttempts); err != nil {
			return q, badField(fieldMaxAttempts, "max_attempts must be a non-negative integer")
		}
		if q.MaxAttempts < 0 {
			return q, badField(fieldMaxAttempts, "max_attempts %d is negative", q.MaxAttempts)
		}
	}
	if q.Dup, err = decodeDuplicates(obj); err != nil {
		return q, err
	}
	return q, nil
}

// DecodeMessage decodes one message to enqueue to topic from r, in the
// JSON form of the body of POST /v1/topics/{topic}/messages:
//
//	{"id"?: "...", "body"?: "...", "body_base64"?: "...",
//	 "delay"?: "5s", "delay_ms"?: 5000, "at"?: "2030-01-02T15:04:05Z",
//	 "max_attempts"?: 3, "on_duplicate"?: "debounce", "max_wait"?: "30m",
//	 "unique_for"?: "24h"}
//
// It is also the reader of the lines of "delayq send --stdin", so that
// both accept the same forms. The decoded body may be at most maxBody
// bytes. def is what the message does with an id that exists where it
// sets neither on_duplicate nor max_wait, and its uniqueness window where
// it sets no unique_for (see Duplicates). An error names
// the field at fault, when one is; the message returned with it carries
// the id when one was read. It is safe for concurrent use.
func DecodeMessage(r io.Reader, topic string, maxBody int, def Duplicates) (delayq.Message, error) {
	q, err := decodeEnqueue(r, maxBody)
	if err != nil {
		return delayq.Message{ID: q.ID}, err
	}
	m, err := q.message(topic, def)
	if err != nil {
		return delayq.Message{ID: q.ID}, err
	}
	return m, nil
}

// decodeReschedule decodes the body of POST .../messages/{id}/reschedule:
// exactly one of {"delay": "5s"}, {"delay_ms": 5000} and {"at": "..."}.
// Errors are *apiError, as for decodeEnqueue.
func decodeReschedule(r io.Reader) (when, error) {
	obj, err := decodeObject(r, timeFields...)
	if err != nil {
		return when{}, err
	}
	return decodeWhen(obj, true)
}

// decodeObject reads one JSON object from r and returns its members,
// without those whose value is null. It refuses members not in allowed,
// anything but an object, and data after it.
func decodeObject(r io.Reader, allowed ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(r)
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, readError(err)
	}
	if obj == nil {
		return nil, badField("", "want a JSON object, not null")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			if e := readError(err); e.status != http.StatusBadRequest {
				return nil, e
			}
		}
		return nil, badField("", "data after the JSON object")
	}
	var unknown []string
	for name, raw := range obj {
		switch {
		case !contains(allowed, name):
			unknown = append(unknown, name)
		case string(raw) == "null":
			delete(obj, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, badField(unknown[0], "unknown field %q (known: %s)", unknown[0], strings.Join(allowed, ", "))
	}
	return obj, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// readError turns an error of decoding the request body into an apiError.
func readError(err error) *apiError {
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, io.EOF):
		return badField("", "request body is empty, want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badField("", "malformed JSON: unexpected end of input")
	case errors.As(err, &syntax):
		return badField("", "malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		return badField("", "want a JSON object, not %s", typ.Value)
	}
	return badField("", "reading the request body: %v", err)
}

// decodeString decodes raw, the value of field, as a JSON string.
func decodeString(field string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badField(field, "%s must be a string", field)
	}
	return s, nil
}

// decodeBody returns the message body given by body or body_base64.
func decodeBody(obj map[string]json.RawMessage, maxBody int) ([]byte, error) {
	text, hasText := obj[fieldBody]
	b64, hasB64 := obj[fieldBodyBase64]
	var body []byte
	field := fieldBody
	switch {
	case hasText && hasB64:
		return nil, badField(fieldBodyBase64, "set only one of body and body_base64")
	case hasText:
		s, err := decodeString(fieldBody, text)
		if err != nil {
			return nil, err
		}
		body = []byte(s)
	case hasB64:
		field = fieldBodyBase64
		s, err := decodeString(fieldBodyBase64, b64)
		if err != nil {
			return nil, err
		}
		if body, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, badField(fieldBodyBase64, "body_base64 is not standard base64: %v", err)
		}
	}
	if len(body) > maxBody {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, field: field,
			msg: fmt.Sprintf("body is %d bytes, the limit is %d", len(body), maxBody)}
	}
	return body, nil
}

// decodeWhen reads the time fields of obj: at most one may be set, and
// exactly one when required.
func decodeWhen(obj map[string]json.RawMessage, required bool) (when, error) {
	var set []string
	for _, f := range timeFields {
		if _, ok := obj[f]; ok {
			set = append(set, f)
		}
	}
	switch {
	case len(set) > 1:
		return when{}, badField(set[1], "set only one of delay, delay_ms and at (got %s)", strings.Join(set, " and "))
	case len(set) == 0 && required:
		return when{}, badField(fieldDelay, "one of delay, delay_ms and at is required")
	case len(set) == 0:
		return when{}, nil
	}
	w := when{field: set[0]}
	raw := obj[w.field]
	switch w.field {
	case fieldDelay:
		s, err := decodeString(fieldDelay, raw)
		if err != nil {
			return when{}, badField(fieldDelay, `delay must be a duration string like "1m30s"`)
		}
		if w.delay, err = time.ParseDuration(s); err != nil {
			return when{}, badField(fieldDelay, "delay %q is not a duration like \"1m30s\"", s)
		}
		if w.delay < 0 {
			return when{}, badField(fieldDelay, "delay %q is negative", s)
		}
	case fieldDelayMS:
		var ms int64
		if err := json.Unmarshal(raw, &ms); err != nil {
			return when{}, badField(fieldDelayMS, "delay_ms must be an integer number of milliseconds")
		}
		if ms < 0 {
			return when{}, badField(fieldDelayMS, "delay_ms %d is negative", ms)
		}
		if ms > maxDelayMS {
			return when{}, badField(fieldDelayMS, "delay_ms %d is too large", ms)
		}
		w.delay = time.Duration(ms) * time.Millisecond
	case fieldAt:
		s, err := decodeString(fieldAt, raw)
		if err != nil {
			return when{}, badField(fieldAt, "at must be an RFC 3339 time string")
		}
		if w.at, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return when{}, badField(fieldAt, "at %q is not an RFC 3339 time like 2006-01-02T15:04:05Z", s)
		}
		if w.at.UnixMilli() <= 0 {
			return when{}, badField(fieldAt, "at %q is before 1970", s)
		}
	}
	return w, nil
}
