package ui_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// TestSignIn checks the session: pages redirect to the sign-in form, a
// wrong token is refused (and too many are rate limited), the right one
// sets an HttpOnly SameSite=Strict cookie on /ui/, and signing out ends
// the session on the server, not only in the browser.
func TestSignIn(t *testing.T) {
	f := newFixture(t, ui.Options{Token: "s3cret"})
	b := f.http()
	resp, _ := b.do("GET", "/ui/topics/x?a=1", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Ftopics%2Fx%3Fa%3D1" {
		t.Fatalf("signed out: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The stylesheet needs no session (the sign-in page uses it); nothing
	// else gets through its prefix.
	if code, _ := b.get("/ui/static/app.css"); code != http.StatusOK {
		t.Errorf("static signed out: %d", code)
	}
	for _, p := range []string{"/ui/static/../topics/x", "/ui/static/%2e%2e/topics/x"} {
		if code, body := b.get(p); code == http.StatusOK {
			t.Errorf("%s signed out: %d\n%s", p, code, body)
		}
	}
	if resp, _ := b.do("GET", "/ui/", nil, "X-Delayq-Fragment", "live"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("live fragment signed out: %d, want 401", resp.StatusCode)
	}
	if resp, body := b.do("POST", "/ui/login", url.Values{"token": {"nope"}}); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "wrong token") {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	// The sign-in may only send the browser to a page of the dashboard.
	resp, _ = b.do("POST", "/ui/login", url.Values{"token": {"s3cret"}, "next": {"https://evil.example/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("open redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "dq_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui/" || session.MaxAge <= 0 {
		t.Fatalf("session cookie: %+v", session)
	}
	if code, body := b.get("/ui/"); code != http.StatusOK || !strings.Contains(body, `id="logout"`) {
		t.Fatalf("signed in: %d", code)
	}
	if resp, _ := b.post("/ui/", "/ui/logout", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	// The old cookie no longer works, even if a browser kept it.
	b2 := f.http()
	b2.c.Jar.SetCookies(mustURL(t, f.ts.URL+"/ui/"), []*http.Cookie{session})
	if code, _ := b2.get("/ui/"); code != http.StatusSeeOther {
		t.Errorf("after logout: %d, want 303", code)
	}
	// Behind a TLS proxy that says so, the cookie is Secure too.
	resp, _ = f.http().do("POST", "/ui/login", url.Values{"token": {"s3cret"}}, "X-Forwarded-Proto", "https")
	if c := resp.Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("cookie behind https: %+v", c)
	}
	// Ten failures a minute, then 429 even for the right token.
	for range 10 {
		b.do("POST", "/ui/login", url.Values{"token": {"guess"}})
	}
	if resp, _ := b.do("POST", "/ui/login", url.Values{"token": {"s3cret"}}); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after 11 failures: %d, want 429", resp.StatusCode)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestActionsNeedCSRFAndConfirmation checks, without a token configured,
// that a POST needs the session's CSRF token and a same-origin Origin,
// that an action without confirm=yes only shows the confirmation page
// (what a browser without the script gets) and that the confirmed one
// acts, in Redis.
func TestActionsNeedCSRFAndConfirmation(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	send(t, c, delayq.Message{Topic: "jobs", ID: "job-1", Body: []byte("x"), Delay: time.Hour})
	b := f.http()
	page := "/ui/topics/jobs/message?id=job-1"
	code, html := b.get(page)
	if code != http.StatusOK || !strings.Contains(html, `id="delete-form"`) {
		t.Fatalf("message page: %d", code)
	}
	token := csrfOf(t, html)
	for name, form := range map[string]url.Values{
		"no token":    {"id": {"job-1"}, "confirm": {"yes"}},
		"wrong token": {"id": {"job-1"}, "confirm": {"yes"}, "csrf": {token + "x"}},
	} {
		if resp, _ := b.do("POST", "/ui/topics/jobs/message/delete", form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	// Another browser's token is not this one's.
	other := f.http()
	_, otherHTML := other.get(page)
	if resp, _ := b.do("POST", "/ui/topics/jobs/message/delete", url.Values{"id": {"job-1"}, "confirm": {"yes"}, "csrf": {csrfOf(t, otherHTML)}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another session's token: %d, want 403", resp.StatusCode)
	}
	form := url.Values{"id": {"job-1"}, "csrf": {token}}
	if resp, _ := b.do("POST", "/ui/topics/jobs/message/delete", form, "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross origin: %d, want 403", resp.StatusCode)
	}
	resp, body := b.do("POST", "/ui/topics/jobs/message/delete", form, "Origin", f.ts.URL)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="confirm-form"`) || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("unconfirmed: %d\n%s", resp.StatusCode, body)
	}
	if _, err := c.Get(ctx, "jobs", "job-1"); err != nil {
		t.Fatalf("an unconfirmed delete deleted: %v", err)
	}
	form.Set("confirm", "yes")
	resp, _ = b.do("POST", "/ui/topics/jobs/message/delete", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page {
		t.Fatalf("confirmed: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, err := c.Get(ctx, "jobs", "job-1"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	// The flash tells what happened, once.
	if _, html := b.get(page); !strings.Contains(html, "Deleted job-1.") || !strings.Contains(html, `id="not-found"`) {
		t.Errorf("no flash after delete:\n%s", html)
	}
	if _, html := b.get(page); strings.Contains(html, "Deleted job-1.") {
		t.Errorf("the flash showed twice")
	}
}

// TestReadOnly checks that a read-only dashboard renders no action and
// refuses every POST, valid CSRF token or not, but still signs out.
func TestReadOnly(t *testing.T) {
	f := newFixture(t, ui.Options{ReadOnly: true, Token: "t"})
	c := f.client(2)
	send(t, c, delayq.Message{Topic: "ro", ID: "a", Body: []byte("x"), Delay: time.Hour})
	kill(t, c, "ro", func(string) string { return "boom" }, delayq.Message{ID: "d1", Body: []byte("y")})
	b := f.http()
	b.login("t")
	for _, p := range []string{"/ui/", "/ui/topics/ro", "/ui/topics/ro/message?id=a", "/ui/topics/ro/message?id=d1", "/ui/topics/ro/dead", "/ui/topics/ro/scheduled"} {
		code, html := b.get(p)
		if code != http.StatusOK {
			t.Errorf("%s: %d", p, code)
		}
		if n := strings.Count(html, `method="post"`); n != 1 || !strings.Contains(html, `action="/ui/logout"`) {
			t.Errorf("%s has %d POST forms, want only sign-out", p, n)
		}
		if !strings.Contains(html, `id="read-only"`) {
			t.Errorf("%s does not say read-only", p)
		}
	}
	for _, a := range []string{"/ui/topics/ro/message/delete", "/ui/topics/ro/message/run", "/ui/topics/ro/dead/purge-all", "/ui/topics/ro/dead/requeue", "/ui/topics/ro/delete",
		"/ui/topics/ro/pause", "/ui/topics/ro/limits", "/ui/topics/ro/limits/clear"} {
		resp, _ := b.post("/ui/", a, url.Values{"id": {"d1"}, "confirm": {"yes"}, "force": {"yes"}, "rate": {"5/s"}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s: %d, want 403", a, resp.StatusCode)
		}
	}
	st, err := c.Inspector().Stats(context.Background(), "ro")
	if err != nil || st.Scheduled != 1 || st.Dead != 1 || st.Pause.Paused || !st.Limits.IsZero() {
		t.Errorf("read-only changed Redis: %+v %v", st, err)
	}
	if resp, _ := b.post("/ui/", "/ui/logout", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d", resp.StatusCode)
	}
}

// TestSecurityHeaders checks the headers of pages and of the raw body
// download, and that unknown topics are 404.
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(2)
	send(t, c, delayq.Message{Topic: "h", ID: "m", Body: []byte("<script>alert(1)</script>"), Delay: time.Hour})
	b := f.http()
	resp, _ := b.do("GET", "/ui/", nil)
	h := resp.Header
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP: %q", csp)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers: %v", h)
	}
	resp, body := b.do("GET", "/ui/topics/h/message/body?id=m", nil)
	if resp.StatusCode != 200 || body != "<script>alert(1)</script>" ||
		resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("body download: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	for _, p := range []string{"/ui/topics/nope", "/ui/topics/nope/dead", "/ui/topics/nope/schedules", "/ui/topics/bad%20name"} {
		code, html := b.get(p)
		if code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, code)
		}
		if want := "topic &#34;nope&#34; does not exist"; strings.Contains(p, "nope") && !strings.Contains(html, want) {
			t.Errorf("%s does not say %s", p, want)
		}
	}
	if code, _ := b.get("/ui/topics/nope/export"); code != http.StatusNotFound {
		t.Errorf("export of a topic that does not exist: %d, want 404", code)
	}
	if resp, body := b.do("GET", "/ui/static/app.js", nil); resp.StatusCode != 200 || !strings.Contains(body, "X-Delayq-Fragment") {
		t.Errorf("static: %d", resp.StatusCode)
	}
}
