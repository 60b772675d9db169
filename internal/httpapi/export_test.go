package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// TestExport downloads a topic's JSON lines: token required, a file
// named after the topic, one line per message, --state's filter, and
// JSON errors for a bad state and a topic never used.
func TestExport(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 2})
	client, err := delayq.New(delayq.Options{Addr: env.Proxy, Partitions: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	var msgs []delayq.Message
	for i := range 30 {
		msgs = append(msgs, delayq.Message{Topic: "exp", Body: []byte{byte(i), 0xff}, Delay: time.Hour})
	}
	if _, err := client.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, Options{Token: "t0k", Client: func(string) (*delayq.Client, error) { return client, nil }})
	get := func(path, token string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", a.srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := a.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}
	if res, _ := get("/v1/topics/exp/export", ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", res.StatusCode)
	}
	res, body := get("/v1/topics/exp/export", "t0k")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" ||
		res.Header.Get("Content-Disposition") != `attachment; filename="exp.jsonl"` {
		t.Fatalf("export: %d %v", res.StatusCode, res.Header)
	}
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if len(lines) != 30 {
		t.Fatalf("%d lines, want 30:\n%s", len(lines), body)
	}
	var m delayq.ExportedMessage
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil || m.State != delayq.StateScheduled || len(m.Body) != 2 {
		t.Fatalf("line 1 %q: %+v, %v", lines[0], m, err)
	}
	if res, body := get("/v1/topics/exp/export?state=dead", "t0k"); res.StatusCode != 200 || body != "" {
		t.Fatalf("dead only: %d %q", res.StatusCode, body)
	}
	if res, body := get("/v1/topics/exp/export?state=asleep", "t0k"); res.StatusCode != 400 || !strings.Contains(body, `"field":"state"`) {
		t.Fatalf("bad state: %d %s", res.StatusCode, body)
	}
	if res, body := get("/v1/topics/never/export", "t0k"); res.StatusCode != 404 || !strings.Contains(body, `topic \"never\" does not exist`) {
		t.Fatalf("topic never used: %d %s", res.StatusCode, body)
	}
}
