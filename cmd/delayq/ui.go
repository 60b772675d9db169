package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// envToken supplies the default of "delayq ui --token".
const envToken = "DELAYQ_TOKEN"

// defaultUIListen is the default of "delayq ui --listen": loopback only,
// so that a dashboard is never exposed by accident.
const defaultUIListen = "127.0.0.1:8080"

// uiShutdown bounds the wait for requests in progress when the dashboard stops.
const uiShutdown = 5 * time.Second

// uiAbout is the description "delayq ui -h" prints.
const uiAbout = `Serves the web dashboard on its own, for clusters whose workers run
without [http] listen: every topic with its counts, consumers, partition
owners and lag; per topic its partitions, members and the messages due in
the next hour; messages by id (delete, run now, reschedule); the next
scheduled messages; dead letters (requeue one or all, purge).
It prints the dashboard's URL, then serves until SIGINT or SIGTERM.

With a token (--token, default $DELAYQ_TOKEN) the browser signs in with it
and gets an HttpOnly, SameSite=Strict session cookie; every action also
needs a CSRF token and asks for confirmation. --read-only hides and refuses
every action. Each topic's partition count is read from Redis.`

// runUI implements "delayq ui".
func runUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newConnCommand("ui", "[--addr HOST:PORT] [--listen HOST:PORT] [--token T] [--read-only]", uiAbout, stdout, stderr)
	fs := cmd.fs
	listen := fs.String("listen", defaultUIListen, "`host:port` to serve the dashboard on (\":8080\" for every interface)")
	token := fs.String("token", "", "`token` to sign in with (default $"+envToken+"; \"\" for no sign-in)")
	readOnly := fs.Bool("read-only", false, "hide and refuse every action")
	var lease durationFlag
	fs.Var(&lease, "lease", "the consumers' partition lease `duration`, to estimate last heartbeats (default 10s)")
	var refresh durationFlag
	fs.Var(&refresh, "refresh", "live refresh `period` of the overview and topic pages (default 3s)")
	cmd.addLogLevel(slog.LevelInfo)
	if err := cmd.parse(args); err != nil {
		return err
	}
	if !cmd.isSet("token") {
		*token = os.Getenv(envToken)
	}
	if lease.d < 0 || refresh.d < 0 {
		return cmd.usageErr("--lease and --refresh must not be negative")
	}
	if refresh.d != 0 && refresh.d < 500*time.Millisecond {
		return cmd.usageErr("invalid value %q for flag --refresh: below 500ms", refresh.d)
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return cmd.usageErr("invalid value %q for flag --listen: %v", *listen, err)
	}
	log := cmd.c.logger(stderr)
	o := cmd.c.options(stderr)
	o.PoolSize, o.Logger = ui.DefaultPoolSize, log
	client, err := delayq.New(o)
	if err != nil {
		return cmd.flagError(err)
	}
	defer client.Close()
	dash, err := ui.New(ui.Options{
		Client: client,
		Token:  *token, ReadOnly: *readOnly, Lease: lease.d, Refresh: refresh.d, Logger: log,
	})
	if err != nil {
		return err
	}
	defer dash.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	return serveUI(ctx, ln, dash, *token != "", log, stdout)
}

// serveUI serves dash on ln until ctx is done, then shuts down gracefully.
func serveUI(ctx context.Context, ln net.Listener, dash http.Handler, auth bool, log *slog.Logger, stdout io.Writer) error {
	mux := http.NewServeMux()
	mux.Handle("/ui/", dash)
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: workerReadHeaderTimeout,
		ReadTimeout:       workerReadTimeout,
		WriteTimeout:      workerWriteTimeout,
		IdleTimeout:       workerIdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	url := browseURL(ln.Addr().String(), "/ui/")
	if !auth {
		log.Warn("the dashboard needs no sign-in: anyone who reaches it can see and act (--token or $" + envToken + ")")
	}
	log.Info("dashboard started", "url", url, "sign_in", auth)
	fmt.Fprintf(stdout, "dashboard: %s\n", url)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("ui: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), uiShutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests cut short", "err", err)
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: %w", err)
	}
	log.Info("dashboard stopped")
	return nil
}

// browseURL returns the URL of path on the listening address addr
// (host:port), for a user to open: an unspecified host (every interface)
// becomes localhost.
func browseURL(addr, path string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + path
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + path
}
