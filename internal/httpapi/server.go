package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one call of Options.Ready.
const readyTimeout = 5 * time.Second

// Options configures the handler returned by New. The zero value of each
// field means its default.
type Options struct {
	// Client returns the client for a topic (the topic name is valid
	// when it is called). An error wrapping delayq.ErrNotFound means the
	// topic is not served here (404); other errors are mapped like those
	// of the library. Required: without it every topic route answers 500.
	Client func(topic string) (*delayq.Client, error)
	// Duplicates returns what an enqueue to topic does with an id that
	// exists when its body sets neither on_duplicate nor max_wait: the
	// worker's [[topic]] on_duplicate and max_wait. It must be safe for
	// concurrent use. Default nil: reject (a 409), for every topic.
	Duplicates func(topic string) Duplicates
	// Token, when set, is the bearer token every /v1 request must carry
	// ("Authorization: Bearer <token>"). Default "": no authentication.
	// /healthz, /readyz and /metrics never need it.
	Token string
	// MaxBodyBytes caps the decoded body of an enqueued message (413
	// beyond). Default delayq.DefaultMaxBodyBytes.
	MaxBodyBytes int
	// Ready reports readiness for /readyz: 200 when it returns nil, 503
	// with its error otherwise. It is called with a 5s timeout.
	// Default: always ready.
	Ready func(ctx context.Context) error
	// Proxies, when set, reports the health of each Redis address the
	// worker was given; /readyz lists them. Optional.
	Proxies func() []delayq.ProxyHealth
	// Gatherer is served at /metrics. Default nil: no /metrics route.
	Gatherer prometheus.Gatherer
	// Logger receives the errors of 5xx responses (Error) and of requests
	// the client abandoned (Debug).
	// Default slog.Default().
	Logger *slog.Logger
}

// server is the handler returned by New.
type server struct {
	o       Options
	log     *slog.Logger
	maxBody int
	token   [sha256.Size]byte // sha256 of Options.Token, compared in constant time
	mux     *http.ServeMux
}

// publicPaths need no token.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// New returns the HTTP API for producers (see the package documentation
// for its routes). The handler is safe for concurrent use.
func New(o Options) http.Handler {
	s := &server{o: o, log: o.Logger, maxBody: o.MaxBodyBytes, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "httpapi")
	if s.maxBody <= 0 {
		s.maxBody = delayq.DefaultMaxBodyBytes
	}
	s.token = sha256.Sum256([]byte(o.Token))

	m := s.mux
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /readyz", s.readyz)
	if o.Gatherer != nil {
		m.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
			ErrorLog:      promLogger{s.log},
			ErrorHandling: promhttp.ContinueOnError,
		}))
	}
	m.HandleFunc("POST /v1/topics/{topic}/messages", s.enqueue)
	m.HandleFunc("GET /v1/topics/{topic}/messages/{id}", s.get)
	m.HandleFunc("DELETE /v1/topics/{topic}/messages/{id}", s.delete)
	m.HandleFunc("POST /v1/topics/{topic}/messages/{id}/reschedule", s.reschedule)
	m.HandleFunc("GET /v1/topics/{topic}/stats", s.stats)
	m.HandleFunc("GET /v1/topics/{topic}/dead", s.listDead)
	m.HandleFunc("POST /v1/topics/{topic}/dead/{id}/requeue", s.requeueDead)
	m.HandleFunc("DELETE /v1/topics/{topic}/dead", s.purgeDead)
	m.HandleFunc("GET /v1/topics/{topic}/export", s.export)
	m.HandleFunc("DELETE /v1/topics/{topic}", s.deleteTopic)
	m.HandleFunc("POST /v1/topics/{topic}/pause", s.pauseTopic)
	m.HandleFunc("POST /v1/topics/{topic}/resume", s.pauseTopic)
	s.routeLimits(m)
	s.routeUniqueFor(m)
	s.routeSchedules(m)
	return s
}

// ServeHTTP checks the bearer token, then routes. Unknown routes and
// methods get JSON 404 and 405 errors.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.o.Token != "" && !publicPaths[r.URL.Path] {
		if msg := s.checkToken(r); msg != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="delayq"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: msg})
			return
		}
	}
	if h, pattern := s.mux.Handler(r); pattern == "" {
		h.ServeHTTP(&jsonErrorWriter{ResponseWriter: w}, r) // 404 or 405
		return
	}
	s.mux.ServeHTTP(w, r)
}

// checkToken returns "" when r carries the bearer token, else why not.
func (s *server) checkToken(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return "missing bearer token"
	}
	// Hash both sides so the comparison takes the same time whatever
	// the lengths.
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], s.token[:]) != 1 {
		return "wrong bearer token"
	}
	return ""
}

// jsonErrorWriter turns the plain-text error the mux writes for an
// unknown route or method into a JSON error with the same status.
type jsonErrorWriter struct {
	http.ResponseWriter
	wrote bool
}

// WriteHeader writes the status and a JSON body naming it.
func (w *jsonErrorWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	w.Header().Del("Content-Length")
	writeJSON(w.ResponseWriter, code, errorBody{Error: strings.ToLower(http.StatusText(code))})
}

// Write drops the mux's plain-text body.
func (w *jsonErrorWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return len(p), nil
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"` // the request field at fault, if one is
	// State is the state of the message a 409 concerns: "running" (a
	// delivery of it started: a DELETE deleted it all the same, see
	// delayq.ErrRunning) or "dead" (a reschedule).
	State string `json:"state,omitempty"`
}

// writeJSON writes v as the JSON body of a response with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // the client may be gone: nothing to do about it
}

// fail writes the error response of err: an *apiError as it is, library
// errors by their sentinel, others as 500 (logged).
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeJSON(w, ae.status, errorBody{Error: ae.msg, Field: ae.field})
		return
	}
	code := statusOf(err)
	switch {
	case code >= 500 && r.Context().Err() != nil:
		s.log.Debug("request abandoned by the client", "method", r.Method, "path", r.URL.Path, "err", err)
	case code >= 500:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	body := errorBody{Error: err.Error()}
	switch {
	case errors.Is(err, delayq.ErrRunning):
		body.State = "running"
	case errors.Is(err, delayq.ErrNotScheduled):
		body.State = "dead"
	}
	writeJSON(w, code, body)
}

// statusOf maps an error of the library to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, delayq.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, delayq.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, delayq.ErrDuplicate),
		errors.Is(err, delayq.ErrNotScheduled), errors.Is(err, delayq.ErrRunning),
		errors.Is(err, delayq.ErrTopicInUse), errors.Is(err, delayq.ErrExists):
		return http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// healthz answers 200 while the process serves HTTP.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when Options.Ready does, 503 otherwise.
// readyBody is the answer of /readyz: "ready", or the error, and the
// health of each Redis address.
type readyBody struct {
	Status  string               `json:"status,omitempty"`
	Error   string               `json:"error,omitempty"`
	Proxies []delayq.ProxyHealth `json:"proxies,omitempty"`
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	var body readyBody
	code := http.StatusOK
	if s.o.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := s.o.Ready(ctx)
		cancel()
		if err != nil {
			code, body.Error = http.StatusServiceUnavailable, err.Error()
		}
	}
	if code == http.StatusOK {
		body.Status = "ready"
	}
	if s.o.Proxies != nil {
		body.Proxies = s.o.Proxies()
	}
	writeJSON(w, code, body)
}

// promLogger passes promhttp's errors to slog.
type promLogger struct{ log *slog.Logger }

// Println logs its arguments at Error.
func (l promLogger) Println(v ...any) {
	l.log.Error("serving /metrics: " + strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}
