package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

func TestDecodeEnqueue(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, tc := range []struct {
		name   string
		in     string
		status int    // 0: accepted
		field  string // of the error
		check  func(t *testing.T, q enqueueRequest)
	}{
		{"minimal", `{}`, 0, "", func(t *testing.T, q enqueueRequest) {
			if q.ID != "" || q.Body != nil || q.When.field != "" || q.MaxAttempts != 0 {
				t.Errorf("q = %+v", q)
			}
		}},
		{"all", `{"id":"a/b ü","body":"hi","delay":"1m30s","max_attempts":3}`, 0, "", func(t *testing.T, q enqueueRequest) {
			if q.ID != "a/b ü" || string(q.Body) != "hi" || q.When.field != "delay" || q.When.delay != 90*time.Second || q.MaxAttempts != 3 {
				t.Errorf("q = %+v", q)
			}
		}},
		{"delay_ms", `{"delay_ms":2500}`, 0, "", func(t *testing.T, q enqueueRequest) {
			if q.When.field != "delay_ms" || q.When.delay != 2500*time.Millisecond {
				t.Errorf("when = %+v", q.When)
			}
		}},
		{"at", `{"at":"2030-01-02T03:04:05.0000006Z"}`, 0, "", func(t *testing.T, q enqueueRequest) {
			if q.When.field != "at" || !q.When.at.Equal(at) {
				t.Errorf("when = %+v", q.When)
			}
			if m, _ := q.message("t", Duplicates{}); !m.At.Equal(at) || m.Delay != 0 {
				t.Errorf("message = %+v", m)
			}
		}},
		{"base64", `{"body_base64":"gAE="}`, 0, "", func(t *testing.T, q enqueueRequest) {
			if !bytes.Equal(q.Body, []byte{0x80, 0x01}) {
				t.Errorf("body = %x", q.Body)
			}
		}},
		{"nulls are absent", `{"id":null,"delay":null,"at":"2030-01-02T03:04:05Z","body":null}`, 0, "", nil},
		{"body at the limit", `{"body":"` + strings.Repeat("x", 16) + `"}`, 0, "", nil},

		{"empty", ``, 400, "", nil},
		{"malformed", `{"body":`, 400, "", nil},
		{"not an object", `["x"]`, 400, "", nil},
		{"null", `null`, 400, "", nil},
		{"trailing data", `{} {}`, 400, "", nil},
		{"trailing garbage", `{}x`, 400, "", nil},
		{"unknown field", `{"body":"x","priority":1}`, 400, "priority", nil},
		{"field names are case-sensitive", `{"Delay":"1s"}`, 400, "Delay", nil},
		{"delay and at", `{"delay":"1s","at":"2030-01-02T03:04:05Z"}`, 400, "at", nil},
		{"delay and delay_ms", `{"delay":"1s","delay_ms":5}`, 400, "delay_ms", nil},
		{"negative delay", `{"delay":"-1s"}`, 400, "delay", nil},
		{"bad delay", `{"delay":"soon"}`, 400, "delay", nil},
		{"numeric delay", `{"delay":5}`, 400, "delay", nil},
		{"negative delay_ms", `{"delay_ms":-1}`, 400, "delay_ms", nil},
		{"fractional delay_ms", `{"delay_ms":1.5}`, 400, "delay_ms", nil},
		{"huge delay_ms", `{"delay_ms":9223372036854775807}`, 400, "delay_ms", nil},
		{"bad at", `{"at":"tomorrow"}`, 400, "at", nil},
		{"at before 1970", `{"at":"1969-12-31T23:59:59Z"}`, 400, "at", nil},
		{"bad id", `{"id":"` + strings.Repeat("x", 201) + `"}`, 400, "id", nil},
		{"id of a schedule's occurrence", `{"id":"@sched:daily:1:2:x"}`, 400, "id", nil},
		{"control char in id", `{"id":"a\nb"}`, 400, "id", nil},
		{"numeric id", `{"id":7}`, 400, "id", nil},
		{"body and base64", `{"body":"x","body_base64":"eA=="}`, 400, "body_base64", nil},
		{"bad base64", `{"body_base64":"!!"}`, 400, "body_base64", nil},
		{"numeric body", `{"body":1}`, 400, "body", nil},
		{"negative max_attempts", `{"max_attempts":-1}`, 400, "max_attempts", nil},
		{"string max_attempts", `{"max_attempts":"3"}`, 400, "max_attempts", nil},
		{"body too large", `{"body":"` + strings.Repeat("x", 17) + `"}`, 413, "body", nil},
		{"base64 too large", `{"body_base64":"` + strings.Repeat("AAAA", 6) + `"}`, 413, "body_base64", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := decodeEnqueue(strings.NewReader(tc.in), 16)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if tc.check != nil {
					tc.check(t, q)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want an *apiError", err, err)
			}
			if ae.status != tc.status || ae.field != tc.field {
				t.Errorf("status %d field %q (%s), want %d %q", ae.status, ae.field, ae.msg, tc.status, tc.field)
			}
		})
	}
}

func TestDecodeEnqueueReaderLimit(t *testing.T) {
	rec := httptest.NewRecorder()
	body := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(`{"body":"`+strings.Repeat("x", 100)+`"}`)), 50)
	_, err := decodeEnqueue(body, 1000)
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("err = %v, want a 413 apiError", err)
	}
}

