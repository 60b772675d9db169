package ui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

// Defaults for Options.
const (
	// DefaultPoolSize is the connection pool a client of its own needs
	// for the dashboard alone (delayq ui's).
	DefaultPoolSize   = 16
	DefaultRefresh    = 3 * time.Second
	DefaultSessionTTL = 12 * time.Hour
	// DefaultRequestTimeout bounds the Redis work of one page or action.
	DefaultRequestTimeout = 10 * time.Second
)

// Bounds of what one page reads.
const (
	maxTopics      = 200 // topics the overview shows
	maxMembers     = 200 // members the topic page shows
	statsWorkers   = 8   // topics whose stats the overview reads at once
	defaultPage    = 50  // scheduled messages per page
	maxPage        = 200
	defaultDead    = 100 // dead messages listed
	maxDead        = 1000
	chartMinutes   = 60
	maxBodyDisplay = 64 << 10 // bytes of a body shown as text or hex
	maxFormBytes   = 64 << 10 // bytes of a POSTed form
)

// Options configures New. The zero value of each field means its default.
type Options struct {
	// Client is the client of the namespace the dashboard shows, and is
	// required. The dashboard reads with its Inspector and acts with its
	// Admin and its message methods; it does not close it: its owner
	// does, once the dashboard is closed.
	Client *delayq.Client
	// Token, when set, is what a browser signs in with. Default "": no
	// sign-in (CSRF tokens still guard every action).
	Token string
	// ReadOnly hides every action and refuses every POST but sign-in and
	// sign-out with 403. Default false.
	ReadOnly bool
	// Lease is the consumers' partition lease, from which a member's
	// last heartbeat is estimated (its heartbeat expires a lease after
	// it). Default delayq.DefaultLease (10s).
	Lease time.Duration
	// Counters returns this process's delivery counters of a topic, and
	// false for a topic it does not consume. Default nil: the dashboard
	// runs outside a worker, and the topic page says that rates are
	// served by a worker only.
	Counters func(topic string) (Counters, bool)
	// Proxies returns the health of each Redis address of the worker
	// serving the dashboard, shown on the overview. Optional.
	Proxies func() []delayq.ProxyHealth
	// Lateness holds the lateness of this process's deliveries, for the
	// p99 of the topic page. Default nil: none shown.
	Lateness *Lateness
	// Refresh is the period of the live refresh of the overview and
	// topic pages. Default DefaultRefresh (3s).
	Refresh time.Duration
	// SessionTTL is how long a sign-in lasts. Default DefaultSessionTTL (12h).
	SessionTTL time.Duration
	// Logger receives errors (Error) and sign-ins (Info).
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the pages: the times they show, and what they
	// count from (the client's reads go by its own delayq.Options.Now).
	// Default time.Now.
	Now func() time.Time
}

// Server is the dashboard, an http.Handler of the paths under /ui/. It is
// safe for concurrent use.
type Server struct {
	o     Options
	log   *slog.Logger
	c     *delayq.Client
	ins   *delayq.Inspector
	auth  *auth
	pages *pages
	rates *rates
	mux   *http.ServeMux

	closed atomic.Bool // see Close
}

// New returns a dashboard of the namespace of o.Client. It validates o
// but does not connect: the first request does.
func New(o Options) (*Server, error) {
	if o.Client == nil {
		return nil, errors.New("ui: Options.Client is nil")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Lease, delayq.DefaultLease)
	def(&o.Refresh, DefaultRefresh)
	def(&o.SessionTTL, DefaultSessionTTL)
	if o.Lease < 0 || o.Refresh < 0 || o.SessionTTL < 0 {
		return nil, errors.New("ui: negative duration in Options")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	a, err := newAuth(o.Token, o.SessionTTL, o.Now)
	if err != nil {
		return nil, err
	}
	s := &Server{
		o: o, log: o.Logger.With("component", "ui"), c: o.Client, ins: o.Client.Inspector(), auth: a, pages: pg,
		rates: newRates(),
	}
	s.routes()
	return s, nil
}

// routes registers every page and action.
func (s *Server) routes() {
	m := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(sub)))
	m.HandleFunc("GET /ui/login", s.loginPage)
	m.HandleFunc("POST /ui/login", s.login)
	m.HandleFunc("POST /ui/logout", s.logout)
	m.HandleFunc("GET /ui/{$}", s.overview)
	m.HandleFunc("GET /ui/lookup", s.lookup)
	m.HandleFunc("GET /ui/topics/{topic}", s.withTopic(s.topicPage))
	m.HandleFunc("GET /ui/topics/{topic}/message", s.withTopic(s.messagePage))
	m.HandleFunc("GET /ui/topics/{topic}/message/body", s.withTopic(s.messageBody))
	m.HandleFunc("GET /ui/topics/{topic}/scheduled", s.withTopic(s.scheduledPage))
	m.HandleFunc("GET /ui/topics/{topic}/dead", s.withTopic(s.deadPage))
	m.HandleFunc("GET /ui/topics/{topic}/export", s.exportTopic)
	m.HandleFunc("POST /ui/topics/{topic}/message/{action}", s.withTopic(s.messageAction))
	m.HandleFunc("POST /ui/topics/{topic}/dead/{action}", s.withTopic(s.deadAction))
	m.HandleFunc("POST /ui/topics/{topic}/delete", s.withTopic(s.topicDelete))
	m.HandleFunc("POST /ui/topics/{topic}/pause", s.withTopic(s.topicPause))
	m.HandleFunc("POST /ui/topics/{topic}/resume", s.withTopic(s.topicResume))
	m.HandleFunc("POST /ui/topics/{topic}/limits", s.withTopic(s.topicLimits))
	m.HandleFunc("POST /ui/topics/{topic}/limits/clear", s.withTopic(s.topicLimitsClear))
	s.routeSchedules(m)
	s.mux = m
}

