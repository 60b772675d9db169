package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
)

// writeJSON writes v to w as indented JSON without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// idCommand returns a command with a --id flag that parse requires.
func idCommand(name, args, about string, stdout, stderr io.Writer) (*command, *string) {
	cmd := newCommand(name, args, about, stdout, stderr)
	cmd.id = cmd.fs.String("id", "", "message `id` (required)")
	return cmd, cmd.id
}

// runGet implements "delayq get": it prints a message as JSON.
func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, id := idCommand("get", "--topic T --id ID",
		"Prints the message as a JSON object: topic, id, partition, state, due, attempts,\n"+
			"max_attempts, created, updated, last_error, body (or body_base64 when it is not\n"+
			"UTF-8), unique_for_ms (with a uniqueness window), and deadline (in flight) or\n"+
			"died_at (dead). A message delivered within its uniqueness window (send\n"+
			"--unique-for, delayq unique-for) is \"state\": \"done\", with \"finished\" (when\n"+
			"its delivery was acked) and \"unique_until\" (when its id is free again), and\n"+
			"nothing else of it is kept.", stdout, stderr)
	return cmd.run(args, func(client *delayq.Client) error {
		in, err := client.Get(ctx, cmd.c.topic, *id)
		if err != nil {
			return err
		}
		return writeJSON(stdout, in)
	})
}

// runDelete implements "delayq delete".
func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("delete", "--topic T (--id ID | --in FILE)",
		"Deletes the message, whether scheduled, in flight or dead, and prints \"deleted ID\":\n"+
			"no delivery of it starts from then on. Exits 3 when a delivery of it had started\n"+
			"(deleted all the same, never retried, but that delivery may finish).\n"+
			"With --in, deletes every message whose id is on a line of FILE (the JSON lines\n"+
			"of \"delayq export\": what a move to another cluster took, see\n"+
			"docs/export-import.md), then the schedules of its schedule lines, and prints\n"+
			"how many it deleted and how many were gone already.", stdout, stderr)
	id := cmd.fs.String("id", "", "message `id`")
	in := cmd.fs.String("in", "", "delete the ids of the JSON lines of `file`")
	if err := cmd.parse(args); err != nil {
		return err
	}
	switch {
	case *id == "" && *in == "":
		return cmd.usageErr("--id is required (or --in FILE, to delete the messages of an export)")
	case *id != "" && *in != "":
		return cmd.usageErr("--id and --in exclude each other: give one, not both")
	}
	return cmd.connect(func(client *delayq.Client) error {
		if *in != "" {
			return deleteListed(ctx, client, cmd.c.topic, *in, stdout)
		}
		if err := client.Delete(ctx, cmd.c.topic, *id); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "deleted %s\n", *id)
		return err
	})
}

// runReschedule implements "delayq reschedule".
func runReschedule(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, id := idCommand("reschedule", "--topic T --id ID (--delay DUR | --at TIME)",
		"Moves a scheduled message to a new due time and prints it (RFC 3339, UTC): it is\n"+
			"delivered then, never at its old due. Exits 3, changing nothing, when a delivery\n"+
			"of it started; dead messages cannot be rescheduled.", stdout, stderr)
	var due dueFlags
	due.add(cmd, "")
	if err := cmd.parse(args); err != nil {
		return err
	}
	delay, at, err := due.resolve(cmd, true)
	if err != nil {
		return err
	}
	if at.IsZero() {
		at = time.Now().Add(delay)
	}
	return cmd.connect(func(client *delayq.Client) error {
		stored, err := client.Reschedule(ctx, cmd.c.topic, *id, at)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, wire.Time(stored))
		return err
	})
}

// runStats implements "delayq stats".
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("stats", "--topic T [--json]",
		"Prints the counters of every partition of the topic and their totals: due_now\n"+
			"counts the scheduled messages whose due time has come and that no consumer\n"+
			"claimed yet; lag is how long the oldest of them has waited; consumers counts\n"+
			"the live consumers of the topic. With --json, prints the delayq.TopicStats\n"+
			"value as JSON (lag as lag_ms).", stdout, stderr)
	asJSON := cmd.fs.Bool("json", false, "print JSON")
	return cmd.run(args, func(client *delayq.Client) error {
		ts, err := client.Inspector().Stats(ctx, cmd.c.topic)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, ts)
		}
		return writeStatsTable(stdout, ts)
	})
}

// writeStatsTable prints ts as an aligned table with a total line, then
// the lag and the live consumers, the pause, the limits, the partition
// count and a running change of it.
func writeStatsTable(w io.Writer, ts *delayq.TopicStats) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "partition\tscheduled\tdue_now\tinflight\tdead\toldest_due\towner\ttoken")
	for _, p := range ts.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n",
			p.Partition, p.Scheduled, p.DueNow, p.InFlight, p.Dead, orDash(formatTimePtr(p.OldestDue)), orDash(p.Owner), p.Token)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\n", ts.Scheduled, ts.DueNow, ts.InFlight, ts.Dead)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "lag %v, consumers %d\n", ts.Lag, ts.Consumers)
	if l := pauseLine(ts.Pause); l != "" {
		fmt.Fprintln(w, l)
	}
	if l := limitsLine(ts.Limits); l != "" {
		fmt.Fprintln(w, l)
	}
	if ts.Change != nil {
		_, err := fmt.Fprintf(w, "partitions %d, changing to %d\n%s\n", ts.Count, ts.ChangingTo, partitionsLine(ts.Change, time.Now()))
		return err
	}
	if ts.ChangingTo != 0 {
		_, err := fmt.Fprintf(w, "partitions %d, changing to %d\n", ts.Count, ts.ChangingTo)
		return err
	}
	_, err := fmt.Fprintf(w, "partitions %d\n", ts.Count)
	return err
}

// orDash returns s, or "-" when s is empty, so that table cells are never blank.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatTimePtr is wire.Time of *t, or "" when t is nil.
func formatTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return wire.Time(*t)
}
