package handler

import (
	"context"
	"errors"
	"fmt"
	"github.com/delayq/delayq/internal/testenv"
	"go.uber.org/goleak"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestMain fails the run when goroutines outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(testenv.SpawnerFunc))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// delivery returns a delivery of body.
func delivery(id string, attempt int, body string) *delayq.Delivery {
	return &delayq.Delivery{
		Topic: "orders", ID: id, Partition: 3, Token: 7, Attempt: attempt,
		Due:  time.Date(2030, 1, 2, 3, 4, 5, 600000000, time.FixedZone("X", 3600)),
		Body: []byte(body),
	}
}

func TestSignKnownVector(t *testing.T) {
	// RFC 4231, test case 2.
	got := Sign("Jefe", []byte("what do ya want for nothing?"))
	want := "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

// recorded is one request a test server saw.
type recorded struct {
	method, path string
	header       http.Header
	body         string
}

// recorder is a test server that records requests and answers with
// status and body.
func recorder(t *testing.T, status int, body string) (*httptest.Server, func() []recorded) {
	var mu sync.Mutex
	var reqs []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, recorded{r.Method, r.URL.Path, r.Header.Clone(), string(b)})
		mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), reqs...)
	}
}

func TestHTTPDelivers(t *testing.T) {
	srv, reqs := recorder(t, http.StatusNoContent, "")
	h, err := New(config.Handler{Type: config.HandlerHTTP, URL: srv.URL + "/hooks/orders", Secret: "Jefe",
		Headers: map[string]string{"Authorization": "Bearer abc", "x-extra": "1"}}, Options{Client: srv.Client(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), delivery("id-1", 2, "what do ya want for nothing?")); err != nil {
		t.Fatalf("204: %v", err)
	}
	rs := reqs()
	if len(rs) != 1 {
		t.Fatalf("%d requests", len(rs))
	}
	r := rs[0]
	if r.method != "POST" || r.path != "/hooks/orders" || r.body != "what do ya want for nothing?" {
		t.Errorf("request: %s %s %q", r.method, r.path, r.body)
	}
	for k, want := range map[string]string{
		"X-Delayq-Topic":     "orders",
		"X-Delayq-Id":        "id-1",
		"X-Delayq-Attempt":   "2",
		"X-Delayq-Due":       "2030-01-02T02:04:05.6Z",
		"X-Delayq-Signature": "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
		"Content-Type":       "application/octet-stream",
		"Authorization":      "Bearer abc",
		"X-Extra":            "1",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

func TestHTTPHeaders(t *testing.T) {
	srv, reqs := recorder(t, http.StatusOK, "fine")
	h, err := HTTP(srv.Client(), srv.URL, "", map[string]string{"Content-Type": "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), delivery("j", 1, `{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	r := reqs()[0]
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q, want the configured application/json", got)
	}
	if _, ok := r.header["X-Delayq-Signature"]; ok {
		t.Error("signed without a secret")
	}
	if r.header.Get("X-Delayq-Attempt") != "1" {
		t.Errorf("attempt %q", r.header.Get("X-Delayq-Attempt"))
	}
}

// testTraceparent is the trace context of the deliveries of the tests
// that run in a trace.
const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// inTrace returns ctx with the span context of testTraceparent, as a
// delivery's span puts it in its handler's ctx.
func inTrace(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": testTraceparent})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatalf("%s: no span context", testTraceparent)
	}
	return ctx
}

// TestHTTPTraceparent: the POST of a delivery in a trace carries its
// context in the traceparent header, whatever the configured headers
// say; one outside a trace has none but what is configured.
func TestHTTPTraceparent(t *testing.T) {
	srv, reqs := recorder(t, http.StatusOK, "")
	h, err := HTTP(srv.Client(), srv.URL, "", map[string]string{"X-Extra": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h(inTrace(t, context.Background()), delivery("t", 1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), delivery("u", 1, "x")); err != nil {
		t.Fatal(err)
	}
	rs := reqs()
	if got := rs[0].header.Get(HeaderTraceparent); got != testTraceparent {
		t.Errorf("traceparent %q, want %q", got, testTraceparent)
	}
	if got, ok := rs[1].header[http.CanonicalHeaderKey(HeaderTraceparent)]; ok {
		t.Errorf("a delivery outside a trace sent traceparent %q", got)
	}
}

func TestHTTPStatus(t *testing.T) {
	long := strings.Repeat("e", 150) + strings.Repeat("f", 300)
	for _, tc := range []struct {
		status  int
		body    string
		wantErr string // "" = ack
	}{
		{200, "ok", ""},
		{201, "", ""},
		{299, "", ""},
		{500, "boom\n", "http 500: boom"},
		{503, long, "http 503: " + long[:200]},
		{404, "", "http 404"},
		{302, "", "http 302"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			var hits int
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				if tc.status == 302 {
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
					return
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			h, _ := HTTP(NewHTTPClient(), srv.URL, "", nil)
			err := h(context.Background(), delivery("x", 1, "b"))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("want ack, got %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("got %v, want %q", err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if hits != 1 {
				t.Errorf("%d requests, want 1 (redirects are not followed)", hits)
			}
		})
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	h, _ := HTTP(NewHTTPClient(), srv.URL, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h(ctx, delivery("slow", 1, "b"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned after %v, want about 200ms", took)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	h, _ := HTTP(NewHTTPClient(), "http://"+addr+"/x", "", nil)
	err = h(context.Background(), delivery("x", 1, "b"))
	if err == nil || !strings.HasPrefix(err.Error(), "post: ") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("got %v, want a connection refused error", err)
	}
}

func TestHTTPBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "://x"} {
		if _, err := HTTP(NewHTTPClient(), u, "", nil); err == nil {
			t.Errorf("HTTP(%q) accepted", u)
		}
	}
	if _, err := New(config.Handler{Type: "grpc"}, Options{}); err == nil {
		t.Error("New accepted an unknown type")
	}
}
