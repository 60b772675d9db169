package httpapi

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/wire"
)

// testPause: POST .../pause with no body pauses until resumed, with
// {"for"} or {"until"} until then; stats carry the pause; .../resume
// ends it; bad bodies are 400 naming the field.
func testPause(t *testing.T, a *api, topic string) {
	base := "/v1/topics/" + topic
	a.do("POST", base+"/messages", map[string]any{"id": "m", "delay": "1h"}).want(t, 201)
	if r := a.do("POST", base+"/pause", nil).want(t, 200); r.json["paused"] != true || r.json["paused_until"] != nil || r.str("topic") != topic {
		t.Errorf("pause with no body: %s, want paused until resumed", r.raw)
	}
	before := time.Now()
	r := a.do("POST", base+"/pause", map[string]any{"for": "5m"}).want(t, 200)
	end, err := time.Parse(time.RFC3339Nano, r.str("paused_until"))
	if err != nil || end.Before(before.Add(5*time.Minute)) || end.After(time.Now().Add(5*time.Minute+time.Millisecond)) {
		t.Errorf("pause for 5m: %s", r.raw)
	}
	st := a.do("GET", base+"/stats", nil).want(t, 200)
	if p, _ := st.json["pause"].(map[string]any); p == nil || p["paused"] != true || p["paused_until"] != wire.Time(end) {
		t.Errorf("stats of a paused topic: %s", st.raw)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	if r := a.do("POST", base+"/pause", map[string]any{"until": until.Format(time.RFC3339Nano)}).want(t, 200); r.str("paused_until") != wire.Time(until) {
		t.Errorf("pause until %v: %s", until, r.raw)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"for":"5m","until":"2099-01-01T00:00:00Z"}`, "for"},
		{`{"for":"-1s"}`, "for"},
		{`{"for":"soon"}`, "for"},
		{`{"until":"2001-01-01T00:00:00Z"}`, "until"},
		{`{"until":"tomorrow"}`, "until"},
		{`{"at":"2099-01-01T00:00:00Z"}`, "at"},
	} {
		if r := a.do("POST", base+"/pause", bad.body).want(t, 400); r.str("field") != bad.field {
			t.Errorf("pause %s: field %q, want %q", bad.body, r.str("field"), bad.field)
		}
	}
	if r := a.do("POST", base+"/resume", nil).want(t, 200); r.json["paused"] != false || r.json["paused_until"] != nil {
		t.Errorf("resume: %s", r.raw)
	}
	st = a.do("GET", base+"/stats", nil).want(t, 200)
	if p, _ := st.json["pause"].(map[string]any); p == nil || p["paused"] != false {
		t.Errorf("stats after resume: %s", st.raw)
	}
}
