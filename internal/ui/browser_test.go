package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser tests drive a real headless Chromium (Debian's chromium
// package) with chromedp. One browser serves the whole package; each test
// gets a tab in a browser context of its own (its own cookies), and saves
// a screenshot in the artifacts directory: $DELAYQ_ARTIFACTS, else
// $TMPDIR/delayq-ui-artifacts.

// chromiumNames are the binaries looked for, in order, on PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

var browser struct {
	once sync.Once
	ctx  context.Context
	stop func()
	err  error
}

// findChromium returns the path of the browser: $DELAYQ_CHROMIUM, or one
// of chromiumNames on PATH.
func findChromium() (string, error) {
	if p := os.Getenv("DELAYQ_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, n := range chromiumNames {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found (looked for " + strings.Join(chromiumNames, ", ") +
		" on PATH, and $DELAYQ_CHROMIUM): install it with `apt-get install chromium` (.ci/run does)")
}

// startBrowser starts the package's browser on first use; a missing
// browser fails the test, it does not skip it.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	browser.once.Do(func() {
		path, err := findChromium()
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.WindowSize(1280, 860), chromedp.Flag("hide-scrollbars", true))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil {
			cancel()
			cancelAlloc()
			browser.err = fmt.Errorf("start %s: %w", path, err)
			return
		}
		browser.ctx, browser.stop = ctx, func() { cancel(); cancelAlloc() }
	})
	if browser.err != nil {
		t.Fatal(browser.err)
	}
	return browser.ctx
}

// stopBrowser closes the browser, if a test started it.
func stopBrowser() {
	if browser.stop != nil {
		browser.stop()
	}
}

// artifacts returns the directory of the screenshots.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DELAYQ_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "delayq-ui-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tab is a browser tab on a fixture's dashboard.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu      sync.Mutex
	accept  bool     // the answer to confirm dialogs
	dialogs []string // the messages of every dialog that opened
}

// tab opens a tab in a new browser context; at the end of the test it
// saves a screenshot named after the test and closes.
func (f *fixture) tab(t *testing.T) *tab {
	t.Helper()
	bctx := startBrowser(t)
	ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	tb := &tab{t: t, ctx: ctx, base: f.ts.URL, accept: true}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			accept := tb.accept
			tb.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		}
	}()
	t.Cleanup(func() {
		tb.screenshot(strings.ReplaceAll(t.Name(), "/", "_"))
		cancelTimeout()
		cancel()
		<-done
	})
	return tb
}

// screenshot saves the viewport as name.png in the artifacts directory
// and returns the PNG.
func (tb *tab) screenshot(name string) []byte {
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return nil
	}
	p := filepath.Join(artifacts(tb.t), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		tb.t.Errorf("save screenshot: %v", err)
	}
	tb.t.Logf("screenshot: %s", p)
	return png
}

// setAccept sets the answer to the next confirm dialogs.
func (tb *tab) setAccept(ok bool) {
	tb.mu.Lock()
	tb.accept = ok
	tb.mu.Unlock()
}

// dialogsSeen returns the dialogs that opened so far.
func (tb *tab) dialogsSeen() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.dialogs...)
}

// do runs actions, failing the test on error.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatal(err)
	}
}

// open navigates to path of the dashboard.
func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(tb.base + path))
}

// click clicks the element sel selects.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// text returns the text of the element sel selects.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// eval evaluates a JavaScript expression.
func eval[T any](tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the boolean expression expr holds in the page,
// across navigations (where it may fail for a moment).
func (tb *tab) waitJS(what, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("timed out waiting for %s (%s): %v", what, expr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// act clicks sel, which submits a form that asks for confirmation (the
// tab answers it) and loads another page, and waits for that page's flash
// message to contain want.
func (tb *tab) act(sel, want string) {
	tb.t.Helper()
	eval[bool](tb, "window.dqOldPage = true")
	tb.click(sel)
	tb.waitJS("the flash "+strconvQuote(want), fmt.Sprintf(
		`!window.dqOldPage && document.getElementById('flash') && document.getElementById('flash').textContent.includes(%s)`, strconvQuote(want)))
}

// strconvQuote quotes s as a JavaScript string (JSON is a subset).
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
