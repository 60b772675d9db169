package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"text/tabwriter"

	"github.com/delayq/delayq"
)

// topicUsage lists the subcommands of "delayq topic".
const topicUsage = `Usage: delayq topic <list|delete> [flags]

	list     list the namespace's topics with their partition counts
	delete   delete a topic: its messages, schedules and metadata (--force)

Run "delayq topic <subcommand> -h" for the flags of one.
`

// runTopic implements "delayq topic": it dispatches to list or delete.
func runTopic(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand("topic", topicUsage, []subcommand{
		{"list", func(args []string) error { return runTopicList(ctx, args, stdout, stderr) }},
		{"delete", func(args []string) error { return runTopicDelete(ctx, args, stdout, stderr) }},
	}, args, stdout, stderr)
}

// runTopicDelete implements "delayq topic delete".
func runTopicDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("topic delete", "--topic T [--force]",
		"Deletes the topic: every key of its partitions, its schedules, its consumers'\n"+
			"membership, its metadata and its entry in the list of topics (the dashboard's\n"+
			"overview), and prints what it held. It refuses a topic that holds messages\n"+
			"(scheduled, in flight or dead) or schedules, that a consumer is live on, or\n"+
			"whose partition count is being changed, and says which; --force deletes it\n"+
			"anyway, messages and schedules included.\n\n"+
			"Stop the topic's consumers (sub, worker) and producers first: a consumer still\n"+
			"running fails until it is stopped, and a message sent while the topic is\n"+
			"deleted may be deleted with it. A later send, import, consumer or \"schedule add\"\n"+
			"creates the topic again, empty. A topic that does not exist is an error.", stdout, stderr)
	force := cmd.fs.Bool("force", false, "delete the topic even if it holds messages or schedules, a consumer is live on it or its count is being changed")
	return cmd.run(args, func(client *delayq.Client) error {
		u, err := client.Admin().DeleteTopic(ctx, cmd.c.topic, delayq.DeleteTopicOptions{Force: *force})
		if errors.Is(err, delayq.ErrTopicInUse) {
			return fmt.Errorf("%w; --force deletes it anyway", err)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "deleted topic %s: %d scheduled, %d in flight, %d dead, %d schedules\n",
			u.Topic, u.Scheduled, u.InFlight, u.Dead, u.Schedules)
		return err
	})
}

// runTopicList implements "delayq topic list".
func runTopicList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newConnCommand("topic list", "[--json]",
		"Lists the topics of the namespace, oldest first: name, partition count (\"16->32\"\n"+
			"while a change of it runs) and live consumers. It reads the namespace's list of\n"+
			"topics, which every topic joins when it is created, so a topic made by a typo\n"+
			"shows here, to be removed with \"delayq topic delete\".", stdout, stderr)
	cmd.addLogLevel(slog.LevelWarn)
	asJSON := cmd.fs.Bool("json", false, "print one JSON line per topic: {\"topic\",\"partitions\",\"next\",\"live_consumers\"}")
	return cmd.run(args, func(client *delayq.Client) error {
		topics, err := client.Inspector().Topics(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			for _, t := range topics {
				if err := writeJSON(stdout, t); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tLIVE CONSUMERS")
		for _, t := range topics {
			count := strconv.Itoa(t.Partitions)
			if t.Next != 0 {
				count += "->" + strconv.Itoa(t.Next)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\n", t.Name, count, t.Live)
		}
		return tw.Flush()
	})
}
