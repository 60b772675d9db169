package ui_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/ui"
)

// TestBrowserDeleteTopic deletes a topic from its page: confirmed in a
// dialog, a topic that holds a message is refused and stays, with a flash
// that says why; with the box ticked it is deleted, the overview says so
// and no longer lists it, and the library finds no such topic.
func TestBrowserDeleteTopic(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	send(t, c, delayq.Message{Topic: "ordres", ID: "m", Body: []byte("x"), Delay: time.Hour})
	send(t, c, delayq.Message{Topic: "orders", ID: "m", Body: []byte("x"), Delay: time.Hour})

	tb := f.tab(t)
	tb.open("/ui/topics/ordres")
	tb.act("#delete-topic-btn", "it holds 1 message (1 scheduled, 0 in flight, 0 dead)")
	if _, err := c.Get(ctx, "ordres", "m"); err != nil {
		t.Fatalf("a refused delete lost the message: %v", err)
	}
	tb.click("#delete-topic-force")
	tb.act("#delete-topic-btn", "Deleted topic ordres (1 scheduled, 0 in flight, 0 dead, 0 schedules).")
	if path := eval[string](tb, `location.pathname`); path != "/ui/" {
		t.Errorf("after the delete the browser is at %s, want the overview", path)
	}
	if eval[bool](tb, `document.body.textContent.includes('/ui/topics/ordres')`) || eval[int](tb, `document.querySelectorAll('a[href="/ui/topics/ordres"]').length`) != 0 {
		t.Error("the overview still links the deleted topic")
	}
	if eval[int](tb, `document.querySelectorAll('a[href="/ui/topics/orders"]').length`) == 0 {
		t.Error("the overview lost the other topic")
	}
	// Another client sees the delete once its layout is a second old.
	testenv.WaitFor(t, 5*time.Second, "the library to find no topic ordres", func() bool {
		_, err := c.Inspector().Stats(ctx, "ordres")
		return errors.Is(err, delayq.ErrNoTopic)
	})
	if _, err := c.Get(ctx, "orders", "m"); err != nil {
		t.Errorf("the other topic's message: %v", err)
	}
	d := tb.dialogsSeen()
	if len(d) != 2 || !strings.Contains(d[0], "Delete topic ordres?") {
		t.Errorf("dialogs: %q", d)
	}
}

