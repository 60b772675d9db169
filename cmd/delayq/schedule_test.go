package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/delayq/delayq"
)

// "delayq schedule" usage errors (exit 2) and spec errors (exit 1, the
// library's message naming the schedule and the spec), all before any
// connection is made.
func TestScheduleCommandErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		usage bool
		want  []string
	}{
		{"no subcommand", []string{"schedule"}, true, []string{"missing subcommand"}},
		{"unknown subcommand", []string{"schedule", "run"}, true, []string{`unknown subcommand "run"`}},
		{"add without spec", []string{"schedule", "add", "--topic", "t", "--name", "n"}, true, []string{"--name and --spec are required"}},
		{"add body and body-file", []string{"schedule", "add", "--topic", "t", "--name", "n", "--spec", "@hourly", "--body", "x", "--body-file", "/dev/null"}, true, []string{"--body and --body-file"}},
		{"pause without name", []string{"schedule", "pause", "--topic", "t"}, true, []string{"--name is required"}},
		{"missing topic", []string{"schedule", "list"}, true, []string{"--topic is required"}},
		{"bad spec", []string{"schedule", "add", "--addr", "127.0.0.1:1", "--topic", "t", "--name", "report", "--spec", "61 * * * *"}, true, []string{`invalid value "61 * * * *" for flag --spec: is not a cron spec`, "above maximum"}},
		{"bad zone", []string{"schedule", "add", "--addr", "127.0.0.1:1", "--topic", "t", "--name", "report", "--spec", "@daily", "--tz", "Mars/Base"}, true, []string{`invalid value "Mars/Base" for flag --tz: is not an IANA zone name`}},
		{"bad policy", []string{"schedule", "add", "--addr", "127.0.0.1:1", "--topic", "t", "--name", "report", "--spec", "@daily", "--policy", "some"}, true, []string{`invalid value "some" for flag --policy: is not a policy`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runArgs(t, tt.args...)
			var ue *usageError
			if got := errors.As(err, &ue); got != tt.usage {
				t.Fatalf("err = %v (%T), usage error %v, want %v", err, err, got, tt.usage)
			}
			if !tt.usage && !errors.Is(err, delayq.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if out, _, err := runArgs(t, "schedule", "add", "-h"); err != nil || !strings.Contains(out, "--spec") && !strings.Contains(out, "-spec") {
		t.Errorf("schedule add -h: %v\n%s", err, out)
	}
}
