package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP collector for tests: it keeps the spans it
// is sent, by name, with their trace ids, and the paths and resources
// of the exports.
type collector struct {
	mu       sync.Mutex
	paths    []string
	services []string
	traces   map[string][]string // span name -> trace ids, in hex
}

func newCollector(t *testing.T) (*collector, *httptest.Server) {
	c := &collector{traces: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("collector: %s %s: %v", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.paths = append(c.paths, r.URL.Path)
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					c.services = append(c.services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.traces[s.Name] = append(c.traces[s.Name], hex.EncodeToString(s.TraceId))
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return c, srv
}

// TestWorkerTracing: with [tracing] endpoint set, a message a producer
// enqueues through the API under a span (its traceparent header) is
// delivered to the webhook with a traceparent of the same trace, and the
// worker exports the send, the delivery and the ack of that trace over
// OTLP/HTTP, to /v1/traces, under its service_name.
func TestWorkerTracing(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	col, collectorSrv := newCollector(t)
	var mu sync.Mutex
	var hooked []string // traceparent headers the webhook got
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hooked = append(hooked, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer hook.Close()
	p := writeWorkerConfig(t, fmt.Sprintf(`
[redis]
addr = %q
[worker]
lease = "1s"
poll_interval = "100ms"
shutdown_timeout = "2s"
[http]
listen = "127.0.0.1:0"
[log]
format = "json"
[tracing]
endpoint = %q
service_name = "test-worker"
[[topic]]
name = "jobs"
[topic.handler]
type = "http"
url = %q
`, env.Backends[0], collectorSrv.URL, hook.URL))
	rw := startWorker(t, p)
	if got := workerLogValue(rw.logs.String(), "worker started", "tracing"); got != collectorSrv.URL {
		t.Errorf("start log: tracing %q, want %q", got, collectorSrv.URL)
	}

	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("POST", rw.base+"/v1/topics/jobs/messages", strings.NewReader(`{"id":"t-1","body":"x"}`))
	req.Header.Set("traceparent", "00-"+tid+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("enqueue: %d", resp.StatusCode)
	}
	testenv.WaitFor(t, 10*time.Second, "the delivery acked", func() bool {
		return rw.w.byName["jobs"].consumer.Stats().Acked == 1
	})
	mu.Lock()
	if len(hooked) != 1 || !strings.HasPrefix(hooked[0], "00-"+tid+"-") || strings.Contains(hooked[0], "00f067aa0ba902b7") {
		t.Errorf("the webhook got traceparent %q, want one of trace %s, of the delivery's span", hooked, tid)
	}
	mu.Unlock()

	// The spans are exported in batches: stopping flushes them.
	stopRun(t, rw.cancel, rw.done, 10*time.Second)
	rw.w.close()
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, name := range []string{"delayq.send jobs", "delayq.deliver jobs", "delayq.ack jobs"} {
		if ids := col.traces[name]; len(ids) != 1 || ids[0] != tid {
			t.Errorf("exported %s spans of traces %v, want one of %s", name, ids, tid)
		}
	}
	if len(col.paths) == 0 || col.paths[0] != "/v1/traces" || len(col.services) == 0 || col.services[0] != "test-worker" {
		t.Errorf("exports to %v of services %v, want /v1/traces of test-worker", col.paths, col.services)
	}
}

// TestWorkerTracingExportErrors: spans the collector refuses are logged
// by the worker's logger, as JSON with [log] format = "json" and the
// tracing component, and nothing goes to the standard logger as plain
// text.
func TestWorkerTracingExportErrors(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest) // not retried: the export fails at once
	}))
	defer refused.Close()
	var std testenv.Buffer
	log.SetOutput(&std)
	defer log.SetOutput(os.Stderr)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export the spans at once
	p := writeWorkerConfig(t, fmt.Sprintf(`
[redis]
addr = %q
[worker]
lease = "1s"
poll_interval = "100ms"
shutdown_timeout = "2s"
[http]
listen = "127.0.0.1:0"
[log]
format = "json"
[tracing]
endpoint = %q
[[topic]]
name = "jobs"
[topic.handler]
type = "exec"
command = ["true"]
`, env.Backends[0], refused.URL))
	rw := startWorker(t, p)
	resp, err := http.Post(rw.base+"/v1/topics/jobs/messages", "application/json", strings.NewReader(`{"id":"t-1","body":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const msg = "tracing: spans not exported (the deliveries go on)"
	testenv.WaitFor(t, 10*time.Second, "the failed export logged", func() bool {
		return workerLogValue(rw.logs.String(), msg, "component") == "tracing"
	})
	for _, line := range strings.Split(strings.TrimSpace(rw.logs.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a log line is not JSON: %q", line)
		}
	}
	if s := std.String(); s != "" {
		t.Errorf("the standard logger got %q, want nothing", s)
	}
}
