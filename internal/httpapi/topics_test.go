package httpapi

import (
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// topicStored reports whether topic's meta key or its entry in the
// topics set exists.
func topicStored(t *testing.T, addr, topic string) bool {
	meta, listed := testenv.TopicStored(t, addr, delayq.DefaultNamespace, topic)
	return meta || listed
}

// testTopics: every route on a topic that does not exist answers 404
// saying so and stores nothing; DELETE of the topic refuses one that holds
// a message (409), checks force, and with force=true deletes it.
func testTopics(t *testing.T, a *api, addr, topic string) {
	base := "/v1/topics/" + topic
	for _, rq := range []struct{ method, path, body string }{
		{"GET", base + "/stats", ""},
		{"GET", msgPath(topic, "x"), ""},
		{"DELETE", msgPath(topic, "x"), ""},
		{"POST", msgPath(topic, "x") + "/reschedule", `{"delay":"1m"}`},
		{"GET", base + "/dead", ""},
		{"POST", base + "/dead/x/requeue", ""},
		{"DELETE", base + "/dead", ""},
		{"GET", base + "/export", ""},
		{"GET", base + "/schedules", ""},
		{"GET", base + "/schedules/s", ""},
		{"POST", base + "/pause", ""},
		{"POST", base + "/pause", `{"for":"5m"}`},
		{"POST", base + "/resume", ""},
		{"GET", base + "/limits", ""},
		{"PUT", base + "/limits", `{"rate":"5/s"}`},
		{"PUT", base + "/limits", `{}`},
		{"DELETE", base + "/limits", ""},
		{"DELETE", base, ""},
		{"DELETE", base + "?force=true", ""},
	} {
		var body any
		if rq.body != "" {
			body = rq.body
		}
		r := a.do(rq.method, rq.path, body)
		if r.code != 404 || !strings.Contains(r.str("error"), `topic "`+topic+`" does not exist`) {
			t.Errorf("%s %s of a topic that does not exist: %d %s; want 404 saying it does not exist", rq.method, rq.path, r.code, r.raw)
		}
		if topicStored(t, addr, topic) {
			t.Fatalf("%s %s stored the topic", rq.method, rq.path)
		}
	}

	a.do("POST", base+"/messages", map[string]any{"id": "m", "delay": "1h"}).want(t, 201)
	if r := a.do("DELETE", base, nil).want(t, 409); !strings.Contains(r.str("error"), "1 message (1 scheduled, 0 in flight, 0 dead)") {
		t.Errorf("refusal %q does not name the message", r.str("error"))
	}
	if r := a.do("DELETE", base+"?force=maybe", nil).want(t, 400); r.str("field") != "force" {
		t.Errorf("field %q, want force", r.str("field"))
	}
	a.do("GET", msgPath(topic, "m"), nil).want(t, 200)
	r := a.do("DELETE", base+"?force=true", nil).want(t, 200)
	if d, _ := r.json["deleted"].(map[string]any); d == nil || d["topic"] != topic || d["scheduled"] != float64(1) {
		t.Errorf("reply %s; want deleted: the topic with 1 scheduled", r.raw)
	}
	if topicStored(t, addr, topic) {
		t.Fatal("the topic is stored after its delete")
	}
	a.do("GET", base+"/stats", nil).want(t, 404)
}
