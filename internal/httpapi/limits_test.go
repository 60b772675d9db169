package httpapi

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// testLimits: PUT .../limits replaces the topic's limits and answers them
// (rate as "200/s", the limits not set left out), GET reads them, the
// library reads what was written, with the slots of the cap held as
// running; {} and DELETE clear them, and bad bodies are 400 naming the
// field, writing nothing.
func testLimits(t *testing.T, a *api, c *delayq.Client, addr, topic string) {
	ctx := context.Background()
	base := "/v1/topics/" + topic
	a.do("POST", base+"/messages", map[string]any{"id": "m", "delay": "1h"}).want(t, 201)
	stored := func(want delayq.Limits) {
		t.Helper()
		if got, err := c.Inspector().Limits(ctx, topic); err != nil || got != want {
			t.Errorf("Inspector.Limits: %+v, %v; want %+v", got, err, want)
		}
	}
	same := func(r *response, want map[string]any) {
		t.Helper()
		want["topic"] = topic
		want["started_last_second"], want["running"] = 0.0, 0.0
		if len(r.json) != len(want) {
			t.Errorf("answer %s, want %v", r.raw, want)
		}
		for k, v := range want {
			if r.json[k] != v {
				t.Errorf("answer %s: %s = %#v, want %#v", r.raw, k, r.json[k], v)
			}
		}
	}
	same(a.do("GET", base+"/limits", nil).want(t, 200), map[string]any{})

	r := a.do("PUT", base+"/limits", map[string]any{"rate": "200/s", "burst": 30, "concurrency": 10}).want(t, 200)
	same(r, map[string]any{"rate": "200/s", "burst": 30.0, "concurrency": 10.0})
	stored(delayq.Limits{Rate: 200, Burst: 30, Concurrency: 10})
	same(a.do("GET", base+"/limits", nil).want(t, 200), map[string]any{"rate": "200/s", "burst": 30.0, "concurrency": 10.0})
	if st := a.do("GET", base+"/stats", nil).want(t, 200); st.json["limits"].(map[string]any)["rate"] != "200/s" {
		t.Errorf("stats of a topic with limits: %s", st.raw)
	}

	// A PUT replaces every limit: what it leaves out goes.
	same(a.do("PUT", base+"/limits", map[string]any{"rate": 0.5}).want(t, 200), map[string]any{"rate": "30/m"})
	stored(delayq.Limits{Rate: 0.5})
	same(a.do("PUT", base+"/limits", `{"rate":"600/m","concurrency":null}`).want(t, 200), map[string]any{"rate": "10/s"})
	same(a.do("PUT", base+"/limits", map[string]any{"concurrency": 4}).want(t, 200), map[string]any{"concurrency": 4.0})
	stored(delayq.Limits{Concurrency: 4})
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if n, _, err := st.TakeSlots(ctx, topic, 4, []string{"a", "b", "c"}, now.Add(time.Hour), nil); err != nil || n != 3 {
		t.Fatalf("TakeSlots: %d, %v", n, err)
	}
	if r := a.do("GET", base+"/limits", nil).want(t, 200); r.json["running"] != 3.0 || r.json["concurrency"] != 4.0 {
		t.Errorf("limits with 3 slots of the cap held: %s", r.raw)
	}
	if err := st.ReleaseSlots(ctx, topic, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct{ body, field string }{
		{`{"rate":"fast"}`, "rate"},
		{`{"rate":"5/d"}`, "rate"},
		{`{"rate":-1}`, "rate"},
		{`{"rate":true}`, "rate"},
		{`{"rate":2000000}`, "rate"},
		{`{"rate":"1e-9/s"}`, "rate"},
		{`{"rate":1e-9}`, "rate"},
		{`{"burst":5}`, "burst"},
		{`{"rate":"5/s","burst":-1}`, "burst"},
		{`{"rate":"5/s","burst":1.5}`, "burst"},
		{`{"concurrency":-3}`, "concurrency"},
		{`{"concurrency":"3"}`, "concurrency"},
		{`{"per_host":3}`, "per_host"},
		{``, ""},
		{`[]`, ""},
	} {
		if r := a.do("PUT", base+"/limits", bad.body).want(t, 400); r.str("field") != bad.field {
			t.Errorf("PUT limits %s: field %q, want %q (%s)", bad.body, r.str("field"), bad.field, r.raw)
		}
	}
	stored(delayq.Limits{Concurrency: 4})

	same(a.do("PUT", base+"/limits", `{}`).want(t, 200), map[string]any{})
	stored(delayq.Limits{})
	a.do("PUT", base+"/limits", map[string]any{"rate": 100}).want(t, 200)
	same(a.do("DELETE", base+"/limits", nil).want(t, 200), map[string]any{})
	stored(delayq.Limits{})
}

// TestDecodeLimits: the forms of a rate, and the field named by each
// refusal.
func TestDecodeLimits(t *testing.T) {
	for body, want := range map[string]delayq.Limits{
		`{}`:                      {},
		`{"rate":"200/s"}`:        {Rate: 200},
		`{"rate":"100/h"}`:        {Rate: 100.0 / 3600},
		`{"rate":12.5,"burst":3}`: {Rate: 12.5, Burst: 3},
		`{"rate":0}`:              {},
		`{"rate":"0/s"}`:          {},
		`{"rate":null,"burst":0}`: {},
		`{"concurrency":7}`:       {Concurrency: 7},
	} {
		if got, err := decodeLimits(strings.NewReader(body)); err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", body, got, err, want)
		}
	}
	_, err := decodeLimits(strings.NewReader(`{"rate":"-1/s"}`))
	if ae, ok := err.(*apiError); !ok || ae.field != "rate" || !strings.Contains(ae.msg, `"-1/s"`) {
		t.Errorf("rate -1/s: %v, want a 400 naming rate and the value", err)
	}
}

func FuzzDecodeLimits(f *testing.F) {
	for _, s := range append(fuzzSeeds, `{"rate":"200/s","burst":20,"concurrency":3}`, `{"rate":1e308}`, `{"burst":1}`, `{"rate":"1/h"}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := decodeLimits(bytes.NewReader(data))
		if err != nil {
			checkRejected(t, err)
			return
		}
		if l.Rate < 0 || l.Burst < 0 || l.Concurrency < 0 || l.Burst > 0 && l.Rate == 0 {
			t.Fatalf("accepted %+v from %q", l, data)
		}
	})
}