// TestBrowserPauseTopic pauses a topic from its page for a duration, then
// resumes it, each confirmed in a dialog: the page says until when, and
// the library reads the pause; a read-only dashboard shows neither button.
func TestBrowserPauseTopic(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	send(t, c, delayq.Message{Topic: "orders", ID: "m", Body: []byte("x"), Delay: time.Hour})

	tb := f.tab(t)
	tb.open("/ui/topics/orders")
	if eval[int](tb, `document.querySelectorAll('#pause-state, #resume-form').length`) != 0 {
		t.Error("a topic not paused shows a pause or a resume button")
	}
	before := time.Now()
	tb.do(chromedp.SendKeys(chromedp.CSS("#pause-for"), "15m"))
	tb.act("#pause-btn", "Paused orders until ")
	st, err := c.Inspector().Stats(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Pause.Paused || st.Pause.PausedUntil == nil || st.Pause.PausedUntil.Before(before.Add(15*time.Minute)) ||
		st.Pause.PausedUntil.After(time.Now().Add(15*time.Minute+time.Millisecond)) {
		t.Fatalf("after Pause for 15m: %+v", st.Pause)
	}
	if got := tb.text("#pause-state"); !strings.HasPrefix(got, "Paused until ") {
		t.Errorf("pause state %q", got)
	}
	tb.act("#resume-btn", "Resumed orders.")
	if st, err = c.Inspector().Stats(ctx, "orders"); err != nil || st.Pause.Paused {
		t.Fatalf("after Resume: %+v %v", st.Pause, err)
	}
	if eval[int](tb, `document.querySelectorAll('#pause-state').length`) != 0 {
		t.Error("the page still says paused after Resume")
	}
	tb.act("#pause-btn", "Paused orders until resumed.")
	if st, err = c.Inspector().Stats(ctx, "orders"); err != nil || !st.Pause.Paused || st.Pause.PausedUntil != nil {
		t.Fatalf("after Pause with no end: %+v %v", st.Pause, err)
	}
	if d := tb.dialogsSeen(); len(d) != 3 || !strings.Contains(d[0], "Pause topic orders?") || !strings.Contains(d[1], "Resume topic orders?") {
		t.Errorf("dialogs: %q", d)
	}

	ro := newFixture(t, ui.Options{ReadOnly: true})
	send(t, ro.client(4), delayq.Message{Topic: "orders", ID: "m", Body: []byte("x"), Delay: time.Hour})
	rt := ro.tab(t)
	rt.open("/ui/topics/orders")
	if n := eval[int](rt, `document.querySelectorAll('#pause-form, #resume-form').length`); n != 0 {
		t.Errorf("read-only: %d pause or resume forms shown", n)
	}
}

// TestBrowserLimitsTopic sets a topic's flow limits from its page, each
// change confirmed in a dialog: the library reads them, the page shows
// them with what runs against them (refreshed live) and fills the form
// with them, so a change of one field keeps the others; a bad rate is
// refused, writing nothing; Clear removes them. A read-only dashboard
// shows the limits but no form.
func TestBrowserLimitsTopic(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	send(t, c, delayq.Message{Topic: "orders", ID: "m", Body: []byte("x"), Delay: time.Hour})
	limitsAre := func(want delayq.Limits) {
		t.Helper()
		if got, err := c.Inspector().Limits(ctx, "orders"); err != nil || got != want {
			t.Fatalf("Inspector.Limits: %+v, %v; want %+v", got, err, want)
		}
	}

	tb := f.tab(t)
	tb.open("/ui/topics/orders")
	if eval[int](tb, `document.querySelectorAll('#limits-state, #limits-clear-form').length`) != 0 {
		t.Error("a topic without limits shows limits or a Clear button")
	}
	tb.do(chromedp.SendKeys(chromedp.CSS("#limits-rate"), "200/s"), chromedp.SendKeys(chromedp.CSS("#limits-concurrency"), "10"))
	tb.act("#limits-btn", "Limits of orders: rate 200/s burst 20 (default) concurrency 10.")
	limitsAre(delayq.Limits{Rate: 200, Concurrency: 10})
	if got := tb.text("#limits-rate-state"); got != "rate 200/s (burst 20, the default) — 0 started in the last second" {
		t.Errorf("rate shown: %q", got)
	}
	if got := tb.text("#limits-concurrency-state"); got != "concurrency 10 — 0 running" {
		t.Errorf("concurrency shown: %q", got)
	}

	// What runs against the cap shows on the next live refresh: a
	// consumer running three deliveries holds three of its slots.
	stop := runBlocked(t, c, "orders", 3)
	defer stop()
	tb.waitJS("3 running", `document.getElementById('limits-concurrency-state').textContent.includes('concurrency 10 — 3 running')`)

	// The form holds the limits: a change of the burst keeps the rest.
	if v := eval[string](tb, `document.getElementById('limits-rate').value + '|' + document.getElementById('limits-burst').value + '|' + document.getElementById('limits-concurrency').value`); v != "200/s||10" {
		t.Errorf("form filled with %q, want 200/s||10", v)
	}
	tb.do(chromedp.SendKeys(chromedp.CSS("#limits-burst"), "50"))
	tb.act("#limits-btn", "Limits of orders: rate 200/s burst 50 concurrency 10.")
	limitsAre(delayq.Limits{Rate: 200, Burst: 50, Concurrency: 10})
	if got := tb.text("#limits-rate-state"); !strings.HasPrefix(got, "rate 200/s (burst 50) — ") {
		t.Errorf("rate shown: %q", got)
	}

	tb.do(chromedp.Clear(chromedp.CSS("#limits-rate")), chromedp.SendKeys(chromedp.CSS("#limits-rate"), "fast"))
	tb.act("#limits-btn", `rate "fast"`)
	limitsAre(delayq.Limits{Rate: 200, Burst: 50, Concurrency: 10})

	tb.act("#limits-clear-btn", "Removed the flow limits of orders.")
	limitsAre(delayq.Limits{})
	if eval[int](tb, `document.querySelectorAll('#limits-state, #limits-clear-form').length`) != 0 {
		t.Error("the page still shows limits after Clear")
	}
	if d := tb.dialogsSeen(); len(d) != 4 || !strings.Contains(d[0], "Set the flow limits of topic orders?") ||
		!strings.Contains(d[3], "Remove every flow limit of topic orders?") {
		t.Errorf("dialogs: %q", d)
	}

	ro := newFixture(t, ui.Options{ReadOnly: true})
	rc := ro.client(4)
	send(t, rc, delayq.Message{Topic: "orders", ID: "m", Body: []byte("x"), Delay: time.Hour})
	if err := rc.Admin().SetLimits(ctx, "orders", delayq.Limits{Rate: 0.5}); err != nil {
		t.Fatal(err)
	}
	rt := ro.tab(t)
	rt.open("/ui/topics/orders")
	if got := rt.text("#limits-rate-state"); got != "rate 30/m (burst 1, the default) — 0 started in the last second" {
		t.Errorf("read-only: rate shown %q", got)
	}
	if n := eval[int](rt, `document.querySelectorAll('#limits-form, #limits-clear-form').length`); n != 0 {
		t.Errorf("read-only: %d limits forms shown", n)
	}
}

// runBlocked sends k messages due now to topic and runs a consumer whose
// handler holds each delivery until stop, which waits for the consumer
// to end.
func runBlocked(t *testing.T, c *delayq.Client, topic string, k int) (stop func()) {
	t.Helper()
	var msgs []delayq.Message
	for i := range k {
		msgs = append(msgs, delayq.Message{Topic: topic, ID: fmt.Sprintf("held-%d", i), Body: []byte("x")})
	}
	send(t, c, msgs...)
	release := make(chan struct{})
	cons, err := c.NewConsumer(delayq.ConsumerOptions{
		Topic: topic, Lease: time.Second, PollInterval: 20 * time.Millisecond,
		ShutdownTimeout: time.Second, ChangePoll: 20 * time.Millisecond,
	}, func(ctx context.Context, d *delayq.Delivery) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	return func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := cons.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	}
}
