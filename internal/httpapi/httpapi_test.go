package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMain fails the run when goroutines outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(testenv.SpawnerFunc))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// api is a test server of the HTTP API and how to call it.
type api struct {
	t     *testing.T
	srv   *httptest.Server
	token string
}

func newAPI(t *testing.T, o Options) *api {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	srv := httptest.NewServer(New(o))
	t.Cleanup(srv.Close)
	return &api{t: t, srv: srv, token: o.Token}
}

// response is a decoded reply.
type response struct {
	code   int
	header http.Header
	raw    []byte
	json   map[string]any
}

// str returns the JSON member name as a string.
func (r *response) str(name string) string {
	s, _ := r.json[name].(string)
	return s
}

// do sends a request with body (a string, or any value encoded as JSON)
// and the api's token, and decodes the JSON reply.
func (a *api) do(method, path string, body any) *response {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out := &response{code: res.StatusCode, header: res.Header}
	out.raw, _ = io.ReadAll(res.Body)
	if len(out.raw) > 0 {
		if err := json.Unmarshal(out.raw, &out.json); err != nil {
			a.t.Fatalf("%s %s: reply is not a JSON object: %v: %q", method, path, err, out.raw)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			a.t.Errorf("%s %s: Content-Type %q", method, path, ct)
		}
	}
	return out
}

// want fails the test unless r has status code.
func (r *response) want(t *testing.T, code int) *response {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d: %s", r.code, code, r.raw)
	}
	if code >= 400 && r.str("error") == "" {
		t.Errorf("error reply without an error message: %s", r.raw)
	}
	return r
}

func msgPath(topic, id string) string {
	return "/v1/topics/" + topic + "/messages/" + pathSegment(id)
}

func TestAPIAgainstRedis(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			client, err := delayq.New(delayq.Options{Addr: tg.Addr, Partitions: 4, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			a := newAPI(t, Options{
				MaxBodyBytes: 1024,
				Client: func(topic string) (*delayq.Client, error) {
					if topic == "unserved" {
						return nil, fmt.Errorf("%w: topic %q is not served here", delayq.ErrNotFound, topic)
					}
					return client, nil
				},
			})
			topic := "api-" + tg.Name // the direct backend is also behind the proxy
			t.Run("messages", func(t *testing.T) { testMessages(t, a, topic) })
			t.Run("bad requests", func(t *testing.T) { testBadRequests(t, a, topic) })
			t.Run("dead", func(t *testing.T) { testDead(t, a, client, topic+"-dead") })
			t.Run("running", func(t *testing.T) { testRunning(t, a, client, topic+"-running") })
			t.Run("topics", func(t *testing.T) { testTopics(t, a, tg.Addr, topic+"-topic") })
			t.Run("pause", func(t *testing.T) { testPause(t, a, topic+"-pause") })
			t.Run("limits", func(t *testing.T) { testLimits(t, a, client, tg.Addr, topic+"-limits") })
			t.Run("duplicates", func(t *testing.T) { testDuplicates(t, client, topic+"-dup") })
			t.Run("unique", func(t *testing.T) { testUniqueFor(t, a, client, topic+"-unique") })
		})
	}
}

