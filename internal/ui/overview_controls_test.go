package ui_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// seedControls makes five topics of c: "plain", "held" paused until
// until, "stopped" paused until resumed, and "limited" with a rate and a
// concurrency limit, and "capped" with a concurrency limit alone.
func seedControls(t *testing.T, c *delayq.Client, until time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, topic := range []string{"plain", "held", "stopped", "limited", "capped"} {
		send(t, c, delayq.Message{Topic: topic, ID: "m", Body: []byte("x"), Delay: time.Hour})
	}
	if err := c.Admin().Pause(ctx, "held", delayq.PauseOptions{Until: until}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().Pause(ctx, "stopped", delayq.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, "limited", delayq.Limits{Rate: 200, Concurrency: 10}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, "capped", delayq.Limits{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
}

var (
	overviewRowRE = regexp.MustCompile(`(?s)<tr data-topic="([^"]*)">\s*<td>(.*?)</td>`)
	markRE        = regexp.MustCompile(`<span class="[^"]*c-(?:paused|limited)">([^<]*)</span>`)
)

// overviewMarks returns the pause and limits markers in each topic's row
// of the overview page, joined by "; ", by topic.
func overviewMarks(page string) map[string]string {
	out := map[string]string{}
	for _, m := range overviewRowRE.FindAllStringSubmatch(page, -1) {
		var marks []string
		for _, k := range markRE.FindAllStringSubmatch(m[2], -1) {
			marks = append(marks, k[1])
		}
		out[m[1]] = strings.Join(marks, "; ")
	}
	return out
}

// TestOverviewShowsControls checks that the overview marks each paused
// topic with its end and each limited topic with its limits, and leaves
// the others bare; a pause that has ended is no longer marked.
func TestOverviewShowsControls(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	until := time.Now().Add(15 * time.Minute)
	seedControls(t, c, until)
	code, page := f.http().get("/ui/")
	if code != 200 {
		t.Fatalf("GET /ui/: %d", code)
	}
	want := map[string]string{
		"plain":   "",
		"held":    "paused until " + until.UTC().Truncate(time.Millisecond).Add(time.Millisecond).Format("2006-01-02 15:04:05.000Z"),
		"stopped": "paused until resumed",
		"limited": "limited 200/s, 10 at once",
		"capped":  "limited 3 at once",
	}
	got := overviewMarks(page)
	for topic, w := range want {
		g, ok := got[topic]
		if !ok {
			t.Errorf("no row for %s", topic)
			continue
		}
		if topic == "held" {
			// Until is rounded up to the millisecond, unless it is whole.
			if alt := "paused until " + until.UTC().Format("2006-01-02 15:04:05.000Z"); g == alt {
				continue
			}
		}
		if g != w {
			t.Errorf("%s marked %q, want %q", topic, g, w)
		}
	}

	if err := c.Admin().Resume(context.Background(), "stopped"); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(context.Background(), "capped", delayq.Limits{}); err != nil {
		t.Fatal(err)
	}
	_, page = f.http().get("/ui/")
	if got := overviewMarks(page); got["stopped"] != "" || got["capped"] != "" || got["limited"] == "" {
		t.Errorf("after Resume and clearing the limits: %q", got)
	}
}

// TestBrowserControlsOnOverview opens the overview in a browser: the paused
// and limited topics are marked in their rows at a glance, and the marks
// follow a pause and a change of limits made elsewhere on the page's live
// refresh.
func TestBrowserControlsOnOverview(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	seedControls(t, c, time.Now().Add(15*time.Minute))
	tb := f.tab(t)
	tb.open("/ui/")
	mark := func(topic string) string {
		return eval[string](tb, `Array.from(document.querySelectorAll('#topics tr[data-topic="`+topic+`"] .c-paused, #topics tr[data-topic="`+topic+`"] .c-limited')).map(e => e.textContent).join('; ')`)
	}
	if got := mark("held"); !strings.HasPrefix(got, "paused until 20") {
		t.Errorf("held: %q", got)
	}
	for topic, want := range map[string]string{"plain": "", "stopped": "paused until resumed", "limited": "limited 200/s, 10 at once", "capped": "limited 3 at once"} {
		if got := mark(topic); got != want {
			t.Errorf("%s: %q, want %q", topic, got, want)
		}
	}
	// The marks are visible, not only in the document.
	if !eval[bool](tb, `(() => { const r = document.querySelector('#topics tr[data-topic="limited"] .c-limited').getBoundingClientRect(); return r.width > 0 && r.height > 0 })()`) {
		t.Error("the limits mark takes no room on the page")
	}

	if err := c.Admin().Pause(ctx, "plain", delayq.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, "plain", delayq.Limits{Rate: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().Resume(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	tb.waitJS("the live refresh to mark plain and unmark stopped",
		`(() => { const q = s => document.querySelector('#topics tr[data-topic="' + s + '"]');
		  return q('plain') && q('plain').textContent.includes('paused until resumed') && q('plain').textContent.includes('limited 30/m') &&
		    q('stopped') && !q('stopped').querySelector('.c-paused') })()`)
}
