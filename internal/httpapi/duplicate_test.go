package httpapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// TestEnqueueDuplicates: on_duplicate and max_wait (or max_wait_ms) of an
// enqueue body, and the default that applies to what a body does not set.
func TestEnqueueDuplicates(t *testing.T) {
	deb30 := Duplicates{OnDuplicate: delayq.Debounce, MaxWait: 30 * time.Minute}
	for _, tc := range []struct {
		name    string
		in      string
		def     Duplicates
		policy  delayq.OnDuplicate
		maxWait time.Duration
		field   string // of the 400, when one is expected
	}{
		{"none", `{}`, Duplicates{}, delayq.Reject, 0, ""},
		{"reject", `{"on_duplicate":"reject"}`, Duplicates{}, delayq.Reject, 0, ""},
		{"replace", `{"on_duplicate":"replace"}`, Duplicates{}, delayq.Replace, 0, ""},
		{"debounce", `{"on_duplicate":"debounce"}`, Duplicates{}, delayq.Debounce, 0, ""},
		{"debounce with max_wait", `{"on_duplicate":"debounce","max_wait":"1h30m"}`, Duplicates{}, delayq.Debounce, 90 * time.Minute, ""},
		{"debounce with max_wait_ms", `{"on_duplicate":"debounce","max_wait_ms":2500}`, Duplicates{}, delayq.Debounce, 2500 * time.Millisecond, ""},
		{"null is absent", `{"on_duplicate":null,"max_wait":null}`, deb30, delayq.Debounce, 30 * time.Minute, ""},

		{"the default", `{}`, deb30, delayq.Debounce, 30 * time.Minute, ""},
		{"the default's policy, the body's max_wait", `{"max_wait":"5m"}`, deb30, delayq.Debounce, 5 * time.Minute, ""},
		{"max_wait 0 lifts the default's bound", `{"max_wait":"0s"}`, deb30, delayq.Debounce, 0, ""},
		{"the body's debounce, the default's bound", `{"on_duplicate":"debounce"}`, deb30, delayq.Debounce, 30 * time.Minute, ""},
		{"the body's replace drops the default's bound", `{"on_duplicate":"replace"}`, deb30, delayq.Replace, 0, ""},
		{"the body's reject over the default", `{"on_duplicate":"reject"}`, deb30, delayq.Reject, 0, ""},
		{"a replace default has no bound for a debounce", `{"on_duplicate":"debounce"}`, Duplicates{OnDuplicate: delayq.Replace}, delayq.Debounce, 0, ""},

		{"unknown policy", `{"on_duplicate":"merge"}`, Duplicates{}, "", 0, "on_duplicate"},
		{"policies are lower case", `{"on_duplicate":"Debounce"}`, Duplicates{}, "", 0, "on_duplicate"},
		{"empty policy", `{"on_duplicate":""}`, deb30, "", 0, "on_duplicate"},
		{"padded policy", `{"on_duplicate":" replace"}`, Duplicates{}, "", 0, "on_duplicate"},
		{"numeric policy", `{"on_duplicate":1}`, Duplicates{}, "", 0, "on_duplicate"},
		{"max_wait without a debounce", `{"max_wait":"5m"}`, Duplicates{}, "", 0, "max_wait"},
		{"max_wait with replace", `{"on_duplicate":"replace","max_wait":"5m"}`, deb30, "", 0, "max_wait"},
		{"max_wait_ms with reject", `{"on_duplicate":"reject","max_wait_ms":5}`, Duplicates{}, "", 0, "max_wait_ms"},
		{"max_wait and max_wait_ms", `{"on_duplicate":"debounce","max_wait":"1m","max_wait_ms":5}`, Duplicates{}, "", 0, "max_wait_ms"},
		{"bad max_wait", `{"on_duplicate":"debounce","max_wait":"soon"}`, Duplicates{}, "", 0, "max_wait"},
		{"numeric max_wait", `{"on_duplicate":"debounce","max_wait":60}`, Duplicates{}, "", 0, "max_wait"},
		{"negative max_wait", `{"on_duplicate":"debounce","max_wait":"-1m"}`, Duplicates{}, "", 0, "max_wait"},
		{"negative max_wait_ms", `{"on_duplicate":"debounce","max_wait_ms":-1}`, Duplicates{}, "", 0, "max_wait_ms"},
		{"fractional max_wait_ms", `{"on_duplicate":"debounce","max_wait_ms":1.5}`, Duplicates{}, "", 0, "max_wait_ms"},
		{"huge max_wait_ms", `{"on_duplicate":"debounce","max_wait_ms":9223372036854775807}`, Duplicates{}, "", 0, "max_wait_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage(strings.NewReader(tc.in), "t", 16, tc.def)
			if tc.field != "" {
				var ae *apiError
				if !errors.As(err, &ae) || ae.status != 400 || ae.field != tc.field || !strings.Contains(ae.msg, tc.field) {
					t.Fatalf("err = %v, want a 400 naming field %q", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.OnDuplicate != tc.policy || m.MaxWait != tc.maxWait {
				t.Errorf("on duplicate %q max wait %v, want %q %v", m.OnDuplicate, m.MaxWait, tc.policy, tc.maxWait)
			}
		})
	}
}

// TestParseOnDuplicate: exactly the three names; what
// delayq.ParseOnDuplicate lets pass beyond them ("", spaces) is refused.
func TestParseOnDuplicate(t *testing.T) {
	for s, want := range map[string]delayq.OnDuplicate{"reject": delayq.Reject, "replace": delayq.Replace, "debounce": delayq.Debounce} {
		if got, err := ParseOnDuplicate(s); err != nil || got != want {
			t.Errorf("ParseOnDuplicate(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	for _, s := range []string{"", " ", "replace ", "REPLACE", "merge"} {
		if _, err := ParseOnDuplicate(s); !errors.Is(err, delayq.ErrInvalid) || !strings.Contains(err.Error(), "want reject, replace or debounce") {
			t.Errorf("ParseOnDuplicate(%q): %v, want ErrInvalid saying what it wants", s, err)
		}
	}
}

// testDuplicates: the reply of an enqueue says what it did (outcome) and
// the due stored; a replaced or debounced message answers 200, a created
// one 201, a rejected one 409 with outcome "rejected"; a topic's default
// (Options.Duplicates) applies to what a body does not set.
func testDuplicates(t *testing.T, client *delayq.Client, topic string) {
	deb := topic + "-deb" // debounces by default, within an hour
	a := newAPI(t, Options{
		Client: func(string) (*delayq.Client, error) { return client, nil },
		Duplicates: func(tp string) Duplicates {
			if tp == deb {
				return Duplicates{OnDuplicate: delayq.Debounce, MaxWait: time.Hour}
			}
			return Duplicates{}
		},
	})
	// send posts body to topic and checks the reply's status, id and
	// outcome; it returns the due the reply says was stored, which get
	// then shows for a message created. (For one replaced or debounced
	// later, get may show the earlier due of the index entry, which a
	// claim moves to the record's: no later than the reply's.)
	send := func(topic string, body map[string]any, code int, outcome string) time.Time {
		t.Helper()
		r := a.do("POST", "/v1/topics/"+topic+"/messages", body).want(t, code)
		if r.str("id") != body["id"] || r.str("outcome") != outcome {
			t.Fatalf("reply %s, want id %v and outcome %q", r.raw, body["id"], outcome)
		}
		if code == 409 {
			return time.Time{}
		}
		due, err := time.Parse(time.RFC3339Nano, r.str("due"))
		if err != nil {
			t.Fatalf("reply %s: due: %v", r.raw, err)
		}
		got := a.do("GET", msgPath(topic, r.str("id")), nil).want(t, 200).str("due")
		if g, _ := time.Parse(time.RFC3339Nano, got); outcome == "created" && got != r.str("due") || g.After(due) {
			t.Errorf("get %s: due %s, the enqueue's reply said %s (%s)", r.str("id"), got, r.str("due"), outcome)
		}
		return due
	}
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("%s: due %v, want about %v", what, got.UTC(), want.UTC())
		}
	}

	// No default: a duplicate is rejected unless the body says otherwise.
	send(topic, map[string]any{"id": "x", "body": "first", "delay": "30m"}, 201, "created")
	r := a.do("POST", "/v1/topics/"+topic+"/messages", map[string]any{"id": "x", "body": "dup", "delay": "2h"}).want(t, 409)
	if r.str("outcome") != "rejected" || r.str("id") != "x" || !strings.Contains(r.str("error"), "duplicate") {
		t.Errorf("rejected duplicate: %s", r.raw)
	}
	replaced := time.Now()
	near("replace", send(topic, map[string]any{"id": "x", "body": "second", "delay": "2h", "on_duplicate": "replace"}, 200, "replaced"), replaced.Add(2*time.Hour))
	if got := a.do("GET", msgPath(topic, "x"), nil).want(t, 200).str("body"); got != "second" {
		t.Errorf("body after replace %q, want second", got)
	}
	// A replace opened the window: a debounce is due an hour after it at the latest.
	near("debounce bounded by max_wait_ms", send(topic, map[string]any{"id": "x", "delay": "3h", "on_duplicate": "debounce", "max_wait_ms": 3600000}, 200, "debounced"), replaced.Add(time.Hour))
	if r := a.do("POST", "/v1/topics/"+topic+"/messages", map[string]any{"id": "x", "max_wait": "1m"}).want(t, 400); r.str("field") != "max_wait" {
		t.Errorf("max_wait on a topic without a default: %s", r.raw)
	}

	// The topic's default: debounce within an hour of the first event.
	first := time.Now()
	near("created", send(deb, map[string]any{"id": "y", "delay": "30m"}, 201, "created"), first.Add(30*time.Minute))
	near("debounced by default", send(deb, map[string]any{"id": "y", "delay": "3h"}, 200, "debounced"), first.Add(time.Hour))
	near("debounced without a bound", send(deb, map[string]any{"id": "y", "delay": "3h", "max_wait": "0s"}, 200, "debounced"), time.Now().Add(3*time.Hour))
	send(deb, map[string]any{"id": "y", "delay": "3h", "on_duplicate": "reject"}, 409, "rejected")
	near("replaced over the default", send(deb, map[string]any{"id": "y", "delay": "5m", "on_duplicate": "replace"}, 200, "replaced"), time.Now().Add(5*time.Minute))
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"id": "y", "on_duplicate": "replace", "max_wait": "1m"}, "max_wait"},
		{map[string]any{"id": "y", "on_duplicate": "Debounce"}, "on_duplicate"},
	} {
		r := a.do("POST", "/v1/topics/"+deb+"/messages", bad.body).want(t, 400)
		if r.str("field") != bad.field || !strings.Contains(r.str("error"), bad.field) {
			t.Errorf("%v: %s, want a 400 naming field %s", bad.body, r.raw, bad.field)
		}
	}
}
