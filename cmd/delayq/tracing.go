package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"log/slog"

	"github.com/delayq/delayq/internal/config"
	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracingShutdown bounds the flush of the spans still buffered when the
// worker stops.
const tracingShutdown = 5 * time.Second

// defaultTracesPath is the path of an OTLP/HTTP collector's traces, for
// an endpoint given without one.
const defaultTracesPath = "/v1/traces"

// newTracerProvider returns the provider of the worker's spans that
// [tracing] describes, and the function that flushes and stops it. With
// no endpoint it is a no-op provider, which records and exports nothing
// (deliveries still hand their messages' trace context to the handlers);
// otherwise an SDK provider that samples parent-based, the traces the
// worker starts at sample_ratio, and exports in batches over OTLP/HTTP,
// named service_name and, as an instance, the worker's id. The worker's
// provider is its own: the process's global one is left alone, but
// OpenTelemetry's errors (a failed export) and its own log go to log,
// as every other line of the worker, not as plain text to the standard
// logger: otherwise they break [log] format = "json".
func newTracerProvider(c config.Tracing, workerID string, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if c.Endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	log = log.With("component", "tracing")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported (the deliveries go on)", "endpoint", c.Endpoint, "err", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("[tracing] endpoint %q: %w", c.Endpoint, err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = defaultTracesPath
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
	if len(c.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
	}
	// New does not connect: a collector that is down costs dropped
	// spans, logged by OpenTelemetry, never a delivery.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("[tracing] endpoint %q: %w", c.Endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL,
			semconv.ServiceName(c.ServiceName), semconv.ServiceInstanceID(workerID))),
	)
	return tp, tp.Shutdown, nil
}

// withTraceContext gives each request of the API the W3C trace context
// its headers carry (traceparent), so that a message a producer enqueues
// through the API under a span belongs to the producer's trace, as one
// it enqueued with the library would.
func withTraceContext(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" {
			r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}
