package ui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/ui"
	"go.uber.org/goleak"
)

// proxyAddr is the Twemproxy of the servers every test of the package
// shares (two redis-server backends, no hash_tag); each test works in a
// namespace of its own.
var proxyAddr string

// TestMain starts the servers, runs the tests, stops the browser if a
// test started it, and fails the run when goroutines outlive the tests.
func TestMain(m *testing.M) {
	env, err := testenv.StartDaemon("", testenv.Options{Backends: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ui tests:", err)
		os.Exit(1)
	}
	proxyAddr = env.Proxy
	code := m.Run()
	stopBrowser()
	env.Stop()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction(testenv.SpawnerFunc)); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var nsCounter atomic.Int64

// fixture is a dashboard on a test HTTP server, in a fresh namespace.
type fixture struct {
	t    testing.TB
	ns   string
	srv  *ui.Server
	ts   *httptest.Server
	opts ui.Options
}

// newFixture starts a dashboard with o, its Client a client of the
// fixture's namespace (closed after the dashboard).
func newFixture(t testing.TB, o ui.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, ns: fmt.Sprintf("uit%d-%d", nsCounter.Add(1), time.Now().UnixNano()%1e6)}
	c, err := delayq.New(delayq.Options{Addr: proxyAddr, Namespace: f.ns, PoolSize: ui.DefaultPoolSize})
	if err != nil {
		t.Fatal(err)
	}
	o.Client = c
	srv, err := ui.New(o)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	f.srv, f.opts = srv, o
	mux := http.NewServeMux()
	mux.Handle("/ui/", srv)
	f.ts = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.ts.Close()
		srv.Close()
		c.Close()
	})
	return f
}

// client returns a library client of the fixture's namespace for topics
// of n partitions, closed at the end of the test.
func (f *fixture) client(n int) *delayq.Client {
	f.t.Helper()
	c, err := delayq.New(delayq.Options{Addr: proxyAddr, Namespace: f.ns, Partitions: n})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

// send enqueues messages, failing the test on any error.
func send(t testing.TB, c *delayq.Client, msgs ...delayq.Message) {
	t.Helper()
	res, err := c.SendBatch(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue %q: %v", msgs[i].ID, r.Err)
		}
	}
}

// kill makes dead letters: it enqueues msgs due now and runs a consumer
// whose handler fails each delivery with the error errOf returns, with one
// attempt allowed, until all are dead.
func kill(t testing.TB, c *delayq.Client, topic string, errOf func(id string) string, msgs ...delayq.Message) {
	t.Helper()
	ctx := context.Background()
	before, err := c.Inspector().Stats(ctx, topic)
	if errors.Is(err, delayq.ErrNoTopic) {
		before, err = &delayq.TopicStats{}, nil // the first message creates it
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		msgs[i].Topic, msgs[i].Delay = topic, 0
	}
	send(t, c, msgs...)
	k, err := c.NewConsumer(delayq.ConsumerOptions{
		Topic: topic, MaxAttempts: 1, Lease: time.Second, PollInterval: 20 * time.Millisecond,
		ShutdownTimeout: time.Second, ChangePoll: 20 * time.Millisecond,
	}, func(ctx context.Context, d *delayq.Delivery) error { return errors.New(errOf(d.ID)) })
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(runCtx) }()
	testenv.WaitFor(t, 20*time.Second, "messages to die", func() bool {
		st, err := c.Inspector().Stats(ctx, topic)
		return err == nil && st.Dead >= before.Dead+int64(len(msgs))
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := k.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

// browserless is an HTTP client with a cookie jar that does not follow
// redirects, for tests of the server without a browser.
type browserless struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (f *fixture) http() *browserless {
	jar, _ := cookiejar.New(nil)
	return &browserless{t: f.t, base: f.ts.URL, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends a request and returns the status, the Location and the body.
func (b *browserless) do(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func (b *browserless) get(path string) (int, string) {
	b.t.Helper()
	resp, body := b.do("GET", path, nil)
	return resp.StatusCode, body
}

// post sends a form with the CSRF token of page (a path) filled in.
func (b *browserless) post(page, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	_, html := b.get(page)
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", csrfOf(b.t, html))
	return b.do("POST", path, form)
}

// login signs in with token and fails the test unless it works.
func (b *browserless) login(token string) {
	b.t.Helper()
	resp, _ := b.do("POST", "/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		b.t.Fatalf("login: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf returns the CSRF token of a page's forms.
func csrfOf(t testing.TB, html string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", html)
	}
	return m[1]
}
