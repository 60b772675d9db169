package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Spec errors name the schedule and the spec, and say what is wrong.
func TestScheduleSpecErrors(t *testing.T) {
	c, err := New(Options{Addr: "127.0.0.1:1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		s    Schedule
		want []string
	}{
		{Schedule{Name: "report", Spec: "61 * * * *"}, []string{`schedule "report"`, `Schedule.Spec "61 * * * *"`, "61"}},
		{Schedule{Name: "report", Spec: "* * * *"}, []string{`Schedule.Spec "* * * *"`, "expected 5 to 6 fields"}},
		{Schedule{Name: "report", Spec: "@fortnightly"}, []string{`Schedule.Spec "@fortnightly"`, "unrecognized descriptor"}},
		{Schedule{Name: "report", Spec: "@every 500ms"}, []string{`Schedule.Spec "@every 500ms"`, "whole seconds"}},
		{Schedule{Name: "report", Spec: "@every 1.5s"}, []string{`Schedule.Spec "@every 1.5s"`, "whole seconds"}},
		{Schedule{Name: "report", Spec: ""}, []string{`schedule "report"`, `Schedule.Spec "" is empty`}},
		{Schedule{Name: "report", Spec: "0 0 30 2 *"}, []string{`Schedule.Spec "0 0 30 2 *"`, "no occurrence"}},
		{Schedule{Name: "report", Spec: "CRON_TZ=Asia/Tokyo 0 3 * * *"}, []string{"time zone"}},
		{Schedule{Name: "report", Spec: "0 3 * * *", TimeZone: "Mars/Olympus"}, []string{`Schedule.TimeZone "Mars/Olympus"`, "IANA"}},
		{Schedule{Name: "report", Spec: "0 3 * * *", TimeZone: "Local"}, []string{`Schedule.TimeZone "Local"`}},
		{Schedule{Name: "re:port", Spec: "0 3 * * *"}, []string{`schedule name "re:port"`, "[A-Za-z0-9._-]"}},
		{Schedule{Name: "", Spec: "0 3 * * *"}, []string{"schedule name is empty"}},
		{Schedule{Name: "report", Spec: "0 3 * * *", Policy: "some"}, []string{`Schedule.Policy "some"`}},
		{Schedule{Name: "report", Spec: "0 3 * * *", MaxAttempts: -1}, []string{"Schedule.MaxAttempts -1 is negative"}},
	} {
		_, err := c.Admin().SetSchedule(context.Background(), "orders", tc.s)
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || tc.s.Name != "" && tc.s.Name != "re:port" && !errors.As(err, &fe) {
			t.Errorf("%+v: %v, want a FieldError (ErrInvalid)", tc.s, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %q", tc.s, err, w)
			}
		}
	}
	for _, spec := range []string{"*/10 * * * *", "30 */2 * * * *", "@hourly", "@daily", "@every 30s", "@every 1h30m", "0 3 * * MON-FRI"} {
		if _, err := ParseSpec(spec, "Asia/Shanghai", time.Now(), 1); err != nil {
			t.Errorf("spec %q: %v", spec, err)
		}
	}
	// Ids of occurrences are reserved.
	_, err = c.Send(context.Background(), Message{Topic: "orders", ID: "@sched:x:1:2:3", Body: []byte("b")})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("enqueue of a reserved id: %v, want ErrInvalid naming the reservation", err)
	}
}

// Time zones: fields are read in the schedule's zone. Daylight saving
// (America/New_York, 2026): robfig/cron's rules, which docs/schedules.md states.
func TestScheduleTimeZonesAndDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	fmtAll := func(ts []time.Time, loc *time.Location) string {
		var s []string
		for _, x := range ts {
			s = append(s, x.In(loc).Format("01-02T15:04-07:00"))
		}
		return strings.Join(s, " ")
	}
	sh, _ := time.LoadLocation("Asia/Shanghai")
	for _, tc := range []struct {
		spec, tz string
		from     time.Time
		loc      *time.Location
		want     string
	}{
		// 03:00 in Shanghai is 19:00 UTC the day before.
		{"0 3 * * *", "Asia/Shanghai", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC, "01-01T19:00+00:00 01-02T19:00+00:00"},
		{"0 3 * * *", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), sh, "01-01T11:00+08:00 01-02T11:00+08:00"},
		// Spring forward (03-08, 02:00 EST -> 03:00 EDT): a time in the
		// skipped hour does not occur that day.
		{"30 2 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny, "03-09T02:30-04:00 03-10T02:30-04:00"},
		{"0 * * * *", "America/New_York", time.Date(2026, 3, 8, 0, 30, 0, 0, ny), ny, "03-08T01:00-05:00 03-08T03:00-04:00 03-08T04:00-04:00"},
		{"0 0 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny, "03-08T00:00-05:00 03-09T00:00-04:00"},
		// Fall back (11-01, 02:00 EDT -> 01:00 EST): a time in the
		// repeated hour occurs in both passes.
		{"30 1 * * *", "America/New_York", time.Date(2026, 10, 31, 12, 0, 0, 0, ny), ny, "11-01T01:30-04:00 11-01T01:30-05:00 11-02T01:30-05:00"},
		{"0 * * * *", "America/New_York", time.Date(2026, 11, 1, 0, 30, 0, 0, ny), ny, "11-01T01:00-04:00 11-01T01:00-05:00 11-01T02:00-05:00"},
		// @every counts elapsed time, whatever the zone.
		{"@every 1h", "America/New_York", time.Date(2026, 11, 1, 0, 30, 0, 0, ny), ny, "11-01T01:30-04:00 11-01T01:30-05:00 11-01T02:30-05:00"},
	} {
		want := strings.Fields(tc.want)
		ts, err := ParseSpec(tc.spec, tc.tz, tc.from, len(want))
		if err != nil {
			t.Fatalf("%s in %q: %v", tc.spec, tc.tz, err)
		}
		if got := fmtAll(ts, tc.loc); got != tc.want {
			t.Errorf("%s in %q from %v:\n got %s\nwant %s", tc.spec, tc.tz, tc.from, got, tc.want)
		}
	}
}
