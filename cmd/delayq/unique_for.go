package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/httpapi"
)

// runUniqueFor implements "delayq unique-for": it prints the topic's
// default uniqueness window, or sets it.
func runUniqueFor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("unique-for", "--topic T [--set DUR] [--json]",
		"Prints the topic's default uniqueness window: \"T: 24h0m0s\", or \"T: none\". A\n"+
			"message sent to the topic with an id of its own and no window of its own (send\n"+
			"--unique-for, the API's \"unique_for\") keeps its id taken for that long after\n"+
			"its delivery succeeded: a send of the id meanwhile is refused, whatever its\n"+
			"--on-duplicate. A message with a generated id gets no default.\n\n"+
			"--set changes it (0 removes it: none) and prints it after the change; senders\n"+
			"see the change within a second, and it applies to the messages sent from then\n"+
			"on. The stored window is the truth: a worker's [[topic]] unique_for sets it\n"+
			"only on a topic whose window was never set, so change it here.\n"+
			"A topic that does not exist is an error, and nothing is written.", stdout, stderr)
	cmd.createsNoTopic = true
	var set durationFlag
	cmd.fs.Var(&set, "set", "set the window to `duration`, e.g. 24h; 0 removes it")
	asJSON := cmd.fs.Bool("json", false, "print JSON: {\"topic\",\"unique_for_ms\"} (0: none)")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if err := cmd.nonNegative("set", int64(set.d)); err != nil {
		return err
	}
	return cmd.connect(func(client *delayq.Client) error {
		topic := cmd.c.topic
		if cmd.isSet("set") {
			if err := client.Admin().SetUniqueFor(ctx, topic, set.d); err != nil {
				return err
			}
		}
		d, err := client.Inspector().UniqueFor(ctx, topic)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, httpapi.NewTopicUniqueFor(topic, d))
		}
		_, err = fmt.Fprintf(stdout, "%s: %s\n", topic, uniqueForText(d))
		return err
	})
}

// uniqueForText says a uniqueness window as "delayq unique-for" prints
// it: "24h0m0s", or "none" for 0.
func uniqueForText(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}
