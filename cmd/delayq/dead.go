package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
)

// deadUsage lists the subcommands of "delayq dead".
const deadUsage = `Usage: delayq dead <list|requeue|purge> --topic T [flags]

	list     print dead messages (--limit N, --json)
	requeue  make dead messages due now with their attempts reset (--id ID... or --all)
	purge    delete dead messages (--id ID... or --all)

Run "delayq dead <subcommand> -h" for the flags of one.
`

// runDead implements "delayq dead": it dispatches to list, requeue or purge.
func runDead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	op := func(name string) subcommand {
		return subcommand{name, func(args []string) error { return runDeadOp(ctx, name, args, stdout, stderr) }}
	}
	return runSubcommand("dead", deadUsage, []subcommand{
		{"list", func(args []string) error { return runDeadList(ctx, args, stdout, stderr) }},
		op("requeue"),
		op("purge"),
	}, args, stdout, stderr)
}

// runDeadList implements "delayq dead list".
func runDeadList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("dead list", "--topic T [--limit N] [--json]",
		"Prints up to --limit dead messages, in partition order: a table of id, partition,\n"+
			"attempts, died_at and last_error, or with --json one JSON object per line, shaped\n"+
			"like the output of get.", stdout, stderr)
	limit := cmd.fs.Int("limit", 100, "print at most `n` messages")
	asJSON := cmd.fs.Bool("json", false, "print JSON lines")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if *limit < 1 {
		return cmd.usageErr("invalid value %d for flag --limit: must be at least 1", *limit)
	}
	return cmd.connect(func(client *delayq.Client) error {
		list, err := client.Inspector().ListDead(ctx, cmd.c.topic, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeInfoLines(stdout, list)
		}
		return writeDeadTable(stdout, list)
	})
}

// writeInfoLines writes each message as one line of JSON.
func writeInfoLines(w io.Writer, list []*delayq.Info) error {
	bw := bufio.NewWriter(w)
	for _, in := range list {
		line, err := marshalLine(in)
		if err != nil {
			return err
		}
		bw.Write(line)
	}
	return bw.Flush()
}

// writeDeadTable prints dead messages as an aligned table.
func writeDeadTable(w io.Writer, list []*delayq.Info) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tpartition\tattempts\tdied_at\tlast_error")
	for _, in := range list {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n",
			cell(in.ID), in.Partition, in.Attempts, orDash(wire.Time(in.DiedAt)), cell(in.LastError))
	}
	return tw.Flush()
}

// cell returns s for a table cell: "-" when empty, quoted when it holds
// control characters (tabs, newlines) that would break the row.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// runDeadOp implements "delayq dead requeue" and "delayq dead purge".
func runDeadOp(ctx context.Context, op string, args []string, stdout, stderr io.Writer) error {
	about := map[string]string{
		"requeue": "Makes the given dead messages, or all of them with --all, due now with their\nattempts reset, and prints how many it moved. An --id that is not a dead message\nof the topic is an error (exit 1, \"not found\"), after the others are moved.",
		"purge":   "Deletes the given dead messages, or all of them with --all, and prints how many\nit deleted. An --id that is not a dead message of the topic is an error (exit 1,\n\"not found\"), after the others are deleted.",
	}[op]
	cmd := newCommand("dead "+op, "--topic T (--id ID [--id ID...] | --all)", about, stdout, stderr)
	var ids stringsFlag
	cmd.fs.Var(&ids, "id", "dead message `id` (repeatable)")
	all := cmd.fs.Bool("all", false, "every dead message of the topic")
	if err := cmd.parse(args); err != nil {
		return err
	}
	switch {
	case *all && len(ids) > 0:
		return cmd.usageErr("--id and --all are mutually exclusive")
	case !*all && len(ids) == 0:
		return cmd.usageErr("give --id, or --all to %s every dead message", op)
	}
	for _, id := range ids {
		if id == "" {
			return cmd.usageErr("--id is empty")
		}
	}
	return cmd.connect(func(client *delayq.Client) error {
		do, verb := client.Admin().RequeueDead, "requeued"
		if op == "purge" {
			do, verb = client.Admin().PurgeDead, "purged"
		}
		ids = slices.Compact(slices.Sorted(slices.Values(ids)))
		n, err := do(ctx, cmd.c.topic, ids...)
		if err != nil {
			if n > 0 {
				fmt.Fprintf(stdout, "%s %d\n", verb, n)
			}
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s %d\n", verb, n); err != nil {
			return err
		}
		if len(ids) > 0 && n < len(ids) {
			// As the HTTP API answers 404: an id that is not a dead
			// message of the topic is not a success.
			return fmt.Errorf("%w: %d of the %d ids given are not dead messages of topic %s", delayq.ErrNotFound, len(ids)-n, len(ids), cmd.c.topic)
		}
		return nil
	})
}
