package httpapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// TestDecodeUniqueFor: an enqueue body's unique_for is a Go duration of 0
// or more; a body without one gets the default's (send --stdin
// --unique-for), one that sets it (even to "0s") keeps its own; anything
// else is a 400 naming the field and the value.
func TestDecodeUniqueFor(t *testing.T) {
	def := Duplicates{UniqueFor: 3 * time.Hour}
	for _, tc := range []struct {
		name string
		in   string
		def  Duplicates
		want time.Duration
		bad  string // the value the 400 names, "" when accepted
	}{
		{"none", `{}`, Duplicates{}, 0, ""},
		{"a day", `{"unique_for":"24h"}`, Duplicates{}, 24 * time.Hour, ""},
		{"the default", `{}`, def, 3 * time.Hour, ""},
		{"null is absent", `{"unique_for":null}`, def, 3 * time.Hour, ""},
		{"the body's over the default", `{"unique_for":"90m"}`, def, 90 * time.Minute, ""},
		{"0s set is the body's", `{"unique_for":"0s"}`, def, 0, ""},
		{"with a policy", `{"unique_for":"1h","on_duplicate":"replace"}`, Duplicates{}, time.Hour, ""},

		{"negative", `{"unique_for":"-1h"}`, Duplicates{}, 0, `"-1h" is negative`},
		{"not a duration", `{"unique_for":"a day"}`, Duplicates{}, 0, `"a day" is not a duration`},
		{"no unit", `{"unique_for":"86400"}`, Duplicates{}, 0, `"86400" is not a duration`},
		{"a number", `{"unique_for":86400}`, Duplicates{}, 0, `must be a duration string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage(strings.NewReader(tc.in), "t", 16, tc.def)
			if tc.bad != "" {
				var ae *apiError
				if !errors.As(err, &ae) || ae.status != 400 || ae.field != "unique_for" || !strings.Contains(ae.msg, "unique_for") || !strings.Contains(ae.msg, tc.bad) {
					t.Fatalf("err = %v, want a 400 of field unique_for saying %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.UniqueFor != tc.want {
				t.Errorf("UniqueFor = %v, want %v", m.UniqueFor, tc.want)
			}
		})
	}
}

// TestDecodeUniqueForBody: a PUT .../unique-for body is exactly
// {"unique_for": DURATION}, 0s or more.
func TestDecodeUniqueForBody(t *testing.T) {
	for in, want := range map[string]time.Duration{`{"unique_for":"24h"}`: 24 * time.Hour, `{"unique_for":"0s"}`: 0, ` {"unique_for":"1m30s"} `: 90 * time.Second} {
		if d, err := decodeUniqueForBody(strings.NewReader(in)); err != nil || d != want {
			t.Errorf("%s: %v, %v; want %v", in, d, err, want)
		}
	}
	for in, field := range map[string]string{
		`{}`: "unique_for", `{"unique_for":null}`: "unique_for", `{"unique_for":"-1s"}`: "unique_for",
		`{"unique_for":"soon"}`: "unique_for", `{"unique_for":60}`: "unique_for", `{"window":"1h"}`: "window", ``: "", `{"unique_for":"1h"} x`: "",
	} {
		_, err := decodeUniqueForBody(strings.NewReader(in))
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != 400 || ae.field != field {
			t.Errorf("%q: %v, want a 400 naming field %q", in, err, field)
		}
	}
}

// testUniqueFor: an enqueue's unique_for is the message's window; once
// its delivery is acked, a send of the id answers 409 with outcome
// "finished", state "done", and when it finished and until when its id
// is taken, as GET shows them, whatever its on_duplicate; a plain
// duplicate still answers 409 "rejected", without them. The unique-for
// routes read and set the topic's default, which a later enqueue with a
// given id gets; bad bodies are 400 naming unique_for, writing nothing;
// a topic that does not exist is 404, and is not created.
func testUniqueFor(t *testing.T, a *api, c *delayq.Client, topic string) {
	ctx := context.Background()
	base := "/v1/topics/" + topic

	// The routes of a topic that does not exist.
	a.do("GET", base+"/unique-for", nil).want(t, 404)
	a.do("PUT", base+"/unique-for", `{"unique_for":"1h"}`).want(t, 404)
	a.do("GET", base+"/stats", nil).want(t, 404)

	r := a.do("POST", base+"/messages", map[string]any{"id": "u1", "body": "x", "unique_for": "1h"}).want(t, 201)
	if r.str("outcome") != "created" {
		t.Fatalf("enqueue with unique_for: %s", r.raw)
	}
	if r := a.do("GET", msgPath(topic, "u1"), nil).want(t, 200); r.json["unique_for_ms"] != 3600000.0 {
		t.Errorf("get of a message sent with unique_for 1h: %s", r.raw)
	}
	a.do("POST", base+"/messages", map[string]any{"id": "p", "delay": "1h"}).want(t, 201)
	a.do("POST", base+"/messages", map[string]any{"id": "bad", "unique_for": "-1h"}).want(t, 400)
	if r := a.do("POST", base+"/messages", map[string]any{"id": "bad", "unique_for": "a day"}).want(t, 400); r.str("field") != "unique_for" || !strings.Contains(r.str("error"), `"a day"`) {
		t.Errorf("enqueue with a bad unique_for: %s", r.raw)
	}

	// A consumer acks u1 (p is due in an hour).
	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: topic, Lease: time.Second, PollInterval: 50 * time.Millisecond},
		func(context.Context, *delayq.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(kctx) }()
	var got *response
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = a.do("GET", msgPath(topic, "u1"), nil)
		if got.code == 200 && got.str("state") == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("u1 not done after 10s: %s", got.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	finished, err1 := time.Parse(time.RFC3339Nano, got.str("finished"))
	until, err2 := time.Parse(time.RFC3339Nano, got.str("unique_until"))
	if err1 != nil || err2 != nil || until.Sub(finished) != time.Hour {
		t.Fatalf("get of a done message: %s", got.raw)
	}

	for _, body := range []map[string]any{
		{"id": "u1"},
		{"id": "u1", "on_duplicate": "replace", "delay": "1m"},
		{"id": "u1", "on_duplicate": "debounce", "unique_for": "2h"},
	} {
		r := a.do("POST", base+"/messages", body).want(t, 409)
		want := map[string]any{"id": "u1", "outcome": "finished", "state": "done",
			"finished": got.str("finished"), "unique_until": got.str("unique_until")}
		for k, v := range want {
			if r.json[k] != v {
				t.Errorf("send %v of a finished id: %s = %#v, want %#v (%s)", body, k, r.json[k], v, r.raw)
			}
		}
		if len(r.json) != len(want)+1 || !strings.Contains(r.str("error"), "delivered at") || !strings.Contains(r.str("error"), "taken until") {
			t.Errorf("send %v of a finished id: %s", body, r.raw)
		}
	}
	r = a.do("POST", base+"/messages", map[string]any{"id": "p"}).want(t, 409)
	if r.str("outcome") != "rejected" || len(r.json) != 3 {
		t.Errorf("a plain duplicate: %s, want {error, id, outcome rejected}", r.raw)
	}

	// The topic's default.
	same := func(r *response, ms float64) {
		t.Helper()
		if r.str("topic") != topic || r.json["unique_for_ms"] != ms || len(r.json) != 2 {
			t.Errorf("answer %s, want topic %s and unique_for_ms %v", r.raw, topic, ms)
		}
	}
	stored := func(want time.Duration) {
		t.Helper()
		if d, err := c.Inspector().UniqueFor(ctx, topic); err != nil || d != want {
			t.Errorf("Inspector.UniqueFor: %v, %v; want %v", d, err, want)
		}
	}
	same(a.do("GET", base+"/unique-for", nil).want(t, 200), 0)
	same(a.do("PUT", base+"/unique-for", `{"unique_for":"24h"}`).want(t, 200), 86400000)
	stored(24 * time.Hour)
	same(a.do("GET", base+"/unique-for", nil).want(t, 200), 86400000)
	for _, bad := range []struct{ body, field string }{
		{`{"unique_for":"-1h"}`, "unique_for"},
		{`{"unique_for":"soon"}`, "unique_for"},
		{`{"unique_for":3600}`, "unique_for"},
		{`{}`, "unique_for"},
		{`{"unique_for":"1h","x":1}`, "x"},
	} {
		if r := a.do("PUT", base+"/unique-for", bad.body).want(t, 400); r.str("field") != bad.field {
			t.Errorf("PUT %s: %s, want field %q", bad.body, r.raw, bad.field)
		}
	}
	stored(24 * time.Hour)
	a.do("POST", base+"/messages", map[string]any{"id": "d1", "delay": "1h"}).want(t, 201)
	if r := a.do("GET", msgPath(topic, "d1"), nil).want(t, 200); r.json["unique_for_ms"] != 86400000.0 {
		t.Errorf("a message sent with a given id after the default was set: %s", r.raw)
	}
	same(a.do("PUT", base+"/unique-for", `{"unique_for":"0s"}`).want(t, 200), 0)
	stored(0)
}
