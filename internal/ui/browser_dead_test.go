package ui_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// TestBrowserDeadLetters lists dead letters with their errors, requeues
// one and then all of them in one topic, purges one and then all in
// another, each confirmed in a dialog, and checks Redis after each.
func TestBrowserDeadLetters(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(8)
	ctx := context.Background()
	var mail, sms []delayq.Message
	for i := range 4 {
		mail = append(mail, delayq.Message{ID: fmt.Sprintf("mail-%d", i), Body: []byte("hello")})
		sms = append(sms, delayq.Message{ID: fmt.Sprintf("sms-%d", i), Body: []byte("hi")})
	}
	kill(t, c, "mail", func(id string) string { return "smtp: 550 mailbox unavailable for " + id }, mail...)
	kill(t, c, "sms", func(id string) string { return "gateway: 429" }, sms...)
	dead := func(topic string) int64 {
		t.Helper()
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		return st.Dead
	}

	tb := f.tab(t)
	tb.open("/ui/topics/mail/dead")
	if got := tb.text("#dead-total"); got != "4" {
		t.Errorf("dead total %q", got)
	}
	if got := tb.text(`tr[data-id="mail-2"] .error-text`); got != "smtp: 550 mailbox unavailable for mail-2" {
		t.Errorf("last error %q", got)
	}
	tb.act(`tr[data-id="mail-2"] .requeue-form button`, "Requeued mail-2.")
	in, err := c.Get(ctx, "mail", "mail-2")
	if err != nil || in.State != delayq.StateScheduled || in.Attempts != 0 || dead("mail") != 3 {
		t.Fatalf("after requeue: %+v %v, %d dead", in, err, dead("mail"))
	}
	if eval[int](tb, `document.querySelectorAll('#dead tbody tr').length`) != 3 {
		t.Errorf("the list still shows the requeued message")
	}
	tb.act("#requeue-all-btn", "Requeued 3 dead messages.")
	if n := dead("mail"); n != 0 {
		t.Fatalf("after requeue all: %d dead", n)
	}
	if tb.text("#no-dead") == "" {
		t.Error("no empty state")
	}

	tb.open("/ui/topics/sms/dead")
	tb.act(`tr[data-id="sms-0"] .purge-form button`, "Purged sms-0.")
	if _, err := c.Get(ctx, "sms", "sms-0"); !errors.Is(err, delayq.ErrNotFound) || dead("sms") != 3 {
		t.Fatalf("after purge: %v, %d dead", err, dead("sms"))
	}
	tb.act("#purge-all-btn", "Purged 3 dead messages.")
	for _, m := range sms {
		if _, err := c.Get(ctx, "sms", m.ID); !errors.Is(err, delayq.ErrNotFound) {
			t.Errorf("%s after purge all: %v", m.ID, err)
		}
	}
	d := tb.dialogsSeen()
	if len(d) != 4 || !strings.Contains(d[3], "Purge all 3 dead messages of topic sms?") {
		t.Errorf("dialogs: %q", d)
	}
}

