package ui_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/ui"
)

// runConsumer runs a consumer of topic that acks everything until the end
// of the test.
func runConsumer(t *testing.T, c *delayq.Client, topic, id string) {
	t.Helper()
	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: topic, ID: id, Lease: 2 * time.Second, ShutdownTimeout: time.Second},
		func(context.Context, *delayq.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	testenv.WaitFor(t, 10*time.Second, "the consumer to own its partitions", func() bool { return len(k.Stats().Owned) > 0 })
}

// TestBrowserOverview signs in with the token, checks the session
// cookie's flags, reads the overview's counts, sees them change without
// a reload when messages arrive, and opens a topic page: its partitions,
// members, chart and the "worker only" figures of a standalone dashboard,
// and the partition count, with a change of it running on another topic.
// $DELAYQ_UI_DOCS_SCREENSHOT names a file for the README's screenshot.
func TestBrowserOverview(t *testing.T) {
	f := newFixture(t, ui.Options{Token: "s3cret", Refresh: 500 * time.Millisecond})
	now := time.Now()
	orders, reminders, payments := f.client(16), f.client(8), f.client(4)
	var msgs []delayq.Message
	for i := range 600 {
		msgs = append(msgs, delayq.Message{Topic: "orders", ID: fmt.Sprintf("order-%d", i), Body: []byte(fmt.Sprintf(`{"order":%d}`, i)),
			At: now.Add(time.Minute + time.Duration(i*i%3600)*time.Second)})
	}
	send(t, orders, msgs...)
	send(t, payments, delayq.Message{Topic: "payments", ID: "pay-1", Body: []byte("{}"), At: now.Add(-95 * time.Second)},
		delayq.Message{Topic: "payments", ID: "pay-2", Body: []byte("{}")})
	kill(t, reminders, "reminders", func(id string) string { return "webhook: 503 Service Unavailable" },
		delayq.Message{ID: "r-1", Body: []byte("call home")}, delayq.Message{ID: "r-2", Body: []byte("call work")})
	send(t, reminders, delayq.Message{Topic: "reminders", ID: "r-3", Body: []byte("x"), Delay: 30 * time.Minute})
	runConsumer(t, orders, "orders", "worker-a")

	tb := f.tab(t)
	tb.open("/ui/")
	tb.waitJS("the sign-in form", `location.pathname === '/ui/login' && document.getElementById('token')`)
	tb.do(chromedp.SendKeys(chromedp.CSS("#token"), "s3cret"), chromedp.Click(chromedp.CSS("#login-btn")))
	tb.waitJS("the overview", `location.pathname === '/ui/' && document.getElementById('topics')`)
	cookies, err := chromedp.Call(tb.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cookies.Cookies {
		if c.Name == "dq_session" {
			found = true
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/ui/" {
				t.Errorf("session cookie: httpOnly %v sameSite %q path %q", c.HTTPOnly, c.SameSite, c.Path)
			}
		}
	}
	if !found {
		t.Errorf("no session cookie in %v", cookies.Cookies)
	}
	if eval[string](tb, `document.cookie`) != "" {
		t.Errorf("a script can read the cookies")
	}
	cell := func(topic, class string) string { return tb.text(fmt.Sprintf(`tr[data-topic=%q] .%s`, topic, class)) }
	for _, c := range []struct{ topic, class, want string }{
		{"orders", "c-scheduled", "600"}, {"orders", "c-consumers", "1"}, {"orders", "c-owned", "16"}, {"orders", "c-unowned", "0"},
		{"reminders", "c-dead", "2"}, {"reminders", "c-scheduled", "1"}, {"payments", "c-scheduled", "2"},
	} {
		if got := cell(c.topic, c.class); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.topic, c.class, got, c.want)
		}
	}
	if lag := cell("payments", "c-lag"); !strings.HasPrefix(lag, "1m3") {
		t.Errorf("payments has overdue messages and no consumer, lag %q", lag)
	}
	tb.screenshot("overview")
	if p := os.Getenv("DELAYQ_UI_DOCS_SCREENSHOT"); p != "" {
		tb.do(chromedp.EmulateViewport(1100, 436))
		if err := os.WriteFile(p, tb.screenshot("overview-docs"), 0o644); err != nil {
			t.Error(err)
		}
		tb.do(chromedp.EmulateViewport(1280, 860))
	}

	// Live refresh: the counts change, the page stays (its marker survives).
	eval[bool](tb, "window.dqSamePage = true")
	send(t, orders, delayq.Message{Topic: "orders", ID: "late-comer", Body: []byte("x"), Delay: time.Hour})
	tb.waitJS("the live refresh", `window.dqSamePage && document.querySelector('tr[data-topic="orders"] .c-scheduled').textContent === '601'`)

	tb.click(`tr[data-topic="orders"] a`)
	tb.waitJS("the topic page", `document.getElementById('partitions')`)
	if n := eval[int](tb, `document.querySelectorAll('#partitions tbody tr').length`); n != 16 {
		t.Errorf("%d partition rows, want 16", n)
	}
	if got := tb.text(`tr[data-member="worker-a"] td:nth-child(3)`); got != "16" {
		t.Errorf("worker-a owns %q partitions, want 16", got)
	}
	if n := eval[int](tb, `document.querySelectorAll('#due-chart rect.bar').length`); n < 40 {
		t.Errorf("%d bars in the chart", n)
	}
	if !strings.Contains(tb.text("#figures-none"), "served by a worker only") {
		t.Errorf("standalone figures: %q", tb.text("#figures-none"))
	}
	if got := tb.text("#partition-count"); got != "16 partitions" {
		t.Errorf("partition count %q, want 16 partitions", got)
	}
	tb.screenshot("topic")

	// A change of the count shows on the topic page, with the partitions
	// of both counts (no consumer runs payments: the change goes on).
	if _, err := payments.Admin().SetPartitions(context.Background(), "payments", 8, delayq.PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.open("/ui/topics/payments")
	tb.waitJS("the topic page of payments", `document.getElementById('partitions')`)
	if got := tb.text("#partition-count"); got != "4 partitions, changing to 8" {
		t.Errorf("partition count during a change %q, want \"4 partitions, changing to 8\"", got)
	}
	if n := eval[int](tb, `document.querySelectorAll('#partitions tbody tr').length`); n != 8 {
		t.Errorf("%d partition rows during a change from 4 to 8, want 8", n)
	}
}