func TestDecodeReschedule(t *testing.T) {
	for _, tc := range []struct {
		in, field string // field: of the result when ok, of the error otherwise
		ok        bool
	}{
		{`{"delay":"5s"}`, "delay", true},
		{`{"delay_ms":0}`, "delay_ms", true},
		{`{"at":"2030-01-02T03:04:05+02:00"}`, "at", true},
		{`{}`, "delay", false},
		{`{"delay":null}`, "delay", false},
		{`{"delay":"5s","at":"2030-01-02T03:04:05Z"}`, "at", false},
		{`{"body":"x"}`, "body", false},
		{`{"delay":"-5s"}`, "delay", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			w, err := decodeReschedule(strings.NewReader(tc.in))
			if tc.ok {
				if err != nil || w.field != tc.field {
					t.Fatalf("when %+v, err %v; want field %q", w, err, tc.field)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != 400 || ae.field != tc.field {
				t.Fatalf("err = %#v, want 400 on field %q", err, tc.field)
			}
		})
	}
}

// setTimeFields returns the time fields the JSON object data sets to a
// non-null value, read independently of the code under test.
func setTimeFields(t *testing.T, data []byte) []string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatalf("accepted input is not a JSON object: %v", err)
	}
	var set []string
	for _, f := range []string{"delay", "delay_ms", "at"} {
		if v, ok := obj[f]; ok && string(v) != "null" {
			set = append(set, f)
		}
	}
	return set
}

// checkRejected checks that err is a well-formed error response.
func checkRejected(t *testing.T, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want an *apiError", err, err)
	}
	if (ae.status != 400 && ae.status != 413) || ae.msg == "" {
		t.Fatalf("bad apiError %#v", ae)
	}
}

var fuzzSeeds = []string{
	`{}`, `{"id":"x","body":"hi","delay":"5s","max_attempts":2}`, `{"delay_ms":100}`,
	`{"at":"2030-01-02T03:04:05Z"}`, `{"body_base64":"gA=="}`, `{"delay":"1s","at":"2030-01-02T03:04:05Z"}`,
	`{"delay":null,"delay_ms":5}`, `{"x":1}`, `[]`, `null`, `{"delay":"-1s"}`, `{"delay":"1s","delay":"2s"}`,
	`{"id":"\u00fc/\u2603"}`, `{} x`, `{"body":"` + strings.Repeat("x", 40) + `"}`,
	`{"on_duplicate":"debounce","max_wait":"30m"}`, `{"on_duplicate":"replace","max_wait_ms":5}`,
	`{"max_wait":"1m","max_wait_ms":5}`, `{"on_duplicate":"merge"}`,
}

func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := decodeEnqueue(bytes.NewReader(data), 32)
		if err != nil {
			checkRejected(t, err)
			return
		}
		set := setTimeFields(t, data)
		if len(set) > 1 {
			t.Fatalf("accepted %d time fields %v in %q", len(set), set, data)
		}
		if len(set) == 1 && q.When.field != set[0] || len(set) == 0 && q.When.field != "" {
			t.Fatalf("time field %q, input sets %v", q.When.field, set)
		}
		if q.When.delay < 0 || len(q.Body) > 32 || q.MaxAttempts < 0 {
			t.Fatalf("accepted out-of-range values: %+v", q)
		}
		if q.When.field == "at" && q.When.at.UnixMilli() <= 0 {
			t.Fatalf("accepted at %v", q.When.at)
		}
		if q.ID != "" && partition.ValidateID(q.ID) != nil {
			t.Fatalf("accepted bad id %q", q.ID)
		}
		m, err := q.message("t", Duplicates{OnDuplicate: delayq.Debounce, MaxWait: time.Minute})
		if err != nil {
			checkRejected(t, err)
			return
		}
		switch {
		case m.OnDuplicate != delayq.Reject && m.OnDuplicate != delayq.Replace && m.OnDuplicate != delayq.Debounce:
			t.Fatalf("accepted on_duplicate %q", m.OnDuplicate)
		case m.MaxWait < 0 || m.MaxWait > 0 && m.OnDuplicate != delayq.Debounce:
			t.Fatalf("accepted max wait %v with on_duplicate %q", m.MaxWait, m.OnDuplicate)
		}
	})
}

func FuzzDecodeReschedule(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := decodeReschedule(bytes.NewReader(data))
		if err != nil {
			checkRejected(t, err)
			return
		}
		set := setTimeFields(t, data)
		if len(set) != 1 || w.field != set[0] {
			t.Fatalf("accepted time fields %v as %q in %q", set, w.field, data)
		}
		if w.delay < 0 {
			t.Fatalf("accepted negative delay %v", w.delay)
		}
	})
}

// TestDecodeMessage: the exported decoder (also send --stdin's) gives the
// message of topic, and the id it read along with an error.
func TestDecodeMessage(t *testing.T) {
	m, err := DecodeMessage(strings.NewReader(`{"id":"a","body":"hi","delay":"5s","max_attempts":2}`), "t", 16, Duplicates{})
	if err != nil || m.Topic != "t" || m.ID != "a" || string(m.Body) != "hi" || m.Delay != 5*time.Second || m.MaxAttempts != 2 {
		t.Fatalf("DecodeMessage = %+v, %v", m, err)
	}
	m, err = DecodeMessage(strings.NewReader(`{"id":"a","delay":"soon"}`), "t", 16, Duplicates{})
	var ae *apiError
	if !errors.As(err, &ae) || ae.field != "delay" || m.ID != "a" {
		t.Fatalf("DecodeMessage of a bad delay = %+v, %v", m, err)
	}
}