// TestBrowserHostileContentInert opens every page that shows hostile
// bodies, ids, last errors and a consumer id, waits for a live refresh of
// the topic page (which writes fetched HTML into the page), and checks
// that no script ran (no dialog, no global set) and no element came from
// the payloads: they read as text.
func TestBrowserHostileContentInert(t *testing.T) {
	f := newFixture(t, ui.Options{Refresh: 500 * time.Millisecond})
	c := f.client(4)
	payloads := []string{
		`<script>window.pwned=1;alert(1)</script>`,
		`<img src=x onerror="window.pwned=2;alert(2)">`,
		`"><svg onload="window.pwned=3;alert(3)">`,
		`</pre><iframe src="javascript:alert(4)"></iframe>`,
	}
	var msgs []delayq.Message
	for i, p := range payloads {
		msgs = append(msgs,
			delayq.Message{Topic: "evil", ID: fmt.Sprintf("body-%d", i), Body: []byte(p), Delay: time.Hour},
			delayq.Message{Topic: "evil", ID: p, Body: []byte(p), Delay: 2 * time.Hour})
	}
	send(t, c, msgs...)
	kill(t, c, "evil", func(id string) string { return payloads[len(id)%len(payloads)] },
		delayq.Message{ID: "dead-0", Body: []byte(payloads[0])}, delayq.Message{ID: "dead-" + payloads[1], Body: []byte(payloads[1])})
	runConsumer(t, c, "evil", `<img src=x onerror="window.pwned=5;alert(5)">`)

	tb := f.tab(t)
	tb.setAccept(false)
	inert := func(where string) {
		t.Helper()
		if v := eval[string](tb, `String(window.pwned)`); v != "undefined" {
			t.Errorf("%s: a payload ran: window.pwned = %s", where, v)
		}
		if n := eval[int](tb, `document.querySelectorAll('main img, main iframe, main script, main svg:not(#due-chart), main [onerror], main [onload]').length`); n != 0 {
			t.Errorf("%s: %d elements came from payloads", where, n)
		}
	}
	pages := []string{"/ui/topics/evil/scheduled", "/ui/topics/evil/dead", "/ui/topics/evil/message?id=dead-0"}
	for i, p := range payloads {
		pages = append(pages, fmt.Sprintf("/ui/topics/evil/message?id=body-%d", i), "/ui/topics/evil/message?id="+url.QueryEscape(p))
	}
	for _, p := range pages {
		tb.open(p)
		inert(p)
	}
	for i, p := range payloads {
		tb.open(fmt.Sprintf("/ui/topics/evil/message?id=body-%d", i))
		if i == 1 {
			tb.screenshot("hostile-body")
		}
		if got := eval[string](tb, `document.getElementById('body-text').textContent`); got != p {
			t.Errorf("body %d reads %q, want the payload as text", i, got)
		}
		tb.open("/ui/topics/evil/message?id=" + url.QueryEscape(p))
		if got := eval[string](tb, `document.getElementById('msg-id').textContent`); got != p {
			t.Errorf("id %d reads %q, want the payload as text", i, got)
		}
	}
	tb.open("/ui/topics/evil")
	tb.waitJS("a live refresh", `document.querySelector('[data-refreshed]')`)
	inert("topic page after a live refresh")
	if n := eval[int](tb, `[...document.querySelectorAll('#members td')].filter(td => td.textContent.includes('<img src=x')).length`); n != 1 {
		t.Errorf("the hostile consumer id is not shown as text (%d cells)", n)
	}
	if d := tb.dialogsSeen(); len(d) != 0 {
		t.Errorf("dialogs opened: %q", d)
	}
}

// TestBrowserReadOnly checks that a read-only dashboard shows no action
// and that a POST sent from the page itself is refused.
func TestBrowserReadOnly(t *testing.T) {
	f := newFixture(t, ui.Options{ReadOnly: true})
	c := f.client(2)
	send(t, c, delayq.Message{Topic: "ro", ID: "m", Body: []byte("x"), Delay: time.Hour})
	kill(t, c, "ro", func(string) string { return "boom" }, delayq.Message{ID: "d", Body: []byte("y")})
	tb := f.tab(t)
	for _, p := range []string{"/ui/topics/ro/message?id=m", "/ui/topics/ro/message?id=d", "/ui/topics/ro/dead"} {
		tb.open(p)
		if n := eval[int](tb, `document.querySelectorAll('form[method="post"], button.danger').length`); n != 0 {
			t.Errorf("%s: %d actions shown", p, n)
		}
	}
	status := eval[int](tb, `(async () => (await fetch('/ui/topics/ro/dead/purge-all', {method: 'POST',
		body: new URLSearchParams({confirm: 'yes'})})).status)()`, chromedp.EvalAwaitPromise)
	if status != 403 {
		t.Errorf("POST from the page: %d, want 403", status)
	}
	if st, err := c.Inspector().Stats(context.Background(), "ro"); err != nil || st.Dead != 1 {
		t.Errorf("after the refused purge: %+v %v", st, err)
	}
}
