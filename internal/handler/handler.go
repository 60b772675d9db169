package handler

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Request headers of the http handler, and the variables the exec
// handler adds to the command's environment.
const (
	HeaderTopic     = "X-Delayq-Topic"
	HeaderID        = "X-Delayq-Id"
	HeaderAttempt   = "X-Delayq-Attempt"
	HeaderDue       = "X-Delayq-Due"
	HeaderSignature = "X-Delayq-Signature"

	EnvTopic   = "DELAYQ_TOPIC"
	EnvID      = "DELAYQ_ID"
	EnvAttempt = "DELAYQ_ATTEMPT"
	EnvDue     = "DELAYQ_DUE"
)

// The trace context of the delivery's span (see delayq.Handler), when
// the delivery has one: the http handler sends the W3C Trace Context
// headers (traceparent, and tracestate when not empty); the exec handler
// sets EnvTraceparent and EnvTracestate, the names OpenTelemetry gives
// them as environment variables.
const (
	HeaderTraceparent = "traceparent"
	EnvTraceparent    = "TRACEPARENT"
	EnvTracestate     = "TRACESTATE"
)

// traceEnv returns the environment variables of the trace context of
// the span in ctx: none when it has none.
func traceEnv(ctx context.Context) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	env := []string{EnvTraceparent + "=" + c.Get("traceparent")}
	if ts := c.Get("tracestate"); ts != "" {
		env = append(env, EnvTracestate+"="+ts)
	}
	return env
}

// Options are what the handlers New returns share.
type Options struct {
	// Client sends the http handlers' requests. Default NewHTTPClient().
	Client *http.Client
	// Logger receives debug logs (such as an exec command's stdout).
	// Default slog.Default().
	Logger *slog.Logger
}

// New returns the handler described by h, a topic's handler config that
// passed config validation. It fails when an exec handler's program
// cannot be found.
func New(h config.Handler, o Options) (delayq.Handler, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch h.Type {
	case config.HandlerHTTP:
		if o.Client == nil {
			o.Client = NewHTTPClient()
		}
		return HTTP(o.Client, h.URL, h.Secret, h.Headers)
	case config.HandlerExec:
		return Exec(h.Command, o.Logger)
	}
	return nil, fmt.Errorf("unknown handler type %q", h.Type)
}

// formatDue formats a due time as the handlers pass it on.
func formatDue(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// formatAttempt formats the 1-based attempt number.
func formatAttempt(n int) string { return strconv.Itoa(n) }
