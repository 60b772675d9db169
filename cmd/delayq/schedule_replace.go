package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/delayq/delayq"
)

// scheduleOut is where "delayq schedule add --replace" prints (see
// replaceSchedule).
type scheduleOut struct {
	stdout, stderr io.Writer
	asJSON         bool // --json
}

// replaceSchedule implements "delayq schedule add --replace": it sets s
// and, when it replaced a schedule, prints "replaced" and each field that
// changed (on out.stderr with --json, whose out.stdout is the schedule
// alone). The definition it compares with is read just before the write:
// a change made in between by someone else is replaced too, without being
// shown.
func replaceSchedule(ctx context.Context, client *delayq.Client, topic string, s delayq.Schedule, out scheduleOut) error {
	old, err := client.Inspector().GetSchedule(ctx, topic, s.Name)
	if err != nil && !errors.Is(err, delayq.ErrNotFound) {
		return err
	}
	in, err := client.Admin().SetSchedule(ctx, topic, s)
	if err != nil {
		return err
	}
	report := out.stdout
	if out.asJSON {
		report = out.stderr
	}
	if old != nil {
		changes := scheduleChanges(old, in)
		if len(changes) == 0 {
			fmt.Fprintf(report, "replaced schedule %q of topic %s: no field changed\n", s.Name, topic)
		} else {
			fmt.Fprintf(report, "replaced schedule %q of topic %s:\n", s.Name, topic)
			for _, c := range changes {
				fmt.Fprintf(report, "  %s\n", c)
			}
		}
	}
	if out.asJSON {
		return writeJSON(out.stdout, in)
	}
	return writeSchedules(out.stdout, []delayq.ScheduleInfo{*in})
}

// scheduleChanges lists the fields of a schedule that differ from old to
// cur, each as "field: old -> new", in the order of "schedule add"'s
// flags.
func scheduleChanges(old, cur *delayq.ScheduleInfo) []string {
	var out []string
	diff := func(field, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s: %s -> %s", field, a, b))
		}
	}
	diff("spec", strconv.Quote(old.Spec), strconv.Quote(cur.Spec))
	diff("tz", zoneName(old.TimeZone), zoneName(cur.TimeZone))
	if !bytes.Equal(old.Body, cur.Body) {
		out = append(out, fmt.Sprintf("body: %s -> %s", bodySummary(old.Body), bodySummary(cur.Body)))
	}
	diff("max-attempts", strconv.Itoa(old.MaxAttempts), strconv.Itoa(cur.MaxAttempts))
	diff("policy", string(old.Policy), string(cur.Policy))
	return out
}

// zoneName is a schedule's time zone as the CLI shows it: UTC when unset.
func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// bodySummary shows a body in a line: quoted when it is short UTF-8, its
// size otherwise.
func bodySummary(b []byte) string {
	const maxShown = 40
	if utf8.Valid(b) && len(b) <= maxShown {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("(%d bytes)", len(b))
}
