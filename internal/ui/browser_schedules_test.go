package ui_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
)

// TestBrowserSchedules lists a topic's schedules with their next
// occurrences, pauses, resumes and deletes one, each confirmed in a
// dialog, and checks Redis after each.
func TestBrowserSchedules(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	for _, s := range []delayq.Schedule{
		{Name: "report", Spec: "0 3 * * *", TimeZone: "Asia/Shanghai", Body: []byte("daily report")},
		{Name: "unpaid", Spec: "*/10 * * * *", Body: []byte("check unpaid orders"), Policy: delayq.PolicyAll},
	} {
		if _, err := c.Admin().SetSchedule(ctx, "orders", s); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *delayq.ScheduleInfo {
		t.Helper()
		s, err := c.Inspector().GetSchedule(ctx, "orders", name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	tb := f.tab(t)
	tb.open("/ui/topics/orders")
	tb.click(`#tabs a[href$="/schedules"]`)
	tb.waitJS("the schedules page", `document.getElementById('schedules')`)
	if got := tb.text("#schedules-total"); got != "2" {
		t.Errorf("total %q", got)
	}
	next := tb.text(`tr[data-name="report"] .next`)
	if n := strings.Count(next, " 19:00:00"); n != 3 {
		t.Errorf("report's next occurrences %q: want three at 19:00 UTC (03:00 in Shanghai)", next)
	}
	if got := tb.text(`tr[data-name="unpaid"] .preview`); got != "check unpaid orders" {
		t.Errorf("body preview %q", got)
	}
	tb.act(`tr[data-name="report"] .pause-form button`, "Paused report.")
	if !get("report").Paused || tb.text(`tr[data-name="report"] .sched-state`) != "paused" {
		t.Fatal("not paused")
	}
	if got := tb.text(`tr[data-name="report"] .next`); got != "none" {
		t.Errorf("a paused schedule's next occurrences: %q", got)
	}
	tb.act(`tr[data-name="report"] .resume-form button`, "Resumed report.")
	if get("report").Paused {
		t.Fatal("not resumed")
	}
	tb.act(`tr[data-name="unpaid"] .delete-form button`, "Deleted unpaid.")
	if _, err := c.Inspector().GetSchedule(ctx, "orders", "unpaid"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if eval[int](tb, `document.querySelectorAll('#schedules tbody tr').length`) != 1 {
		t.Error("the list still shows the deleted schedule")
	}
	d := tb.dialogsSeen()
	if len(d) != 3 || !strings.Contains(d[2], "Delete schedule unpaid of topic orders") {
		t.Errorf("dialogs: %q", d)
	}
}
