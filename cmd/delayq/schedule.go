package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/wire"
)

// scheduleUsage lists the subcommands of "delayq schedule".
const scheduleUsage = `Usage: delayq schedule <add|list|pause|resume|delete> --topic T [flags]

	add     add a schedule (--name, --spec, ...); --replace to replace one
	list    print the topic's schedules and their next occurrences (--json)
	pause   stop a schedule's occurrences until resume (--name)
	resume  resume a paused schedule from its next occurrence (--name)
	delete  delete a schedule and its pending occurrence (--name)

A schedule delivers one message to the topic's consumers per occurrence of
its cron spec: 5 fields (minute hour day-of-month month day-of-week), or 6
with seconds first, or @yearly, @monthly, @weekly, @daily, @hourly,
"@every 30s". Run "delayq schedule <subcommand> -h" for the flags of one.
`

// runSchedule implements "delayq schedule".
func runSchedule(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	op := func(name string) subcommand {
		return subcommand{name, func(args []string) error { return runScheduleOp(ctx, name, args, stdout, stderr) }}
	}
	return runSubcommand("schedule", scheduleUsage, []subcommand{
		{"add", func(args []string) error { return runScheduleAdd(ctx, args, stdin, stdout, stderr) }},
		{"list", func(args []string) error { return runScheduleList(ctx, args, stdout, stderr) }},
		op("pause"),
		op("resume"),
		op("delete"),
	}, args, stdout, stderr)
}

// runScheduleAdd implements "delayq schedule add".
func runScheduleAdd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newCommand("schedule add",
		"--topic T --name NAME --spec SPEC [--tz ZONE] [--body STR | --body-file PATH]\n"+
			"       [--max-attempts N] [--policy skip|all] [--replace] [--json]",
		"Adds a schedule to the topic and prints it with its next occurrence. A name\n"+
			"the topic has already is refused, unless --replace: then the schedule of that\n"+
			"name is replaced by the whole definition given (a paused one stays paused;\n"+
			"fields not given take their defaults, so restate the body, --max-attempts,\n"+
			"--tz and --policy to keep them), and \"replaced\" is printed with each field that changed\n"+
			"(field: old -> new). A replace applies at once: the replaced schedule's\n"+
			"pending occurrence is removed and the next one of the new definition written.", stdout, stderr)
	name := cmd.fs.String("name", "", "schedule `name`, [A-Za-z0-9._-] (required)")
	spec := cmd.fs.String("spec", "", "cron `spec`, e.g. \"*/10 * * * *\", \"0 3 * * *\", @hourly, \"@every 30s\" (required)")
	tz := cmd.fs.String("tz", "", "IANA time `zone` the spec is read in, e.g. Asia/Shanghai (default UTC)")
	body := cmd.fs.String("body", "", "message `body` of every occurrence")
	bodyFile := cmd.fs.String("body-file", "", "read the body from `path` (- for stdin)")
	maxAttempts := cmd.fs.Int("max-attempts", 0, "deliver each occurrence at most `n` times (0: the consumer's max attempts)")
	policy := cmd.fs.String("policy", "skip", "`policy` for missed occurrences: skip (deliver the latest only) or all (each, at most 100)")
	replace := cmd.fs.Bool("replace", false, "replace the schedule of that name if there is one")
	asJSON := cmd.fs.Bool("json", false, "print the schedule as JSON")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if *name == "" || *spec == "" {
		return cmd.usageErr("--name and --spec are required")
	}
	s := delayq.Schedule{Name: *name, Spec: *spec, TimeZone: *tz, Body: []byte(*body), MaxAttempts: *maxAttempts, Policy: delayq.Policy(*policy)}
	if cmd.isSet("body-file") {
		if cmd.isSet("body") {
			return cmd.usageErr("--body and --body-file are mutually exclusive")
		}
		b, err := readBody(*bodyFile, stdin)
		if err != nil {
			return fmt.Errorf("--body-file: %w", err)
		}
		s.Body = b
	}
	return cmd.connect(func(client *delayq.Client) error {
		if *replace {
			return replaceSchedule(ctx, client, cmd.c.topic, s, scheduleOut{stdout: stdout, stderr: stderr, asJSON: *asJSON})
		}
		in, err := client.Admin().AddSchedule(ctx, cmd.c.topic, s)
		if errors.Is(err, delayq.ErrExists) {
			return fmt.Errorf("%w: use --replace to replace it", err)
		}
		if err != nil {
			return err
		}
		return writeSchedule(stdout, in, *asJSON)
	})
}

