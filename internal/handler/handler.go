package handler

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
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
