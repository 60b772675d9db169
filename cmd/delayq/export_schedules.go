package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/delayq/delayq"
)

// What "delayq import" and "delayq delete --in" do with the schedule
// lines of an export, and the occurrences of schedules among its
// messages.

// printExportSchedules prints, after an export's summary, how many
// schedule definitions it wrote, when it wrote any.
func printExportSchedules(w io.Writer, topic string, st delayq.ExportStats) {
	if st.Schedules > 0 {
		fmt.Fprintf(w, "exported %d %s of %s, each with its pending occurrence's time\n", st.Schedules, plural(st.Schedules, "schedule", "schedules"), topic)
	}
}

// importMessageLines is the count of message lines an import read: its
// lines but the controls, the schedules and the occurrences of schedules.
func importMessageLines(st delayq.ImportStats) int {
	return st.Lines - st.ControlsLines - st.Schedules - st.Occurrences
}

// printExportControls says, after an export's summary, that it carries
// the topic's flow controls, when it does.
func printExportControls(w io.Writer, topic string, st delayq.ExportStats) {
	if st.Controls {
		fmt.Fprintf(w, "exported the controls of %s (its pause, limits and automatic partitions, those it has)\n", topic)
	}
}

// printImportControls says, after an import's summary, which controls of
// the file it applied and which the topic had of its own and kept.
func printImportControls(w io.Writer, topic string, st delayq.ImportStats) {
	if len(st.Controls.Applied) > 0 {
		fmt.Fprintf(w, "applied the file's %s to %s\n", strings.Join(st.Controls.Applied, ", "), topic)
	}
	if len(st.Controls.Kept) > 0 {
		fmt.Fprintf(w, "kept the %s that %s had of its own, not the file's (change them with delayq pause, limits or partitions --auto)\n",
			strings.Join(st.Controls.Kept, ", "), topic)
	}
}

// printImportSchedules prints, after an import's summary, what it did
// with schedules and their occurrences, when it read any.
func printImportSchedules(w io.Writer, topic string, st delayq.ImportStats) {
	if st.Schedules > 0 {
		fmt.Fprintf(w, "imported %d of %d %s into %s\n", st.SchedulesImported, st.Schedules, plural(st.Schedules, "schedule", "schedules"), topic)
	}
	if st.Occurrences > 0 {
		fmt.Fprintf(w, "left out %d %s of schedules: an imported schedule writes its pending occurrence itself\n", st.Occurrences, plural(st.Occurrences, "occurrence", "occurrences"))
	}
}

// importErr is the error of an import that left lines out: nil when it
// left none.
func importErr(st delayq.ImportStats) error {
	scheds := st.Schedules - st.SchedulesImported
	var errs []error
	if n := st.Duplicates + st.Malformed + st.Rejected; n > 0 {
		lines := importMessageLines(st)
		errs = append(errs, fmt.Errorf("%d of %d %s not imported: %d %s, %d malformed, %d rejected",
			n, lines, plural(lines, "message", "messages"), st.Duplicates, plural(st.Duplicates, "duplicate", "duplicates"), st.Malformed, st.Rejected))
	}
	if scheds > 0 {
		errs = append(errs, fmt.Errorf("%d of %d %s not imported (reported above)", scheds, st.Schedules, plural(st.Schedules, "schedule", "schedules")))
	}
	return errors.Join(errs...)
}

// deleteListedSchedules deletes from topic the schedules named by an
// export's schedule lines, with their pending occurrences, and prints how
// many it deleted and how many were gone already (nothing when there
// were none).
func deleteListedSchedules(ctx context.Context, client *delayq.Client, topic string, names []string, stdout io.Writer) error {
	if len(names) == 0 {
		return nil
	}
	deleted, gone := 0, 0
	for _, name := range names {
		err := client.Admin().DeleteSchedule(ctx, topic, name)
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, delayq.ErrNotFound):
			gone++
		default:
			return err
		}
	}
	_, err := fmt.Fprintf(stdout, "deleted %d %s of %s; %d %s gone already\n", deleted, plural(deleted, "schedule", "schedules"), topic, gone, plural(gone, "was", "were"))
	return err
}

// importRejection is the report of a line an import refused: a message
// by its id (see rejection), a schedule by its own error, which names it.
func importRejection(line int, id string, err error) string {
	if id == "" {
		return fmt.Sprintf("line %d: %s", line, strings.TrimPrefix(err.Error(), "delayq: "))
	}
	return rejection(line, id, err)
}
