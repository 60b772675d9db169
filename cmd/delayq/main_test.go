package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// runArgs runs the command line args with empty stdin and returns its
// stdout, stderr and error.
func runArgs(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// checkUsageError fails t unless err is a usage error (exit 2) whose
// message says each of want; cmd names the command line in the failure.
func checkUsageError(t *testing.T, cmd any, err error, want ...string) {
	t.Helper()
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Errorf("%v: err = %v (%T), want a usage error", cmd, err, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v: error %q does not say %q", cmd, err, w)
		}
	}
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, _, err := runArgs(t, args...)
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			for _, c := range []string{"send", "sub", "get", "delete", "reschedule", "stats", "dead", "topic", "worker", "bench", "doctor", "version"} {
				if !strings.Contains(stdout, "\t"+c+" ") {
					t.Errorf("usage does not list %q:\n%s", c, stdout)
				}
			}
		})
	}
}

// Bare delayq and an unknown command are usage errors (exit 2) that say
// so first, followed by a one-line hint, not the whole help.
func TestRunNoOrUnknownCommand(t *testing.T) {
	for _, args := range [][]string{nil, {"frob"}, {"frob", "--topic", "t"}} {
		stdout, stderr, err := runArgs(t, args...)
		var ue *usageError
		if !errors.As(err, &ue) || stdout != "" || stderr != "" {
			t.Errorf("%q: err %v (%T), stdout %q, stderr %q; want a usage error and nothing printed by run", args, err, err, stdout, stderr)
			continue
		}
		want := "no command"
		if len(args) > 0 {
			want = `unknown command "frob"`
		}
		if err.Error() != want || strings.Count(ue.hint, "\n") > 1 || !strings.Contains(ue.hint, "delayq help") {
			t.Errorf("%q: error %q, hint %q; want %q and a short hint", args, err, ue.hint, want)
		}
	}
}

func TestRunCommandHelp(t *testing.T) {
	tests := []struct {
		args  []string
		flags []string // flags the help must list
	}{
		{[]string{"send", "-h"}, []string{"-topic", "-addr", "-password", "-namespace", "-partitions", "-log-level", "-id", "-delay", "-at", "-body", "-body-file", "-stdin", "-batch"}},
		{[]string{"sub", "--help"}, []string{"-concurrency", "-count", "-timeout", "-lease", "-handler-timeout", "-poll", "-max-attempts", "-fail-attempts", "-fail"}},
		{[]string{"get", "-h"}, []string{"-id", "-topic"}},
		{[]string{"delete", "-h"}, []string{"-id"}},
		{[]string{"reschedule", "-h"}, []string{"-id", "-delay", "-at"}},
		{[]string{"stats", "-h"}, []string{"-json"}},
		{[]string{"dead", "list", "-h"}, []string{"-limit", "-json"}},
		{[]string{"dead", "requeue", "-h"}, []string{"-id", "-all"}},
		{[]string{"dead", "purge", "-h"}, []string{"-id", "-all"}},
		{[]string{"help", "get"}, []string{"-id"}},
		{[]string{"dead", "-h"}, []string{"list", "requeue", "purge"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, _, err := runArgs(t, tt.args...)
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			for _, f := range tt.flags {
				if !strings.Contains(stdout, f) {
					t.Errorf("help does not mention %s:\n%s", f, stdout)
				}
			}
		})
	}
}

// TestRunUsageErrors checks command lines that must fail with a usage
// error (exit 2) before any connection is made.
func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"unknown flag", []string{"get", "--topic", "t", "--id", "x", "--nope"}, []string{"get:", "-nope"}},
		{"stray argument", []string{"get", "--topic", "t", "--id", "x", "y"}, []string{`unexpected argument "y"`}},
		{"missing topic", []string{"stats"}, []string{"--topic is required"}},
		{"send delay and at", []string{"send", "--topic", "t", "--delay", "1s", "--at", "2030-01-01T00:00:00Z"}, []string{"--delay and --at"}},
		{"send zero delay and at", []string{"send", "--topic", "t", "--delay", "0s", "--at", "2030-01-01T00:00:00Z"}, []string{"--delay and --at"}},
		{"send negative delay", []string{"send", "--topic", "t", "--delay", "-1s"}, []string{"--delay", `"-1s"`, "negative"}},
		{"send bad delay", []string{"send", "--topic", "t", "--delay", "5x"}, []string{"-delay", `"5x"`}},
		{"send bad at", []string{"send", "--topic", "t", "--at", "tomorrow"}, []string{"-at", `"tomorrow"`, "RFC 3339"}},
		{"send body and body-file", []string{"send", "--topic", "t", "--body", "x", "--body-file", "/dev/null"}, []string{"--body and --body-file"}},
		{"send stdin with id", []string{"send", "--topic", "t", "--stdin", "--id", "x"}, []string{"--id cannot be used with --stdin"}},
		{"send stdin with delay", []string{"send", "--topic", "t", "--stdin", "--delay", "1s"}, []string{"--delay cannot be used with --stdin"}},
		{"send stdin batch 0", []string{"send", "--topic", "t", "--stdin", "--batch", "0"}, []string{"--batch"}},
		{"send batch without stdin", []string{"send", "--topic", "t", "--batch", "3"}, []string{"--batch needs --stdin"}},
		{"send negative max attempts", []string{"send", "--topic", "t", "--max-attempts", "-1"}, []string{"--max-attempts", "negative"}},
		{"sub negative concurrency", []string{"sub", "--topic", "t", "--concurrency", "-1"}, []string{"--concurrency", `"-1"`}},
		{"sub negative count", []string{"sub", "--topic", "t", "--count", "-2"}, []string{"--count", `"-2"`}},
		{"sub bad lease", []string{"sub", "--topic", "t", "--lease", "ten"}, []string{"-lease", `"ten"`}},
		{"sub negative timeout", []string{"sub", "--topic", "t", "--timeout", "-1s"}, []string{"--timeout", `"-1s"`}},
		{"sub bad fail regexp", []string{"sub", "--topic", "t", "--fail", "("}, []string{"--fail", `"("`}},
		{"get missing id", []string{"get", "--topic", "t"}, []string{"--id is required"}},
		{"delete missing id", []string{"delete", "--topic", "t"}, []string{"--id is required"}},
		{"reschedule neither", []string{"reschedule", "--topic", "t", "--id", "x"}, []string{"one of --delay or --at"}},
		{"reschedule both", []string{"reschedule", "--topic", "t", "--id", "x", "--delay", "1s", "--at", "2030-01-01T00:00:00Z"}, []string{"--delay and --at"}},
		{"reschedule bad at", []string{"reschedule", "--topic", "t", "--id", "x", "--at", "2030-13-01T00:00:00Z"}, []string{"-at", `"2030-13-01T00:00:00Z"`}},
		{"dead no subcommand", []string{"dead"}, []string{"missing subcommand"}},
		{"dead unknown subcommand", []string{"dead", "bury"}, []string{`unknown subcommand "bury"`}},
		{"dead purge without all", []string{"dead", "purge", "--topic", "t"}, []string{"--all"}},
		{"dead requeue without all", []string{"dead", "requeue", "--topic", "t"}, []string{"--all"}},
		{"dead purge id and all", []string{"dead", "purge", "--topic", "t", "--id", "x", "--all"}, []string{"--id and --all"}},
		{"dead list zero limit", []string{"dead", "list", "--topic", "t", "--limit", "0"}, []string{"--limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runArgs(t, tt.args...)
			checkUsageError(t, tt.args, err, tt.want...)
		})
	}
}
