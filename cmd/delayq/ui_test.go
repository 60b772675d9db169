package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

func TestUIHelpAndUsage(t *testing.T) {
	stdout, _, err := runArgs(t, "ui", "-h")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"-addr", "-listen", "-token", "-read-only", "-namespace", "-password", "-lease", "-refresh", "DELAYQ_TOKEN"} {
		if !strings.Contains(stdout, f) {
			t.Errorf("ui -h does not mention %s:\n%s", f, stdout)
		}
	}
	if usage, _, _ := runArgs(t, "help"); !strings.Contains(usage, "\tui ") {
		t.Errorf("the usage does not list ui:\n%s", usage)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--listen", "nope"}, `invalid value "nope" for flag --listen`},
		{[]string{"ui", "--refresh", "10ms"}, "below 500ms"},
		{[]string{"ui", "extra"}, `unexpected argument "extra"`},
		{[]string{"ui", "--bogus"}, "bogus"},
	} {
		_, _, err := runArgs(t, tc.args...)
		checkUsageError(t, tc.args, err, tc.want)
	}
}

// dashboardClient is a browser stand-in: it keeps cookies and does not
// follow redirects.
func dashboardClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// fetch GETs url and returns the status, Location and body.
func fetch(t *testing.T, c *http.Client, u string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// signIn posts the token to the dashboard's sign-in form.
func signIn(t *testing.T, c *http.Client, base, token string) {
	t.Helper()
	resp, err := c.PostForm(base+"/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign in: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

var dashboardURL = regexp.MustCompile(`dashboard: (http://\S+)/ui/`)

// TestUIRun runs "delayq ui" in process through Twemproxy with the token
// from $DELAYQ_TOKEN: it prints its URL, asks for the token, shows the
// topics, and stops when the context ends.
func TestUIRun(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	cl, err := delayq.New(delayq.Options{Addr: env.Proxy, Namespace: "uicmd", Partitions: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Send(context.Background(), delayq.Message{Topic: "invoices", ID: "inv-1", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DELAYQ_TOKEN", "from-env")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &testenv.Buffer{}, &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--addr", env.Proxy, "--namespace", "uicmd", "--listen", "127.0.0.1:0"}, strings.NewReader(""), out, errOut)
	}()
	var base string
	testenv.WaitFor(t, 10*time.Second, "the dashboard's URL", func() bool {
		m := dashboardURL.FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	c := dashboardClient()
	if code, loc, _ := fetch(t, c, base+"/"); code != http.StatusSeeOther || loc != "/ui/" {
		t.Errorf("GET /: %d %q", code, loc)
	}
	if code, loc, _ := fetch(t, c, base+"/ui/"); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Errorf("signed out: %d %q", code, loc)
	}
	signIn(t, c, base, "from-env")
	if code, _, body := fetch(t, c, base+"/ui/"); code != http.StatusOK || !strings.Contains(body, `data-topic="invoices"`) {
		t.Errorf("overview: %d\n%s", code, body)
	}
	if code, _, body := fetch(t, c, base+"/ui/topics/invoices"); code != http.StatusOK || !strings.Contains(body, "served by a worker only") {
		t.Errorf("topic page: %d", code)
	}
	stopRun(t, cancel, done, 10*time.Second)
	if !strings.Contains(errOut.String(), "dashboard stopped") {
		t.Errorf("logs: %s", errOut.String())
	}
}

// TestWorkerUI runs the worker with [http] listen and token: /ui/ is the
// dashboard, signed in with that token (no bearer header needed), whose
// topic page shows the worker's delivery counters and lateness, while the
// API still wants its bearer token.
func TestWorkerUI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	p := writeWorkerConfig(t, fmt.Sprintf(`
[redis]
addr = %q
namespace = "wui"
[worker]
id = "ui-worker"
lease = "1s"
poll_interval = "50ms"
shutdown_timeout = "2s"
[http]
listen = "127.0.0.1:0"
token = "tok"
[log]
format = "json"
[[topic]]
name = "jobs"
partitions = 4
[topic.handler]
type = "exec"
command = ["true"]
`, env.Proxy))
	rw := startWorker(t, p)
	base, ctx, cancel, done := rw.base, rw.ctx, rw.cancel, rw.done
	cl, err := delayq.New(delayq.Options{Addr: env.Proxy, Namespace: "wui", Partitions: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 3 {
		if _, err := cl.Send(ctx, delayq.Message{Topic: "jobs", ID: fmt.Sprintf("j%d", i), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	c := dashboardClient()
	if code, loc, _ := fetch(t, c, base+"/ui"); code != http.StatusMovedPermanently || loc != "/ui/" {
		t.Errorf("GET /ui: %d %q", code, loc)
	}
	if code, loc, _ := fetch(t, c, base+"/ui/"); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Errorf("signed out: %d %q", code, loc)
	}
	if code, _, _ := fetch(t, c, base+"/v1/topics/jobs/stats"); code != http.StatusUnauthorized {
		t.Errorf("the API without its bearer token: %d, want 401", code)
	}
	signIn(t, c, base, "tok")
	testenv.WaitFor(t, 10*time.Second, "three deliveries on the topic page", func() bool {
		code, _, body := fetch(t, c, base+"/ui/topics/jobs")
		return code == http.StatusOK && strings.Contains(body, "This worker's deliveries") &&
			regexp.MustCompile(`<th>Acked</th><td class="num">[0-9.]+</td><td class="num">3</td>`).MatchString(body) &&
			strings.Contains(body, `id="p99"`)
	})
	if code, _, body := fetch(t, c, base+"/ui/"); code != http.StatusOK || !strings.Contains(body, "served by worker") {
		t.Errorf("overview: %d", code)
	} else if want := fmt.Sprintf(`<span data-proxy="%s" class="ok">%s up</span>`, env.Proxy, env.Proxy); !strings.Contains(body, want) {
		t.Errorf("overview lacks the worker's proxy, up: %s", want)
	}
	stopRun(t, cancel, done, rw.cfg.Worker.ShutdownTimeout+5*time.Second)
}

// TestUIListenEveryInterface: with --listen :0 (every interface), the
// URL printed is one a browser on this machine opens (localhost), not
// http://[::]:P/ui/, and it serves the dashboard.
func TestUIListenEveryInterface(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &testenv.Buffer{}, &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--addr", env.Backends[0], "--listen", ":0", "--token", ""}, strings.NewReader(""), out, errOut)
	}()
	re := regexp.MustCompile(`(?m)^dashboard: (http://\S+/ui/)$`)
	var url string
	testenv.WaitFor(t, 10*time.Second, "the dashboard's URL", func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	if !regexp.MustCompile(`^http://localhost:[0-9]+/ui/$`).MatchString(url) {
		t.Errorf("printed %q, want http://localhost:PORT/ui/", url)
	}
	if code, _, _ := fetch(t, dashboardClient(), url); code != http.StatusOK {
		t.Errorf("GET %s: %d", url, code)
	}
	stopRun(t, cancel, done, 10*time.Second)
}

func TestBrowseURL(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"[::]:8080", "http://localhost:8080/ui/"},
		{"0.0.0.0:8080", "http://localhost:8080/ui/"},
		{":8080", "http://localhost:8080/ui/"},
		{"127.0.0.1:9", "http://127.0.0.1:9/ui/"},
		{"[::1]:9", "http://[::1]:9/ui/"},
		{"192.0.2.7:80", "http://192.0.2.7:80/ui/"},
		{"dash.example:80", "http://dash.example:80/ui/"},
	} {
		if got := browseURL(tt.addr, "/ui/"); got != tt.want {
			t.Errorf("browseURL(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
