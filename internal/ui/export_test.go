package ui_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// TestExportDownload: the topic page links to the download of its JSON
// lines, which needs a session like every page.
func TestExportDownload(t *testing.T) {
	f := newFixture(t, ui.Options{Token: "s3cret"})
	c := f.client(4)
	var msgs []delayq.Message
	for i := range 12 {
		msgs = append(msgs, delayq.Message{Topic: "dl", Body: []byte{'a' + byte(i)}, Delay: time.Hour})
	}
	send(t, c, msgs...)
	b := f.http()
	if code, _ := b.get("/ui/topics/dl/export"); code != http.StatusSeeOther {
		t.Fatalf("export signed out: %d, want a redirect to the sign-in", code)
	}
	b.login("s3cret")
	if code, page := b.get("/ui/topics/dl"); code != http.StatusOK || !strings.Contains(page, `id="export-link" href="/ui/topics/dl/export"`) {
		t.Fatalf("topic page: %d, no export link:\n%s", code, page)
	}
	resp, body := b.do("GET", "/ui/topics/dl/export", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Disposition") != `attachment; filename="dl.jsonl"` {
		t.Fatalf("export: %d %v", resp.StatusCode, resp.Header)
	}
	if n := strings.Count(body, "\n"); n != 12 || !strings.Contains(body, `"state":"scheduled"`) {
		t.Fatalf("export has %d lines, want 12:\n%s", n, body)
	}
	if code, _ := b.get("/ui/topics/nope/export"); code != http.StatusNotFound {
		t.Fatalf("export of a topic never used: %d, want 404", code)
	}
}