func testMessages(t *testing.T, a *api, topic string) {
	base := "/v1/topics/" + topic + "/messages"

	// Enqueue with an id and a delay; the reply has the id and due time.
	before := time.Now()
	r := a.do("POST", base, map[string]any{"id": "order-1", "body": "hello", "delay": "1h", "max_attempts": 3}).want(t, 201)
	r0due := r.str("due") // what get shows, to the character
	due, err := time.Parse(time.RFC3339Nano, r0due)
	if err != nil || r.str("id") != "order-1" || !strings.HasSuffix(r.str("due"), "Z") {
		t.Fatalf("reply %s (%v)", r.raw, err)
	}
	if d := due.Sub(before); d < time.Hour || d > time.Hour+5*time.Second {
		t.Errorf("due %v is %v from now, want 1h", due, d)
	}
	if loc := r.header.Get("Location"); loc != base+"/order-1" {
		t.Errorf("Location %q", loc)
	}
	a.do("POST", base, map[string]any{"id": "order-1", "body": "again"}).want(t, 409)

	// Get returns it.
	r = a.do("GET", msgPath(topic, "order-1"), nil).want(t, 200)
	for k, v := range map[string]any{"topic": topic, "id": "order-1", "state": "scheduled", "body": "hello",
		"due": r0due, "attempts": 0.0, "max_attempts": 3.0, "last_error": ""} {
		if r.json[k] != v {
			t.Errorf("get: %s = %#v, want %#v", k, r.json[k], v)
		}
	}
	for _, k := range []string{"partition", "created", "updated"} {
		if _, ok := r.json[k]; !ok {
			t.Errorf("get: no %s in %s", k, r.raw)
		}
	}
	for _, k := range []string{"deadline", "died_at", "body_base64"} {
		if _, ok := r.json[k]; ok {
			t.Errorf("get: unexpected %s in %s", k, r.raw)
		}
	}

	// A generated id, delay_ms, binary body.
	r = a.do("POST", base, map[string]any{"body_base64": "gP8A", "delay_ms": 90000}).want(t, 201)
	gen := r.str("id")
	if len(gen) != 26 {
		t.Errorf("generated id %q", gen)
	}
	r = a.do("GET", msgPath(topic, gen), nil).want(t, 200)
	if r.str("body_base64") != "gP8A" || r.json["body"] != nil {
		t.Errorf("binary body came back as %s", r.raw)
	}

	// at, and an id of any UTF-8, slashes and escapes included.
	odd := "ü/ß ☃?#%2F&x=1"
	at := time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.FixedZone("X", 3600))
	r = a.do("POST", base, map[string]any{"id": odd, "at": at.Format(time.RFC3339Nano)}).want(t, 201)
	if r.str("id") != odd || r.str("due") != "2031-05-06T06:08:09.123Z" {
		t.Errorf("reply %s", r.raw)
	}
	if loc := r.header.Get("Location"); loc != msgPath(topic, odd) {
		t.Errorf("Location %q, want %q", loc, msgPath(topic, odd))
	}
	r = a.do("GET", msgPath(topic, odd), nil).want(t, 200)
	if r.str("id") != odd || r.str("body") != "" || r.json["body"] == nil {
		t.Errorf("get odd id: %s", r.raw)
	}

	// Ids "." and ".." survive path cleaning when escaped.
	r = a.do("POST", base, map[string]any{"id": ".."}).want(t, 201)
	if loc := r.header.Get("Location"); loc != base+"/%2E%2E" {
		t.Errorf("Location %q", loc)
	}
	if r := a.do("GET", base+"/%2E%2E", nil).want(t, 200); r.str("id") != ".." {
		t.Errorf("get ..: %s", r.raw)
	}
	a.do("DELETE", base+"/%2E%2E", nil).want(t, 204)

	// Reschedule: by at, by delay, by delay_ms.
	newAt := "2032-01-01T00:00:00.000000001Z"
	r = a.do("POST", msgPath(topic, odd)+"/reschedule", map[string]any{"at": newAt}).want(t, 200)
	if r.str("id") != odd || r.str("due") != "2032-01-01T00:00:00.001Z" {
		t.Errorf("reschedule reply %s", r.raw)
	}
	if got := a.do("GET", msgPath(topic, odd), nil).want(t, 200).str("due"); got != "2032-01-01T00:00:00.001Z" {
		t.Errorf("due after reschedule = %s", got)
	}
	r = a.do("POST", msgPath(topic, "order-1")+"/reschedule", `{"delay":"2h"}`).want(t, 200)
	if d, _ := time.Parse(time.RFC3339Nano, r.str("due")); time.Until(d) < 2*time.Hour-5*time.Second {
		t.Errorf("rescheduled due %s, want 2h from now", r.str("due"))
	}
	a.do("POST", msgPath(topic, "order-1")+"/reschedule", `{"delay_ms":60000}`).want(t, 200)
	a.do("POST", msgPath(topic, "nope")+"/reschedule", `{"delay":"1s"}`).want(t, 404)
	if r := a.do("POST", msgPath(topic, "order-1")+"/reschedule", `{"delay":"-1s"}`).want(t, 400); r.str("field") != "delay" {
		t.Errorf("field %q", r.str("field"))
	}
	if r := a.do("POST", msgPath(topic, "order-1")+"/reschedule", `{}`).want(t, 400); r.str("field") != "delay" {
		t.Errorf("field %q", r.str("field"))
	}

	// Stats.
	r = a.do("GET", "/v1/topics/"+topic+"/stats", nil).want(t, 200)
	var ts delayq.TopicStats
	if err := json.Unmarshal(r.raw, &ts); err != nil || ts.Topic != topic || ts.Scheduled != 3 || len(ts.Partitions) != 4 {
		t.Errorf("stats %s (%v)", r.raw, err)
	}

	// Delete.
	for _, id := range []string{"order-1", gen, odd} {
		r = a.do("DELETE", msgPath(topic, id), nil).want(t, 204)
		if len(r.raw) != 0 {
			t.Errorf("204 with a body: %q", r.raw)
		}
		a.do("GET", msgPath(topic, id), nil).want(t, 404)
		a.do("DELETE", msgPath(topic, id), nil).want(t, 404)
	}

	// A topic the Client func does not serve.
	a.do("GET", msgPath("unserved", "x"), nil).want(t, 404)
}

