package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// TestSendDuplicateUsage: --on-duplicate takes exactly reject, replace or
// debounce, and --max-wait needs debounce and a duration of 0 or more;
// each mistake is a usage error naming the flag and its value, found
// before any connection.
func TestSendDuplicateUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in the error
	}{
		{[]string{"--max-wait", "30m"}, []string{"--max-wait 30m without --on-duplicate", "debounce"}},
		{[]string{"--on-duplicate", "replace", "--max-wait", "30m"}, []string{"--max-wait 30m with --on-duplicate replace"}},
		{[]string{"--on-duplicate", "reject", "--max-wait", "1s"}, []string{"--max-wait 1s with --on-duplicate reject"}},
		{[]string{"--stdin", "--max-wait", "5m"}, []string{"--max-wait 5m without --on-duplicate"}},
		{[]string{"--on-duplicate", "debounce", "--max-wait", "-1m"}, []string{`"-1m"`, "--max-wait", "negative"}},
		{[]string{"--on-duplicate", "debounce", "--max-wait", "soon"}, []string{`"soon"`, "max-wait"}},
		{[]string{"--on-duplicate", "merge"}, []string{`"merge"`, "on-duplicate", "want reject, replace or debounce"}},
		{[]string{"--on-duplicate", "Replace"}, []string{`"Replace"`, "on-duplicate"}},
		{[]string{"--on-duplicate", ""}, []string{`""`, "on-duplicate"}},
	} {
		_, _, err := runArgs(t, append([]string{"send", "--addr", "127.0.0.1:1", "--topic", "t", "--id", "x"}, tc.args...)...)
		checkUsageError(t, append([]string{"send"}, tc.args...), err, tc.want...)
	}
}

func TestSentLine(t *testing.T) {
	due := time.Date(2030, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	for _, tc := range []struct {
		r    delayq.SendResult
		want string
	}{
		{delayq.SendResult{ID: "a", Due: due, Outcome: delayq.OutcomeCreated}, "a"},
		{delayq.SendResult{ID: "a", Due: due, Outcome: delayq.OutcomeReplaced}, "a replaced, due 2030-01-02T03:04:05.678Z"},
		{delayq.SendResult{ID: "a b", Due: due, Outcome: delayq.OutcomeDebounced}, "a b debounced, due 2030-01-02T03:04:05.678Z"},
	} {
		if got := sentLine(tc.r); got != tc.want {
			t.Errorf("sentLine(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

// sentRE reads a line of send for a message replaced or debounced.
var sentRE = regexp.MustCompile(`^(\S+) (replaced|debounced), due (\S+)$`)

// TestSendDuplicates: send --on-duplicate replaces, then debounces a
// message within --max-wait, and says so with the due stored; a plain
// send of an id that exists is refused (exit 1) and of a new id prints
// the id alone. With --stdin the flags apply to the lines that do not set
// on_duplicate or max_wait themselves.
func TestSendDuplicates(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	send := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"send", "--addr", addr, "--topic", "dups"}, args...), strings.NewReader(stdin), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	// changed checks line, a line of send, for id, outcome and a due
	// about want.
	changed := func(line, id, outcome string, want time.Time) {
		t.Helper()
		m := sentRE.FindStringSubmatch(line)
		if m == nil || m[1] != id || m[2] != outcome {
			t.Errorf("send printed %q, want \"%s %s, due TIME\"", line, id, outcome)
			return
		}
		due, err := time.Parse(time.RFC3339Nano, m[3])
		if err != nil || due.Sub(want) < -5*time.Second || due.Sub(want) > 5*time.Second {
			t.Errorf("send printed %q: due %s, want about %s (%v)", line, m[3], want.UTC().Format(time.RFC3339), err)
		}
	}

	if out, _, err := send("", "--id", "k", "--delay", "30m", "--body", "one"); err != nil || out != "k\n" {
		t.Fatalf("send k: %q, %v", out, err)
	}
	_, _, err := send("", "--id", "k", "--delay", "30m", "--body", "again")
	var ue *usageError
	if !errors.Is(err, delayq.ErrDuplicate) || errors.As(err, &ue) {
		t.Errorf("send k again: %v, want ErrDuplicate (exit 1)", err)
	}
	replaced := time.Now()
	out, _, err := send("", "--id", "k", "--delay", "2h", "--body", "two", "--on-duplicate", "replace")
	if err != nil {
		t.Fatal(err)
	}
	changed(strings.TrimSuffix(out, "\n"), "k", "replaced", replaced.Add(2*time.Hour))
	// The replace opened a window: the debounce is due an hour after it.
	out, _, err = send("", "--id", "k", "--delay", "3h", "--on-duplicate", "debounce", "--max-wait", "1h")
	if err != nil {
		t.Fatal(err)
	}
	changed(strings.TrimSuffix(out, "\n"), "k", "debounced", replaced.Add(time.Hour))
	if out, _, err := send("", "--id", "k2", "--delay", "1h", "--on-duplicate", "debounce"); err != nil || out != "k2\n" {
		t.Errorf("send k2 --on-duplicate debounce, a new id: %q, %v; want the id alone", out, err)
	}

	lines := strings.Join([]string{
		`{"id":"k","delay":"3h"}`,                             // 1 debounced within the flags' hour
		`{"id":"k","delay":"5m","on_duplicate":"replace"}`,    // 2 replaced: the line's policy
		`{"id":"k","delay":"3h","max_wait":"0s"}`,             // 3 debounced, no bound: the line's max_wait
		`{"id":"k","on_duplicate":"reject"}`,                  // 4 rejected: the line's policy
		`{"id":"new1","delay":"1h"}`,                          // 5 created
		`{"id":"k","on_duplicate":"replace","max_wait":"1m"}`, // 6 a max_wait without a debounce
	}, "\n")
	start := time.Now()
	out, errOut, err := send(lines, "--stdin", "--on-duplicate", "debounce", "--max-wait", "1h")
	if err == nil || err.Error() != "2 of 6 messages rejected" {
		t.Errorf("send --stdin: %v, want 2 of 6 rejected", err)
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != 4 {
		t.Fatalf("send --stdin printed %q, want 4 lines", out)
	}
	changed(got[0], "k", "debounced", replaced.Add(time.Hour))
	changed(got[1], "k", "replaced", start.Add(5*time.Minute))
	changed(got[2], "k", "debounced", start.Add(3*time.Hour))
	if got[3] != "new1" {
		t.Errorf("line 5 printed %q, want the id alone", got[3])
	}
	for _, w := range []string{`line 4: id "k": duplicate`, `line 6: id "k": max_wait bounds a debounce window, and on_duplicate is "replace"`} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}
