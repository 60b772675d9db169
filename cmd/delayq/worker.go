package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/handler"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/ui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
)

// Timeouts of the worker's HTTP server and of its shutdown.
const (
	workerReadHeaderTimeout = 10 * time.Second
	workerReadTimeout       = time.Minute
	workerWriteTimeout      = time.Minute
	workerIdleTimeout       = 2 * time.Minute
	// workerHTTPShutdown bounds the wait for in-flight API requests on
	// shutdown (and never exceeds [worker] shutdown_timeout).
	workerHTTPShutdown = 5 * time.Second
	// workerStopGrace is how long, beyond shutdown_timeout, the worker
	// waits for its consumers to hand their partitions back before it
	// gives up and exits with an error.
	workerStopGrace = 10 * time.Second
)

// workerAbout is the description "delayq worker -h" prints.
const workerAbout = `Runs the worker daemon: consumes every [[topic]] of the TOML config and
delivers its messages to the topic's handler (an HTTP webhook or a command),
and serves the HTTP API for producers, /metrics, /healthz, /readyz and the
web dashboard (/ui/, signed in with [http] token) on [http] listen. The
config is the defaults, then the file, then the flags below. Logs go to
stderr. SIGINT or SIGTERM stop it gracefully: running deliveries get
[worker] shutdown_timeout to finish, and it exits 0.
See config.toml at the top of the repository for every key.`

// runWorker implements "delayq worker".
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := workerConfig(args, stdout)
	if err != nil {
		return err
	}
	w, err := newWorker(cfg, newWorkerLogger(stderr, cfg.Log))
	if err != nil {
		return err
	}
	defer w.close()
	return w.run(ctx)
}

// workerConfig parses the flags and returns the config they select, or
// errHelp after printing the usage for -h.
func workerConfig(args []string, stdout io.Writer) (*config.Config, error) {
	// The worker logs where its config says, not through cmd.
	cmd := newBareCommand("worker", "[--config FILE] [flags]", workerAbout, stdout, io.Discard)
	fs := cmd.fs
	path := fs.String("config", "", "TOML config `file` (default: no file, only defaults and flags)")
	addr := fs.String("addr", "", "`host:port` of Redis or of a Twemproxy/Codis proxy, or several proxies separated by commas (overrides [redis] addr)")
	clusterMode := fs.Bool("cluster", false, "--addr (or [redis] addr) lists seed nodes of a Redis Cluster (overrides [redis] cluster)")
	listen := fs.String("listen", "", "`host:port` of the HTTP API, \"\" for none (overrides [http] listen)")
	level := fs.String("log-level", "", "log `level`: debug, info, warn or error (overrides [log] level)")
	lease := durationFlag{}
	fs.Var(&lease, "lease", "partition lease `duration` (overrides [worker] lease; default 10s)")
	if err := cmd.parse(args); err != nil {
		return nil, err
	}
	cfg := config.Default()
	if *path != "" {
		var err error
		if cfg, err = config.Load(*path); err != nil {
			return nil, err
		}
	}
	if cmd.isSet("addr") {
		cfg.Redis.Addr = *addr
	}
	if cmd.isSet("cluster") {
		cfg.Redis.Cluster = *clusterMode
	}
	if cmd.isSet("listen") {
		cfg.HTTP.Listen = *listen
	}
	if cmd.isSet("log-level") {
		cfg.Log.Level = *level
	}
	if cmd.isSet("lease") {
		cfg.Worker.Lease = lease.d
	}
	if err := cfg.Validate(); err != nil { // the file was valid: a flag is not
		var ce *config.Error
		if errors.As(err, &ce) {
			for flagName, path := range workerFlagKeys {
				if cmd.isSet(flagName) && ce.Path == path {
					return nil, cmd.usageErr("invalid value %q for flag --%s: %s",
						fs.Lookup(flagName).Value.String(), flagName, ce.Msg)
				}
			}
		}
		return nil, cmd.usageErr("%v", err)
	}
	if len(cfg.Topics) == 0 && cfg.HTTP.Listen == "" {
		return nil, cmd.usageErr("nothing to do: no [[topic]] to consume and no [http] listen address (use --config)")
	}
	return cfg, nil
}

