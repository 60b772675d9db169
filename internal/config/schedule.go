package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// Schedule is one [[topic.schedule]] table: a recurring message of its
// topic (see delayq.Schedule), applied when the worker starts by
// delayq.Admin.ApplySchedules, which never undoes a change made at run
// time unless the file's definition of the schedule changed.
type Schedule struct {
	Name        string // required: [A-Za-z0-9._-]{1,100}
	Spec        string // required: cron spec, e.g. "*/10 * * * *", "@every 30s"
	TZ          string // IANA time zone; "" is UTC
	Body        string // body of every occurrence
	MaxAttempts int    // 0: the topic's max_attempts
	Policy      string // "skip" (the default) or "all"
}

// Delayq returns the schedule as the library takes it.
func (s Schedule) Delayq() delayq.Schedule {
	return delayq.Schedule{Name: s.Name, Spec: s.Spec, TimeZone: s.TZ, Body: []byte(s.Body), MaxAttempts: s.MaxAttempts, Policy: delayq.Policy(s.Policy)}
}

// schedTables is the schema of the [[topic.schedule]] tables of a topic.
type schedTables = []rawSchedule

// rawSchedule is the schema of a [[topic.schedule]] table.
type rawSchedule struct {
	Name        value `toml:"name"`
	Spec        value `toml:"spec"`
	TZ          value `toml:"tz"`
	Body        value `toml:"body"`
	MaxAttempts value `toml:"max_attempts"`
	Policy      value `toml:"policy"`
}

// scheduleTable names the j-th [[topic.schedule]] of the i-th topic in
// errors.
func scheduleTable(name, topic string, i, j int) string {
	s := fmt.Sprintf("[[topic.schedule]] #%d", j+1)
	if name != "" {
		s = fmt.Sprintf("[[topic.schedule]] %q", name)
	}
	return s + " of " + topicName(topic, i)
}

// schedules converts the [[topic.schedule]] tables of the i-th topic,
// whose path is path.
func (c converter) schedules(raw []rawSchedule, dst *[]Schedule, path, topic string, i int) {
	for j, rs := range raw {
		var s Schedule
		sp := fmt.Sprintf("%s.schedule[%d]", path, j)
		c.str(rs.Name, &s.Name, child(sp, scheduleTable("", topic, i, j), "name"))
		table := scheduleTable(s.Name, topic, i, j)
		c.str(rs.Spec, &s.Spec, child(sp, table, "spec"))
		c.str(rs.TZ, &s.TZ, child(sp, table, "tz"))
		c.str(rs.Body, &s.Body, child(sp, table, "body"))
		c.integer(rs.MaxAttempts, &s.MaxAttempts, child(sp, table, "max_attempts"))
		c.str(rs.Policy, &s.Policy, child(sp, table, "policy"))
		*dst = append(*dst, s)
	}
}

// validateSchedules checks the schedules of the i-th topic.
func (t *Topic) validateSchedules(ps *problems, i int) {
	first := map[string]int{}
	for j, s := range t.Schedules {
		sp := fmt.Sprintf("topic[%d].schedule[%d]", i, j)
		table := scheduleTable(s.Name, t.Name, i, j)
		at := func(key string) place { return child(sp, table, key) }
		msg := func(err error) string {
			var fe *delayq.FieldError
			if errors.As(err, &fe) { // the key names the field
				return fe.Value + " " + fe.Reason
			}
			return strings.TrimPrefix(err.Error(), delayq.ErrInvalid.Error()+": ")
		}
		switch err := delayq.ValidateSchedule(delayq.Schedule{Name: s.Name, Spec: "@hourly"}); {
		case s.Name == "":
			ps.add(at("name"), "missing; want a name of [A-Za-z0-9._-] such as \"daily-report\"")
		case err != nil:
			ps.add(at("name"), "%s", msg(err))
		default:
			if k, dup := first[s.Name]; dup {
				ps.add(at("name"), "duplicate schedule name %q; it is the name of [[topic.schedule]] #%d of this topic already", s.Name, k+1)
				(*ps)[len(*ps)-1].also = fmt.Sprintf("topic[%d].schedule[%d].name", i, k)
			} else {
				first[s.Name] = j
			}
		}
		if s.Spec == "" {
			ps.add(at("spec"), "missing; want a cron spec such as \"*/10 * * * *\", \"0 3 * * *\" or \"@every 30s\"")
		} else if _, err := delayq.ParseSpec(s.Spec, "", time.Now(), 1); err != nil {
			ps.add(at("spec"), "%s", msg(err))
		}
		if s.TZ != "" {
			if _, err := delayq.ParseSpec("@hourly", s.TZ, time.Now(), 1); err != nil {
				ps.add(at("tz"), "%s", msg(err))
			}
		}
		switch s.Policy {
		case "", string(delayq.PolicySkip), string(delayq.PolicyAll):
		default:
			ps.add(at("policy"), "%q is not a policy; want \"skip\" (deliver the latest missed occurrence) or \"all\"", s.Policy)
		}
		if s.MaxAttempts < 0 {
			ps.add(at("max_attempts"), "%d is negative; want 1 or more, or no key for the topic's max_attempts", s.MaxAttempts)
		}
	}
}
