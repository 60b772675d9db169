package httpapi

import (
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// The schedule routes through Twemproxy: add, replace, list, pause,
// resume, delete, and errors that name the field or the spec.
func TestAPISchedules(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	client, err := delayq.New(delayq.Options{Addr: env.Proxy, Partitions: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	a := newAPI(t, Options{Token: "tok", MaxBodyBytes: 1024, Client: func(string) (*delayq.Client, error) { return client, nil }})
	base := "/v1/topics/api-sched/schedules"

	r := a.do("PUT", base+"/report", map[string]any{"spec": "0 3 * * *", "tz": "Asia/Shanghai", "body": "go", "max_attempts": 3}).want(t, 200)
	if r.str("name") != "report" || r.str("tz") != "Asia/Shanghai" || r.str("policy") != "skip" || r.str("body") != "go" || r.json["paused"] != false {
		t.Errorf("put: %s", r.raw)
	}
	if next, _ := r.json["next"].([]any); len(next) != 3 || !strings.HasSuffix(next[0].(string), "T19:00:00.000Z") {
		t.Errorf("next occurrences: %v (03:00 in Shanghai is 19:00 UTC)", r.json["next"])
	}
	a.do("PUT", base+"/tick", map[string]any{"spec": "@every 30s", "body_base64": "AAE=", "policy": "all"}).want(t, 200)
	// A name in use: refused without replace, and left as it was.
	r = a.do("PUT", base+"/report", map[string]any{"spec": "0 3 * * *"}).want(t, 409)
	if e := r.str("error"); !strings.Contains(e, `schedule "report" of topic api-sched exists already`) || !strings.Contains(e, "replace=true") {
		t.Errorf("PUT of a name in use: %s", r.raw)
	}
	if r = a.do("GET", base+"/report", nil).want(t, 200); r.str("tz") != "Asia/Shanghai" {
		t.Errorf("a refused PUT changed the schedule: %s", r.raw)
	}
	r = a.do("PUT", base+"/report?replace=true", map[string]any{"spec": "0 4 * * *", "tz": "Asia/Shanghai", "body": "go", "max_attempts": 3}).want(t, 200)
	if r.str("spec") != "0 4 * * *" {
		t.Errorf("PUT ?replace=true: %s", r.raw)
	}
	a.do("PUT", base+"/fresh?replace=true", map[string]any{"spec": "@hourly"}).want(t, 200)
	a.do("DELETE", base+"/fresh", nil).want(t, 204)
	r = a.do("GET", base, nil).want(t, 200)
	if list, _ := r.json["schedules"].([]any); len(list) != 2 || list[0].(map[string]any)["name"] != "report" {
		t.Errorf("list: %s", r.raw)
	}
	r = a.do("POST", base+"/report/pause", nil).want(t, 200)
	if r.json["paused"] != true || len(r.json["next"].([]any)) != 0 {
		t.Errorf("pause: %s", r.raw)
	}
	r = a.do("POST", base+"/report/resume", nil).want(t, 200)
	if r.json["paused"] != false {
		t.Errorf("resume: %s", r.raw)
	}
	a.do("DELETE", base+"/report", nil).want(t, 204)
	a.do("GET", base+"/report", nil).want(t, 404)
	a.do("DELETE", base+"/report", nil).want(t, 404)
	a.do("POST", base+"/report/pause", nil).want(t, 404)

	for _, tc := range []struct {
		path  string
		body  any
		code  int
		field string
		says  string
	}{
		{base + "/x", map[string]any{"spec": "61 * * * *"}, 400, "spec", `schedule "x": spec "61 * * * *"`},
		{base + "/x", map[string]any{"tz": "UTC"}, 400, "spec", "spec is required"},
		{base + "/x", map[string]any{"spec": "@hourly", "tz": "Nowhere/Land"}, 400, "tz", `time zone "Nowhere/Land"`},
		{base + "/x", map[string]any{"spec": "61 * * * *", "tz": "Nowhere/Land"}, 400, "tz", `time zone "Nowhere/Land"`},
		{base + "/x", map[string]any{"spec": "@hourly", "policy": "most"}, 400, "policy", `policy "most"`},
		{base + "/x", map[string]any{"spec": "@hourly", "max_attempts": -1}, 400, "max_attempts", "max attempts -1"},
		{base + "/x?replace=maybe", map[string]any{"spec": "@hourly"}, 400, "replace", `replace "maybe"`},
		{base + "/x", map[string]any{"spec": "@hourly", "colour": "red"}, 400, "colour", "unknown field"},
		{base + "/x", map[string]any{"spec": 5}, 400, "spec", "must be a string"},
		{base + "/x", map[string]any{"spec": "@hourly", "body": strings.Repeat("b", 2000)}, 413, "body", "limit"},
		{base + "/a:b", map[string]any{"spec": "@hourly"}, 400, "", `schedule name "a:b"`},
	} {
		r := a.do("PUT", tc.path, tc.body).want(t, tc.code)
		if r.str("field") != tc.field || !strings.Contains(r.str("error"), tc.says) {
			t.Errorf("PUT %s %v: %s, want field %q and %q", tc.path, tc.body, r.raw, tc.field, tc.says)
		}
	}
	a.token = ""
	a.do("GET", base, nil).want(t, 401)
}