// publicPaths need no session.
var publicPaths = map[string]bool{"/ui/login": true}

// ServeHTTP sets the security headers, checks the session (and, for a
// POST, read-only mode and the CSRF token), then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" would make POSTs carry "Origin: null"
	// The stylesheet and script need no session (the sign-in page uses
	// them); only clean paths, so that no other route slips through.
	if p := r.URL.Path; strings.HasPrefix(p, "/ui/static/") && path.Clean(p) == p && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.Set("Cache-Control", "public, max-age=300")
		s.mux.ServeHTTP(w, r)
		return
	}
	h.Set("Cache-Control", "no-store")
	if !publicPaths[r.URL.Path] && !s.auth.signedIn(r) {
		if r.Method == http.MethodGet && !isFragment(r) {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes) // forms hold a few short fields
	}
	if r.Method == http.MethodPost && r.URL.Path != "/ui/login" {
		if s.o.ReadOnly && r.URL.Path != "/ui/logout" {
			s.errorPage(w, r, http.StatusForbidden, "This dashboard is read-only: actions are disabled.")
			return
		}
		if msg := s.auth.checkPost(r); msg != "" {
			s.errorPage(w, r, http.StatusForbidden, msg)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Close stops the dashboard: the pages and actions served after it fail
// with delayq.ErrClosed. It does not close Options.Client, which its
// owner closes. Safe to call more than once.
func (s *Server) Close() error {
	s.closed.Store(true)
	return nil
}

// errNoTopic says a topic's name is not valid (a topic whose name is
// valid but which does not exist is delayq.ErrNoTopic).
var errNoTopic = errors.New("no such topic")

// topic validates the {topic} of r and returns it with the number of
// partitions that may hold its messages (those of both counts while a
// change runs), read from its metadata; an unknown topic is an error
// wrapping delayq.ErrNoTopic.
func (s *Server) topic(ctx context.Context, r *http.Request) (string, int, error) {
	t := r.PathValue("topic")
	if err := partition.ValidateTopic(t); err != nil {
		return t, 0, fmt.Errorf("%w: %q: %v", errNoTopic, t, err)
	}
	if s.closed.Load() {
		return t, 0, delayq.ErrClosed
	}
	info, err := s.ins.Topic(ctx, t)
	if err != nil {
		return t, 0, err
	}
	return t, span(*info), nil
}

// span is the number of partitions that may hold the messages of the
// topic of t: both counts' while a change runs.
func span(t delayq.TopicInfo) int { return max(t.Partitions, t.Next) }

// isFragment says r asks for the live part of a page only.
func isFragment(r *http.Request) bool { return r.Header.Get("X-Delayq-Fragment") == "live" }

// reqCtx bounds the Redis work of one request.
func reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), DefaultRequestTimeout)
}

// topicReq is what a handler of one topic's page or action gets: the
// request's context, bounded by DefaultRequestTimeout, the topic named in
// the path and its partition count.
type topicReq struct {
	ctx   context.Context
	topic string
	n     int
}

// withTopic reads the topic of the request's path for h, answering the
// error page when there is none by that name.
func (s *Server) withTopic(h func(http.ResponseWriter, *http.Request, topicReq)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := reqCtx(r)
		defer cancel()
		topic, n, err := s.topic(ctx, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, topicReq{ctx, topic, n})
	}
}
