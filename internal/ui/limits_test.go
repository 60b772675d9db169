package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// TestLimitsWithoutScript: without the script, setting limits shows a
// confirmation page that carries them, normalized, and writes nothing;
// its confirmed form sets them and the topic page says so; Clear asks,
// then removes them.
func TestLimitsWithoutScript(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	send(t, c, delayq.Message{Topic: "jobs", ID: "j", Body: []byte("x"), Delay: time.Hour})
	limitsAre := func(want delayq.Limits) {
		t.Helper()
		if got, err := c.Inspector().Limits(ctx, "jobs"); err != nil || got != want {
			t.Fatalf("Inspector.Limits: %+v, %v; want %+v", got, err, want)
		}
	}
	b := f.http()
	page := "/ui/topics/jobs"
	resp, body := b.post(page, page+"/limits", url.Values{"rate": {" 600/m "}, "burst": {""}, "concurrency": {"3"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="confirm-form"`) ||
		!strings.Contains(body, "Set the flow limits of topic jobs to rate 10/s burst 1 (default) concurrency 3?") {
		t.Fatalf("unconfirmed: %d\n%s", resp.StatusCode, body)
	}
	limitsAre(delayq.Limits{})
	form := url.Values{"confirm": {"yes"}}
	for _, name := range []string{"rate", "burst", "concurrency", "csrf"} {
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("the confirmation has no field %s:\n%s", name, body)
		}
		form.Set(name, m[1])
	}
	if form.Get("rate") != "10/s" || form.Get("burst") != "" || form.Get("concurrency") != "3" {
		t.Errorf("the confirmation carries %v", form)
	}
	resp, _ = b.do("POST", page+"/limits", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page {
		t.Fatalf("confirmed: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	limitsAre(delayq.Limits{Rate: 10, Concurrency: 3})
	if _, html := b.get(page); !strings.Contains(html, "Limits of jobs: rate 10/s burst 1 (default) concurrency 3.") || !strings.Contains(html, `id="limits-state"`) {
		t.Errorf("the page after the change:\n%s", html)
	}

	if resp, body := b.post(page, page+"/limits", url.Values{"rate": {"5/s"}, "burst": {"-2"}, "confirm": {"yes"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a bad burst: %d\n%s", resp.StatusCode, body)
	}
	if _, html := b.get(page); !strings.Contains(html, `burst &#34;-2&#34;`) {
		t.Errorf("no flash naming the bad burst:\n%s", html)
	}
	limitsAre(delayq.Limits{Rate: 10, Concurrency: 3})

	resp, body = b.post(page, page+"/limits/clear", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Remove every flow limit of topic jobs?") {
		t.Fatalf("unconfirmed clear: %d\n%s", resp.StatusCode, body)
	}
	limitsAre(delayq.Limits{Rate: 10, Concurrency: 3})
	if resp, _ := b.post(page, page+"/limits/clear", url.Values{"confirm": {"yes"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed clear: %d", resp.StatusCode)
	}
	limitsAre(delayq.Limits{})
}