// workerFlagKeys maps the flags that override config keys to the keys.
var workerFlagKeys = map[string]string{"addr": "redis.addr", "listen": "http.listen", "log-level": "log.level", "lease": "worker.lease"}

// newWorkerLogger returns the logger [log] describes, writing to w.
func newWorkerLogger(w io.Writer, c config.Log) *slog.Logger {
	o := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// worker is the daemon: a consumer per configured topic and the HTTP API.
type worker struct {
	cfg     *config.Config
	base    *slog.Logger // as given: the parts that name their own component log to it
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	web     *http.Client // shared by the http handlers
	// tracer makes the spans of the deliveries and of the API's
	// enqueues ([tracing]); stopTracer flushes it at close.
	tracer     trace.TracerProvider
	stopTracer func(context.Context) error
	// client is shared by every consumer, the API and the metrics: one
	// pool, and one read of the topics' change counters per tick.
	client   *delayq.Client
	topics   []*workerTopic // in config order
	byName   map[string]*workerTopic
	ui       *ui.Server   // the dashboard at /ui/, with [http] listen
	lateness *ui.Lateness // of the deliveries, for the dashboard
	stopping atomic.Bool  // set once shutdown began: /readyz fails
}

// workerTopic is one configured topic.
type workerTopic struct {
	cfg      config.Topic
	consumer *delayq.Consumer
	running  atomic.Bool // between the start and the return of consumer.Run
}

// newWorker builds the clients, handlers, consumers and metrics of cfg.
// Nothing talks to Redis yet.
func newWorker(cfg *config.Config, log *slog.Logger) (_ *worker, err error) {
	w := &worker{
		cfg: cfg, base: log, log: log.With("component", "worker"),
		reg: prometheus.NewRegistry(), web: handler.NewHTTPClient(),
		byName: map[string]*workerTopic{},
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if w.metrics, err = metrics.New(w.reg); err != nil {
		return nil, err
	}
	if w.tracer, w.stopTracer, err = newTracerProvider(cfg.Tracing, cfg.Worker.ID, log); err != nil {
		return nil, err
	}
	if w.client, err = w.newClient(log); err != nil {
		return nil, err
	}
	w.metrics.AddProxies(w.client)
	for _, tc := range cfg.Topics {
		t := &workerTopic{cfg: tc}
		w.topics = append(w.topics, t)
		w.byName[tc.Name] = t
		h, err := handler.New(tc.Handler, handler.Options{Client: w.web, Logger: log.With("topic", tc.Name)})
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", tc.Name, err)
		}
		t.consumer, err = w.client.NewConsumer(delayq.ConsumerOptions{
			Topic:            tc.Name,
			ID:               cfg.Worker.ID,
			Concurrency:      tc.Concurrency,
			Timeout:          tc.Timeout,
			MaxAttempts:      tc.MaxAttempts,
			Backoff:          tc.Backoff,
			Lease:            cfg.Worker.Lease,
			PollInterval:     cfg.Worker.PollInterval,
			IdlePollInterval: cfg.Worker.IdlePollInterval,
			ShutdownTimeout:  cfg.Worker.ShutdownTimeout,
		}, w.observe(tc.Name, h))
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", tc.Name, err)
		}
		w.metrics.AddConsumer(tc.Name, w.client, t.consumer)
	}
	if cfg.HTTP.Listen != "" {
		if err := w.newUI(log); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// newUI makes the dashboard served at /ui/: it signs in with [http]
// token and shows this worker's counters and lateness.
func (w *worker) newUI(log *slog.Logger) error {
	w.lateness = ui.NewLateness()
	var err error
	w.ui, err = ui.New(ui.Options{
		Client: w.client,
		Token:  w.cfg.HTTP.Token, Lease: w.cfg.Worker.Lease, Lateness: w.lateness, Logger: log,
		Proxies: w.client.Proxies,
		Counters: func(topic string) (ui.Counters, bool) {
			t, ok := w.byName[topic]
			if !ok {
				return ui.Counters{}, false
			}
			s := t.consumer.Stats()
			return ui.Counters{Delivered: s.Delivered, Acked: s.Acked, Retried: s.Retried, Dead: s.Dead}, true
		},
	})
	return err
}

// newClient returns the client of [redis]. Topics it creates get the
// default partition count, those a consumer creates the [[topic]]'s.
func (w *worker) newClient(log *slog.Logger) (*delayq.Client, error) {
	r := w.cfg.Redis
	return delayq.New(delayq.Options{
		Addr: r.Addr, Password: r.Password, Namespace: r.Namespace,
		MaxBodyBytes: w.cfg.HTTP.MaxBodyBytes, PoolSize: r.PoolSize,
		DialTimeout: r.DialTimeout, ReadTimeout: r.ReadTimeout, WriteTimeout: r.WriteTimeout,
		Cluster: r.Cluster,
		Logger:  log, TracerProvider: w.tracer,
	})
}

// observe wraps h so that each delivery is measured and its failures
// logged.
func (w *worker) observe(topic string, h delayq.Handler) delayq.Handler {
	log := w.log.With("topic", topic)
	return func(ctx context.Context, d *delayq.Delivery) error {
		start := time.Now()
		err := h(ctx, d)
		took := time.Since(start)
		w.metrics.ObserveDelivery(topic, start.Sub(d.Due), took, err)
		if w.lateness != nil {
			w.lateness.Observe(topic, start, start.Sub(d.Due))
		}
		if err != nil {
			log.Warn("delivery failed", "id", d.ID, "attempt", d.Attempt, "took", took, "err", err)
		} else {
			log.Debug("delivered", "id", d.ID, "attempt", d.Attempt, "took", took)
		}
		return err
	}
}

// clientOf returns the client of topic for the API.
func (w *worker) clientOf(string) (*delayq.Client, error) { return w.client, nil }

// duplicates is what an enqueue of the API does with an id that exists
// when its body does not say: the [[topic]]'s on_duplicate and max_wait,
// and for a topic this worker does not consume, reject. byName is not
// written after newWorker: safe for concurrent use.
func (w *worker) duplicates(topic string) httpapi.Duplicates {
	t, ok := w.byName[topic]
	if !ok {
		return httpapi.Duplicates{}
	}
	return httpapi.Duplicates{OnDuplicate: t.cfg.OnDuplicate, MaxWait: t.cfg.MaxWait}
}

// readyzID is the id /readyz reads: it need not exist.
const readyzID = "delayq-readyz-probe"

// ready is /readyz: every consumer runs and Redis answers for each topic
// (a Get of an id that need not exist; without topics,
// only the first condition holds).
func (w *worker) ready(ctx context.Context) error {
	if w.stopping.Load() {
		return errors.New("shutting down")
	}
	for _, t := range w.topics {
		if !t.running.Load() {
			return fmt.Errorf("the consumer of topic %s is not running", t.cfg.Name)
		}
		if _, err := w.client.Get(ctx, t.cfg.Name, readyzID); err != nil && !errors.Is(err, delayq.ErrNotFound) {
			return fmt.Errorf("redis: %w", err)
		}
	}
	return nil
}

// check fails when Redis refuses the worker's credentials or the address
// is not Redis's, where the consumers would wait for it forever. Redis
// not answering at all is an outage: the consumers wait for it, as they
// do for one that begins later.
func (w *worker) check(ctx context.Context) error {
	if len(w.topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := w.client.Get(ctx, w.topics[0].cfg.Name, readyzID)
	if errors.Is(err, delayq.ErrAuth) || errors.Is(err, delayq.ErrNotRedis) {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// checkTimeout bounds the worker's check at start.
const checkTimeout = 2 * time.Second

// run consumes and serves until ctx is done (nil) or a consumer or the
// HTTP server fails (its error), then shuts down gracefully.
func (w *worker) run(ctx context.Context) error {
	if err := w.check(ctx); err != nil {
		return err
	}
	// The listener opens before anything runs: a listen that fails
	// starts nothing.
	ln, err := w.listen()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &workerRun{cancel: cancel}
	w.startConsumers(runCtx, r)
	srv := w.serve(ln, r)
	w.logStarted(ln)

	<-runCtx.Done()
	if err := w.stop(srv); err != nil {
		return err
	}
	r.wg.Wait()
	w.log.Info("worker stopped")
	return r.err
}

// workerRun is what the goroutines of a worker's run share: the group
// that waits for them, and the first of their failures, which ends the
// run. Safe for concurrent use.
type workerRun struct {
	wg     sync.WaitGroup
	cancel context.CancelFunc // ends the run
	once   sync.Once
	err    error // the first failure, read after wg.Wait
}

// fail ends the run with err, unless an earlier failure did.
func (r *workerRun) fail(err error) {
	r.once.Do(func() { r.err = err })
	r.cancel()
}

// listen opens the listener of [http] listen, nil without one.
func (w *worker) listen() (net.Listener, error) {
	if w.cfg.HTTP.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", w.cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	return ln, nil
}

// startConsumers provisions each topic as its [[topic]] says, then runs
// its consumer, under runCtx, each in a goroutine of r; a failure of
// either fails r.
func (w *worker) startConsumers(runCtx context.Context, r *workerRun) {
	for _, t := range w.topics {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if _, err := w.client.Admin().ProposeTopic(runCtx, t.topicConfig()); err != nil {
				if runCtx.Err() == nil {
					r.fail(fmt.Errorf("topic %s: %w", t.cfg.Name, err))
				}
				return
			}
			t.running.Store(true)
			defer t.running.Store(false)
			if err := t.consumer.Run(runCtx); err != nil {
				r.fail(fmt.Errorf("topic %s: %w", t.cfg.Name, err))
			}
		}()
	}
}

// topicConfig is what the worker's file declares for the topic: its
// count, limits, uniqueness window, automatic count and schedules.
func (t *workerTopic) topicConfig() delayq.TopicConfig {
	return delayq.TopicConfig{
		Topic:          t.cfg.Name,
		Partitions:     t.cfg.Partitions,
		Schedules:      workerSchedules(t.cfg.Schedules),
		Limits:         t.cfg.Limits,         // nil without [topic.limits]
		UniqueFor:      t.cfg.UniqueFor,      // nil without unique_for
		AutoPartitions: t.cfg.AutoPartitions, // nil without partitions = "auto"
	}
}

// serve serves the HTTP API (with the dashboard, if any) on ln, in a
// goroutine of r whose failure fails r, and returns its server; nil
// without ln. It warns when the API needs no token.
func (w *worker) serve(ln net.Listener, r *workerRun) *http.Server {
	if ln == nil {
		return nil
	}
	srv := w.httpServer()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			r.fail(fmt.Errorf("http: %w", err))
		}
	}()
	if w.cfg.HTTP.Token == "" {
		w.log.Warn("the HTTP API needs no token: anyone who reaches it can enqueue and delete ([http] token)")
	}
	return srv
}

// httpServer is the worker's HTTP server: the API, and the dashboard at
// /ui/ if there is one, with the worker's timeouts, its errors logged.
func (w *worker) httpServer() *http.Server {
	var h http.Handler = withTraceContext(httpapi.New(httpapi.Options{
		Client: w.clientOf, Duplicates: w.duplicates, Proxies: w.client.Proxies, Token: w.cfg.HTTP.Token, MaxBodyBytes: w.cfg.HTTP.MaxBodyBytes,
		Ready: w.ready, Gatherer: w.reg, Logger: w.base,
	}))
	if w.ui != nil {
		h = withUI(w.ui, h)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: workerReadHeaderTimeout,
		ReadTimeout:       workerReadTimeout,
		WriteTimeout:      workerWriteTimeout,
		IdleTimeout:       workerIdleTimeout,
		ErrorLog:          slog.NewLogLogger(w.log.Handler(), slog.LevelWarn),
	}
}

// logStarted logs that the worker started: its id, Redis, topics,
// tracing endpoint, the address it listens on (ln's, "" without one) and
// its dashboard's; it warns when there is no topic to consume.
func (w *worker) logStarted(ln net.Listener) {
	names := make([]string, len(w.topics))
	for i, t := range w.topics {
		names[i] = t.cfg.Name
	}
	if len(w.topics) == 0 {
		w.log.Warn("no [[topic]] in the config: this worker delivers nothing; it serves the HTTP API, /metrics and the dashboard only")
	}
	attrs := []any{"id", w.cfg.Worker.ID, "redis", w.cfg.Redis.Addr, "topics", names}
	if w.cfg.Tracing.Endpoint != "" {
		attrs = append(attrs, "tracing", w.cfg.Tracing.Endpoint)
	}
	attrs = append(attrs, "listen", "")
	if ln != nil {
		attrs[len(attrs)-1] = ln.Addr().String()
		if w.ui != nil {
			attrs = append(attrs, "dashboard", browseURL(ln.Addr().String(), "/ui/"))
		}
	}
	w.log.Info("worker started", attrs...)
}

// stop shuts the worker down once its run ended: /readyz fails, the HTTP
// server srv (nil: none) gets workerHTTPShutdown, at most shutdown_timeout,
// to finish its requests, and the consumers, draining, get
// shutdown_timeout and workerStopGrace to hand their partitions back; a
// consumer that does not is an error.
func (w *worker) stop(srv *http.Server) error {
	w.stopping.Store(true)
	w.log.Info("worker stopping", "shutdown_timeout", w.cfg.Worker.ShutdownTimeout)
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), min(workerHTTPShutdown, w.cfg.Worker.ShutdownTimeout))
		if err := srv.Shutdown(sctx); err != nil {
			w.log.Warn("http requests cut short", "err", err)
			srv.Close()
		}
		scancel()
	}
	// The consumers saw runCtx end and are draining: running deliveries
	// get shutdown_timeout, then their contexts are cancelled.
	sctx, scancel := context.WithTimeout(context.Background(), w.cfg.Worker.ShutdownTimeout+workerStopGrace)
	defer scancel()
	for _, t := range w.topics {
		if err := t.consumer.Shutdown(sctx); err != nil {
			return fmt.Errorf("topic %s: consumer did not stop within %v: %w",
				t.cfg.Name, w.cfg.Worker.ShutdownTimeout+workerStopGrace, err)
		}
	}
	return nil
}

// withUI serves the dashboard at /ui/ (it has its own sign-in) and
// everything else with api, whose paths it leaves as they are.
func withUI(dashboard, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/ui":
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		case strings.HasPrefix(p, "/ui/"):
			dashboard.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// close releases the clients and idle webhook connections, and flushes
// the spans not yet exported. The consumers must have stopped.
func (w *worker) close() {
	if w.client != nil {
		w.client.Close()
	}
	if w.stopTracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		if err := w.stopTracer(ctx); err != nil {
			w.log.Warn("spans not exported", "endpoint", w.cfg.Tracing.Endpoint, "err", err)
		}
		cancel()
	}
	if w.ui != nil {
		w.ui.Close()
	}
	w.web.CloseIdleConnections()
}
