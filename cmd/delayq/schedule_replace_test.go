package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// "schedule add" refuses a name in use, naming the schedule and the
// topic and pointing at --replace, and changes nothing; with --replace it
// says "replaced" and lists each field that changed. "schedule list"
// shows the zone UTC for a schedule without one, and the next occurrence
// in the schedule's zone and in UTC; a missing schedule is named.
func TestScheduleAddReplaceCLI(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	base := []string{"--addr", env.Backends[0], "--topic", "cli-sched"}
	sched := func(args ...string) (string, string, error) {
		return runArgs(t, append(append([]string{"schedule", args[0]}, base...), args[1:]...)...)
	}
	if _, stderr, err := sched("add", "--name", "daily", "--spec", "0 9 * * *", "--tz", "America/New_York", "--max-attempts", "3"); err != nil {
		t.Fatalf("add: %v\n%s", err, stderr)
	}
	_, _, err := sched("add", "--name", "daily", "--spec", "0 9 * * *")
	if !errors.Is(err, delayq.ErrExists) {
		t.Fatalf("add of an existing name: %v, want ErrExists", err)
	}
	for _, w := range []string{`schedule "daily" of topic cli-sched exists already`, "--replace"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	out, _, err := sched("list")
	if err != nil || !strings.Contains(out, "America/New_York") {
		t.Fatalf("after a refused add the schedule changed: %v\n%s", err, out)
	}
	// New York's 09:00 is 13:00 or 14:00 UTC, whichever the date's offset.
	if !regexp.MustCompile(`T09:00:00.000-0[45]:00\s+\S+T1[34]:00:00.000Z`).MatchString(out) {
		t.Errorf("list does not show the next occurrence in the zone and in UTC:\n%s", out)
	}

	out, stderr, err := sched("add", "--name", "daily", "--spec", "0 9 * * *", "--replace")
	if err != nil {
		t.Fatalf("add --replace: %v\n%s", err, stderr)
	}
	for _, w := range []string{`replaced schedule "daily" of topic cli-sched:`, "tz: America/New_York -> UTC", "max-attempts: 3 -> 0"} {
		if !strings.Contains(out, w) {
			t.Errorf("add --replace does not say %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "spec:") || strings.Contains(out, "policy:") {
		t.Errorf("add --replace lists a field that did not change:\n%s", out)
	}
	out, _, err = sched("list")
	if err != nil || !regexp.MustCompile(`daily\s+0 9 \* \* \*\s+UTC\s+skip\s+active\s+\S+T09:00:00.000Z\s+\S+T09:00:00.000Z`).MatchString(out) {
		t.Errorf("list of a schedule in UTC: %v\n%s", err, out)
	}
	if out, _, err := sched("add", "--name", "fresh", "--spec", "@hourly", "--replace"); err != nil || strings.Contains(out, "replaced") {
		t.Errorf("add --replace of a new name: %v\n%s", err, out)
	}
	if _, _, err := sched("pause", "--name", "nope"); !errors.Is(err, delayq.ErrNotFound) || !strings.Contains(err.Error(), `schedule "nope" of topic cli-sched not found`) {
		t.Errorf("pause of a missing schedule: %v", err)
	}
}

// The schedule add lines of docs/schedules.md, run as written, in order:
// the --replace line moves the time and keeps the body, max attempts,
// zone and policy.
func TestScheduleDocsReplaceExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/schedules.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "delayq schedule add ") {
			l, _, _ = strings.Cut(l, " # ")
			lines = append(lines, shellWords(t, l)[1:])
		}
	}
	if len(lines) != 2 || !slices.Contains(lines[1], "--replace") {
		t.Fatalf("docs/schedules.md: want an add and a replace, got %q", lines)
	}
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	for _, args := range lines {
		if _, stderr, err := runArgs(t, append(args, "--addr", env.Backends[0])...); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, stderr)
		}
	}
	c, err := delayq.New(delayq.Options{Addr: env.Backends[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Inspector().GetSchedule(context.Background(), "reports", "daily")
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec != "0 4 * * *" || string(s.Body) != `{"report":"sales"}` || s.MaxAttempts != 3 || s.TimeZone != "Asia/Shanghai" || s.Policy != delayq.PolicySkip {
		t.Errorf("after the docs' replace: %+v", s.Schedule)
	}
}

// shellWords splits a line of sh as the docs write them: words separated
// by spaces, with '...' and "..." quoting (no escapes, no expansions).
func shellWords(t *testing.T, line string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %q", line)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