func testBadRequests(t *testing.T, a *api, topic string) {
	base := "/v1/topics/" + topic + "/messages"
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		field                    string
	}{
		{"malformed JSON", "POST", base, `{"body":`, 400, ""},
		{"unknown field", "POST", base, `{"body":"x","prio":1}`, 400, "prio"},
		{"delay and at", "POST", base, `{"delay":"1s","at":"2030-01-01T00:00:00Z"}`, 400, "at"},
		{"delay and delay_ms", "POST", base, `{"delay":"1s","delay_ms":1}`, 400, "delay_ms"},
		{"negative delay", "POST", base, `{"delay":"-3s"}`, 400, "delay"},
		{"bad id", "POST", base, `{"id":"a\u0000b"}`, 400, "id"},
		{"bad topic", "POST", "/v1/topics/" + url.PathEscape("no spaces") + "/messages", `{}`, 400, "topic"},
		{"bad topic on get", "GET", "/v1/topics/" + strings.Repeat("t", 101) + "/messages/x", "", 400, "topic"},
		{"bad id on get", "GET", msgPath(topic, strings.Repeat("x", 201)), "", 400, "id"},
		{"bad limit", "GET", "/v1/topics/" + topic + "/dead?limit=0", "", 400, "limit"},
		{"body over the cap", "POST", base, `{"body":"` + strings.Repeat("x", 1025) + `"}`, 413, "body"},
		{"request over the cap", "POST", base, `{"body":"` + strings.Repeat("x", 3*1024+64<<10) + `"}`, 413, ""},
		{"unknown route", "GET", "/v1/nothing", "", 404, ""},
		{"wrong method", "PUT", base, `{}`, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do(tc.method, tc.path, tc.body).want(t, tc.code)
			if r.str("field") != tc.field {
				t.Errorf("field %q, want %q: %s", r.str("field"), tc.field, r.raw)
			}
			if tc.code == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	// Exactly at the cap is fine.
	a.do("POST", base, `{"body":"`+strings.Repeat("x", 1024)+`"}`).want(t, 201)
}

// testRunning: a DELETE or reschedule that comes after a delivery
// started answers 409 with the state "running"; the DELETE deleted it.
func testRunning(t *testing.T, a *api, client *delayq.Client, topic string) {
	base := "/v1/topics/" + topic
	for _, id := range []string{"r1", "r2"} {
		a.do("POST", base+"/messages", map[string]any{"id": id, "body": "x"}).want(t, 201)
	}
	started := make(chan string, 2)
	release := make(chan struct{})
	k, err := client.NewConsumer(delayq.ConsumerOptions{Topic: topic, Lease: time.Second, PollInterval: 50 * time.Millisecond},
		func(ctx context.Context, d *delayq.Delivery) error {
			started <- d.ID
			<-release
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	defer close(release)
	for range 2 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the deliveries did not start")
		}
	}
	if r := a.do("DELETE", msgPath(topic, "r1"), nil).want(t, 409); r.str("state") != "running" {
		t.Errorf("DELETE of a running delivery: %s", r.raw)
	}
	a.do("GET", msgPath(topic, "r1"), nil).want(t, 404)
	if r := a.do("POST", msgPath(topic, "r2")+"/reschedule", map[string]any{"delay": "1h"}).want(t, 409); r.str("state") != "running" {
		t.Errorf("reschedule of a running delivery: %s", r.raw)
	}
}

func testDead(t *testing.T, a *api, client *delayq.Client, topic string) {
	base := "/v1/topics/" + topic
	for _, id := range []string{"d1", "d/2"} {
		a.do("POST", base+"/messages", map[string]any{"id": id, "body": "x", "max_attempts": 1}).want(t, 201)
	}
	// A consumer that fails everything kills both on their first attempt.
	k, err := client.NewConsumer(delayq.ConsumerOptions{Topic: topic, Lease: time.Second, PollInterval: 50 * time.Millisecond},
		func(ctx context.Context, d *delayq.Delivery) error { return errors.New("boom") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ts delayq.TopicStats
		json.Unmarshal(a.do("GET", base+"/stats", nil).want(t, 200).raw, &ts)
		if ts.Dead == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("messages not dead after 10s: %+v", ts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	r := a.do("GET", base+"/dead?limit=10", nil).want(t, 200)
	msgs, _ := r.json["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("dead list %s", r.raw)
	}
	for _, m := range msgs {
		m := m.(map[string]any)
		if m["state"] != "dead" || m["last_error"] != "boom" || m["died_at"] == nil || m["attempts"] != 1.0 {
			t.Errorf("dead message %v", m)
		}
	}
	if r := a.do("GET", base+"/dead?limit=1", nil).want(t, 200); len(r.json["messages"].([]any)) != 1 {
		t.Errorf("limit=1 gave %s", r.raw)
	}
	if r := a.do("GET", msgPath(topic, "d/2"), nil).want(t, 200); r.str("state") != "dead" || r.str("died_at") == "" {
		t.Errorf("get dead: %s", r.raw)
	}
	a.do("POST", msgPath(topic, "d/2")+"/reschedule", `{"delay":"1s"}`).want(t, 409)

	r = a.do("POST", base+"/dead/"+url.PathEscape("d/2")+"/requeue", nil).want(t, 200)
	if r.json["requeued"] != 1.0 {
		t.Errorf("requeue reply %s", r.raw)
	}
	if got := a.do("GET", msgPath(topic, "d/2"), nil).want(t, 200).str("state"); got != "scheduled" {
		t.Errorf("state after requeue %q", got)
	}
	a.do("POST", base+"/dead/"+url.PathEscape("d/2")+"/requeue", nil).want(t, 404)
	a.do("POST", base+"/dead/nope/requeue", nil).want(t, 404)

	r = a.do("DELETE", base+"/dead", nil).want(t, 200)
	if r.json["purged"] != 1.0 {
		t.Errorf("purge reply %s", r.raw)
	}
	if r := a.do("GET", base+"/dead", nil).want(t, 200); string(r.raw) != "{\"messages\":[]}\n" {
		t.Errorf("dead list after purge %q", r.raw)
	}
	a.do("GET", msgPath(topic, "d1"), nil).want(t, 404)
}

func TestAuth(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "x"}))
	a := newAPI(t, Options{
		Token:    "s3cret",
		Gatherer: reg,
		Client: func(topic string) (*delayq.Client, error) {
			return nil, errors.New("redis is down")
		},
	})
	noAuth := &api{t: t, srv: a.srv}
	for _, path := range []string{"/v1/topics/t/stats", "/v1/topics/t/messages/x", "/v1/nothing"} {
		r := noAuth.do("GET", path, nil).want(t, 401)
		if r.header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
	}
	wrong := &api{t: t, srv: a.srv, token: "s3cre"}
	wrong.do("GET", "/v1/topics/t/stats", nil).want(t, 401)
	wrong.token = "s3cret2"
	wrong.do("POST", "/v1/topics/t/messages", `{}`).want(t, 401)

	// With the token, the request goes through (and the Client error is a 500).
	if r := a.do("GET", "/v1/topics/t/stats", nil).want(t, 500); !strings.Contains(r.str("error"), "redis is down") {
		t.Errorf("500 reply %s", r.raw)
	}
	// Scheme is case-insensitive.
	req, _ := http.NewRequest("GET", a.srv.URL+"/v1/topics/t/stats", nil)
	req.Header.Set("Authorization", "bearer s3cret")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 500 {
		t.Errorf("lower-case bearer: %v %v", res.StatusCode, err)
	} else {
		res.Body.Close()
	}

	// Health, readiness and metrics need no token.
	noAuth.do("GET", "/healthz", nil).want(t, 200)
	noAuth.do("GET", "/readyz", nil).want(t, 200)
	res, err := http.Get(a.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "test_total 0") {
		t.Errorf("/metrics: %d %s", res.StatusCode, body)
	}
}

func TestReadyz(t *testing.T) {
	var ready error
	a := newAPI(t, Options{Ready: func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline")
		}
		return ready
	}})
	if r := a.do("GET", "/readyz", nil).want(t, 200); r.str("status") != "ready" {
		t.Errorf("readyz %s", r.raw)
	}
	ready = errors.New("no partitions owned yet")
	if r := a.do("GET", "/readyz", nil).want(t, 503); r.str("error") != "no partitions owned yet" {
		t.Errorf("readyz %s", r.raw)
	}
	if r := a.do("GET", "/healthz", nil).want(t, 200); r.str("status") != "ok" {
		t.Errorf("healthz %s", r.raw)
	}
	// No Gatherer: no /metrics.
	a.do("GET", "/metrics", nil).want(t, 404)
	// No Client func: a 500, not a panic.
	a.do("GET", "/v1/topics/t/stats", nil).want(t, 500)
}

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("x: %w", delayq.ErrInvalid), 400},
		{fmt.Errorf("x: %w", delayq.ErrDuplicate), 409},
		{fmt.Errorf("x: %w", delayq.ErrNotFound), 404},
		{fmt.Errorf("x: %w", delayq.ErrNotScheduled), 409},
		{fmt.Errorf("x: %w", delayq.ErrRunning), 409},
		{context.DeadlineExceeded, 504},
		{errors.New("EOF"), 500},
	} {
		if got := statusOf(tc.err); got != tc.code {
			t.Errorf("statusOf(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}

func ExampleNew() {
	client, err := delayq.New(delayq.Options{Addr: "127.0.0.1:6379"})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	h := New(Options{
		Client: func(topic string) (*delayq.Client, error) { return client, nil },
		Token:  "change-me",
	})
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h, ReadHeaderTimeout: 5 * time.Second}
	_ = srv // srv.ListenAndServe() in a real program
}
