package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/wire"
)

// runPause implements "delayq pause".
func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("pause", "--topic T [--for DURATION | --until TIME]",
		"Pauses the topic across the fleet: within a second, no consumer starts a\n"+
			"delivery of it. Deliveries running finish and are acked; messages claimed\n"+
			"ahead and not started go back to scheduled, no attempt spent; producers keep\n"+
			"writing, and messages that fall due wait in the scheduled set. With --for or\n"+
			"--until the pause ends by itself; without, it lasts until \"delayq resume\".\n"+
			"Pausing a paused topic replaces its end. Prints the pause's end, or \"until\n"+
			"resumed\". A topic that does not exist is an error, and nothing is written.", stdout, stderr)
	cmd.createsNoTopic = true
	var dur durationFlag
	var until timeFlag
	cmd.fs.Var(&dur, "for", "end the pause after `duration`, e.g. 5m")
	cmd.fs.Var(&until, "until", "end the pause at `time` (RFC 3339), e.g. 2030-01-02T15:04:05Z")
	if err := cmd.parse(args); err != nil {
		return err
	}
	var opts delayq.PauseOptions
	switch {
	case cmd.isSet("for") && cmd.isSet("until"):
		return cmd.usageErr("--for and --until are mutually exclusive")
	case cmd.isSet("for") && dur.d <= 0:
		return cmd.usageErr("invalid value %q for flag --for: not positive", dur.d)
	case cmd.isSet("for"):
		opts.Until = time.Now().Add(dur.d)
	case cmd.isSet("until"):
		opts.Until = until.t
	}
	return cmd.connect(func(client *delayq.Client) error {
		if err := client.Admin().Pause(ctx, cmd.c.topic, opts); err != nil {
			return err
		}
		end := "until resumed"
		if !opts.Until.IsZero() {
			end = "until " + wire.Time(clock.CeilMS(opts.Until)) // as stored
		}
		_, err := fmt.Fprintf(stdout, "%s: paused %s\n", cmd.c.topic, end)
		return err
	})
}

// runResume implements "delayq resume".
func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("resume", "--topic T",
		"Ends the topic's pause (see \"delayq pause\"): its consumers deliver what fell\n"+
			"due meanwhile at once, in due order per partition. Resuming a topic not paused\n"+
			"does nothing. A topic that does not exist is an error.", stdout, stderr)
	cmd.createsNoTopic = true
	return cmd.run(args, func(client *delayq.Client) error {
		if err := client.Admin().Resume(ctx, cmd.c.topic); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "%s: resumed\n", cmd.c.topic)
		return err
	})
}

// pauseLine says a topic's pause, as stats and partitions print it; ""
// when it is not paused.
func pauseLine(p delayq.PauseState) string {
	switch {
	case !p.Paused:
		return ""
	case p.PausedUntil == nil:
		return "paused until resumed"
	}
	return "paused until " + wire.Time(*p.PausedUntil)
}
