package main

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// durationFlag is a flag.Value for a time.Duration whose parse errors
// keep time.ParseDuration's reason (flag.Duration says only "parse error").
type durationFlag struct{ d time.Duration }

// String returns the duration, or "" when unset.
func (f *durationFlag) String() string {
	if f == nil || f.d == 0 {
		return ""
	}
	return f.d.String()
}

// Set parses s with time.ParseDuration.
func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "time: "))
	}
	f.d = d
	return nil
}

// timeFlag is a flag.Value for an RFC 3339 time (fractional seconds allowed).
type timeFlag struct{ t time.Time }

// String returns the time in RFC 3339, or "" when unset.
func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

// Set parses s as RFC 3339.
func (f *timeFlag) Set(s string) error {
	t, err := parseTime(s)
	if err != nil {
		return err
	}
	f.t = t
	return nil
}

// parseTime parses an RFC 3339 time, with or without fractional seconds,
// and returns an error that says which format was expected.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 time like 2006-01-02T15:04:05Z07:00")
	}
	return t, nil
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

// String returns the values joined by commas.
func (f *stringsFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ",")
}

// Set appends s.
func (f *stringsFlag) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// dueFlags are the --delay and --at flags that say when a message is due.
type dueFlags struct {
	delay durationFlag
	at    timeFlag
}

// add registers --delay and --at on cmd; note ends their help texts.
func (d *dueFlags) add(cmd *command, note string) {
	cmd.fs.Var(&d.delay, "delay", "due after `duration`, e.g. 1m30s"+note)
	cmd.fs.Var(&d.at, "at", "due at `time` (RFC 3339), e.g. 2030-01-02T15:04:05Z"+note)
}

// resolve checks that at most one of --delay and --at was given (exactly
// one when required) and returns what was given: a delay, a time, or
// neither (both zero).
func (d *dueFlags) resolve(cmd *command, required bool) (time.Duration, time.Time, error) {
	delaySet, atSet := cmd.isSet("delay"), cmd.isSet("at")
	switch {
	case delaySet && atSet:
		return 0, time.Time{}, cmd.usageErr("--delay and --at are mutually exclusive")
	case delaySet && d.delay.d < 0:
		return 0, time.Time{}, cmd.usageErr("invalid value %q for flag --delay: negative", d.delay.d)
	case !delaySet && !atSet && required:
		return 0, time.Time{}, cmd.usageErr("one of --delay or --at is required")
	}
	return d.delay.d, d.at.t, nil
}
