package delayq

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// specParser reads 5 fields, an optional seconds field first, and
// descriptors.
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSpec parses a schedule's spec in its zone, with errors that name
// the schedule (unless name is empty), the spec and the zone.
func parseSpec(name, spec, tz string) (cron.Schedule, error) {
	of := "" // names the schedule
	if name != "" {
		of = fmt.Sprintf("schedule %q", name)
	}
	// bad is fieldErr naming the schedule.
	bad := func(field string, v any, format string, args ...any) error {
		err := fieldErr(field, v, format, args...).(*FieldError)
		err.Of = of
		return err
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, bad("Schedule.TimeZone", fmt.Sprintf("%q", tz), "is not an IANA zone name such as \"Asia/Shanghai\"")
		}
		loc = l
	}
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, bad("Schedule.Spec", `""`, "is empty")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, bad("Schedule.Spec", fmt.Sprintf("%q", spec), "gives a time zone: give it as the schedule's time zone instead")
	}
	cs, err := specParser.Parse(s)
	if err != nil {
		return nil, bad("Schedule.Spec", fmt.Sprintf("%q", spec), "is not a cron spec (%v): want 5 fields (6 with seconds first) or a descriptor such as @daily or @every 1h", err)
	}
	switch c := cs.(type) {
	case *cron.SpecSchedule:
		c.Location = loc
	case cron.ConstantDelaySchedule:
		d := strings.TrimSpace(strings.TrimPrefix(s, "@every"))
		if v, _ := time.ParseDuration(d); v < time.Second || v%time.Second != 0 {
			return nil, bad("Schedule.Spec", fmt.Sprintf("%q", spec), "does not repeat in whole seconds, at least 1s (@every)")
		}
	}
	if cs.Next(time.Now()).IsZero() {
		return nil, bad("Schedule.Spec", fmt.Sprintf("%q", spec), "has no occurrence in the next five years")
	}
	return cs, nil
}

// ParseSpec checks a cron spec in a time zone ("" for UTC) as a schedule
// would read it, and returns its next n occurrences after from.
func ParseSpec(spec, tz string, from time.Time, n int) ([]time.Time, error) {
	cs, err := parseSpec("", spec, tz)
	if err != nil {
		return nil, err
	}
	return nextN(cs, from, n), nil
}

func nextN(cs cron.Schedule, from time.Time, n int) []time.Time {
	var out []time.Time
	t := from
	for range n {
		t = next(cs, t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// next is the occurrence after t, to the millisecond (occurrence times
// are whole seconds).
func next(cs cron.Schedule, t time.Time) time.Time {
	n := cs.Next(t)
	if n.IsZero() {
		return n
	}
	return time.UnixMilli(n.UnixMilli())
}

// validateScheduleName checks a schedule's name: it is part of the ids
// of its occurrences, which are split at colons.
func validateScheduleName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: schedule name is empty", ErrInvalid)
	}
	if len(name) > maxScheduleName {
		return fmt.Errorf("%w: schedule name %.20q... is %d characters, the limit is %d", ErrInvalid, name, len(name), maxScheduleName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: schedule name %q has %q at byte %d; use [A-Za-z0-9._-]", ErrInvalid, name, c, i)
		}
	}
	return nil
}

// ValidateSchedule checks a schedule's name, spec, time zone, policy and
// max attempts, as SetSchedule does (which also checks the body's size
// against the client's Options.MaxBodyBytes). Its errors wrap ErrInvalid
// and name the schedule and the offending value.
func ValidateSchedule(s Schedule) error {
	_, err := checkSchedule(&s)
	return err
}

// checkSchedule checks s (see ValidateSchedule) and returns its parsed
// spec.
func checkSchedule(s *Schedule) (cron.Schedule, error) {
	if err := validateScheduleName(s.Name); err != nil {
		return nil, err
	}
	cs, err := parseSpec(s.Name, s.Spec, s.TimeZone)
	if err != nil {
		return nil, err
	}
	switch s.Policy {
	case "", PolicySkip, PolicyAll:
	default:
		return nil, &FieldError{Of: fmt.Sprintf("schedule %q", s.Name), Field: "Schedule.Policy", Value: fmt.Sprintf("%q", s.Policy),
			Reason: fmt.Sprintf("is not a policy: want %q or %q", PolicySkip, PolicyAll)}
	}
	if s.MaxAttempts < 0 {
		return nil, &FieldError{Of: fmt.Sprintf("schedule %q", s.Name), Field: "Schedule.MaxAttempts", Value: fmt.Sprint(s.MaxAttempts),
			Reason: "is negative: want 0 (the consumer's) or more"}
	}
	return cs, nil
}