// writeSchedule prints the schedule "schedule add" wrote: as JSON, or as
// a table of one row.
func writeSchedule(w io.Writer, in *delayq.ScheduleInfo, asJSON bool) error {
	if asJSON {
		return writeJSON(w, in)
	}
	return writeSchedules(w, []delayq.ScheduleInfo{*in})
}

// runScheduleList implements "delayq schedule list".
func runScheduleList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("schedule list", "--topic T [--json]",
		"Prints the topic's schedules, sorted by name: a table of name, spec, time zone,\n"+
			"policy, state and next occurrence, or with --json one JSON object per line\n"+
			"(with the next three occurrences and the body).", stdout, stderr)
	asJSON := cmd.fs.Bool("json", false, "print JSON lines")
	return cmd.run(args, func(client *delayq.Client) error {
		all, err := client.Inspector().Schedules(ctx, cmd.c.topic)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeScheduleLines(stdout, all)
		}
		return writeSchedules(stdout, all)
	})
}

// writeScheduleLines prints schedules as JSON lines.
func writeScheduleLines(w io.Writer, all []delayq.ScheduleInfo) error {
	for i := range all {
		b, err := all[i].MarshalJSON()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
			return err
		}
	}
	return nil
}

// writeSchedules prints schedules as an aligned table: the next
// occurrence in the schedule's zone (with its offset) and in UTC.
func writeSchedules(w io.Writer, all []delayq.ScheduleInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tspec\ttz\tpolicy\tstate\tnext\tnext (UTC)")
	now := time.Now()
	for _, s := range all {
		state, nextAt, nextUTC := "active", "-", "-"
		if s.Paused {
			state = "paused"
		}
		if n := s.Next(now, 1); len(n) == 1 {
			nextAt, nextUTC = inZone(n[0], s.TimeZone), wire.Time(n[0])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Spec, zoneName(s.TimeZone), s.Policy, state, nextAt, nextUTC)
	}
	return tw.Flush()
}

// inZone formats t in the IANA zone tz (UTC when empty) as RFC 3339 with
// the zone's offset, such as 2026-11-26T09:00:00-05:00.
func inZone(t time.Time, tz string) string {
	loc, err := time.LoadLocation(zoneName(tz))
	if err != nil { // a stored schedule's zone was checked when it was set
		loc = time.UTC
	}
	return t.In(loc).Format(wire.TimeLayout)
}

// runScheduleOp implements "delayq schedule pause|resume|delete".
func runScheduleOp(ctx context.Context, op string, args []string, stdout, stderr io.Writer) error {
	about := map[string]string{
		"pause":  "Pauses the schedule: its pending occurrence is removed and no other is written\nuntil resume. Prints \"paused NAME\".",
		"resume": "Resumes a paused schedule from its next occurrence after now (those of the pause\nare not delivered). Prints \"resumed NAME\".",
		"delete": "Deletes the schedule and its pending occurrence. Prints \"deleted NAME\".",
	}[op]
	cmd := newCommand("schedule "+op, "--topic T --name NAME", about, stdout, stderr)
	name := cmd.fs.String("name", "", "schedule `name` (required)")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if *name == "" {
		return cmd.usageErr("--name is required")
	}
	return cmd.connect(func(client *delayq.Client) error {
		var err error
		switch op {
		case "pause":
			err = client.Admin().PauseSchedule(ctx, cmd.c.topic, *name)
		case "resume":
			err = client.Admin().ResumeSchedule(ctx, cmd.c.topic, *name)
		default:
			err = client.Admin().DeleteSchedule(ctx, cmd.c.topic, *name)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s %s\n", strings.TrimSuffix(op, "e")+"ed", *name)
		return err
	})
}

// workerSchedules returns a topic's [[topic.schedule]] tables as the
// library takes them: the consumer applies them when it starts.
func workerSchedules(cs []config.Schedule) []delayq.Schedule {
	var out []delayq.Schedule
	for _, s := range cs {
		out = append(out, s.Delayq())
	}
	return out
}
