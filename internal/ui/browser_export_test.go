package ui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// TestBrowserExportLink follows the topic page's export link in the
// browser, as the page's own origin: a download named after the topic,
// one JSON line per message.
func TestBrowserExportLink(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	var msgs []delayq.Message
	for i := range 20 {
		msgs = append(msgs, delayq.Message{Topic: "exports", ID: fmt.Sprintf("e-%d", i), Body: []byte("x"), Delay: time.Hour})
	}
	send(t, c, msgs...)
	tb := f.tab(t)
	tb.open("/ui/topics/exports")
	if got := eval[string](tb, `document.querySelector('#export-link').getAttribute('download')`); got != "exports.jsonl" {
		t.Errorf("export link's download name %q", got)
	}
	got := eval[string](tb, `(async () => {
		const r = await fetch(document.querySelector('#export-link').href);
		return r.status + ' ' + r.headers.get('Content-Disposition') + ' ' + (await r.text()).trim().split('\n').length;
	})()`, chromedp.EvalAwaitPromise)
	if want := `200 attachment; filename="exports.jsonl" 20`; got != want {
		t.Errorf("following the export link: %q, want %q", got, want)
	}
	if !strings.Contains(tb.text("#export-link"), "JSON lines") {
		t.Errorf("export link text %q", tb.text("#export-link"))
	}
}