// TestBrowserMessageActions looks a message up from the overview, reads
// its state, due time and body, reschedules it, runs it now and deletes
// it, each confirmed in a dialog, and checks each result in Redis; a
// dismissed dialog changes nothing.
func TestBrowserMessageActions(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	send(t, c, delayq.Message{Topic: "jobs", ID: "job-42", Body: []byte(`{"order":42}`), Delay: time.Hour})
	tb := f.tab(t)
	tb.open("/ui/")
	tb.do(chromedp.SendKeys(chromedp.CSS("#lookup-id"), "job-42"), chromedp.Click(chromedp.CSS("#lookup-btn")))
	tb.waitJS("the message page", `document.getElementById('msg-state')`)
	if got := tb.text("#msg-state"); got != "scheduled" {
		t.Errorf("state %q", got)
	}
	if got := tb.text("#body-text"); got != `{"order":42}` {
		t.Errorf("body %q", got)
	}
	if got := tb.text("#msg-attempts"); got != "0" {
		t.Errorf("attempts %q", got)
	}

	tb.do(chromedp.SendKeys(chromedp.CSS("#reschedule-when"), "2h"))
	tb.act("#reschedule-btn", "job-42 is due at")
	in, err := c.Get(ctx, "jobs", "job-42")
	if err != nil || in.Due.Sub(time.Now().Add(2*time.Hour)).Abs() > time.Minute {
		t.Fatalf("after reschedule: %+v %v", in, err)
	}

	tb.setAccept(false)
	eval[bool](tb, "window.dqSamePage = true")
	tb.click("#delete-btn")
	time.Sleep(300 * time.Millisecond)
	if !eval[bool](tb, "window.dqSamePage === true") {
		t.Errorf("a dismissed dialog submitted the form")
	}
	if _, err := c.Get(ctx, "jobs", "job-42"); err != nil {
		t.Fatalf("a dismissed delete deleted: %v", err)
	}
	tb.setAccept(true)

	tb.act("#run-btn", "job-42 is due now")
	if in, err := c.Get(ctx, "jobs", "job-42"); err != nil || time.Until(in.Due) > time.Second {
		t.Fatalf("after run now: %+v %v", in, err)
	}
	tb.act("#delete-btn", "Deleted job-42.")
	if _, err := c.Get(ctx, "jobs", "job-42"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if tb.text("#not-found") == "" {
		t.Error("the page does not say the message is gone")
	}
	d := tb.dialogsSeen()
	if len(d) != 4 || !strings.Contains(d[0], "Reschedule message job-42") || !strings.Contains(d[3], "Delete message job-42") {
		t.Errorf("dialogs: %q", d)
	}
}
