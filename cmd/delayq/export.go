package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
)

// progressEvery is how often export and import print a progress line on
// stderr.
const progressEvery = time.Second

// runExport implements "delayq export": every message of a topic as JSON
// lines.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("export", "--topic T [--state S,...] [--out FILE] [--batch N] [--pace F] [--rate N]",
		"Writes every message of the topic as one JSON line: id, state (scheduled,\n"+
			"inflight or dead), due, died_at (dead), attempts, max_attempts, last_error,\n"+
			"created, updated (RFC 3339, UTC, milliseconds), unique_for_ms (a uniqueness\n"+
			"window) and body (or body_base64 when the body is not UTF-8); and each id kept\n"+
			"after its delivery, until its window ends, as a line of state done with only\n"+
			"finished and unique_until (--state scheduled,inflight,dead leaves them out);\n"+
			"to stdout or to --out FILE. A file (or the file a link leads to) is replaced\n"+
			"whole or not at all, keeping its permissions (a new one gets the umask's); a\n"+
			"device or fifo is written to directly; a directory is refused. It reads\n"+
			"through the proxy in bounded batches while consumers run: each message\n"+
			"present for the whole export is written exactly once. After each batch it\n"+
			"pauses --pace times as long as the batch took. It prints its progress (count\n"+
			"and rate) on stderr every second, and a summary at the end.", stdout, stderr)
	var states stringsFlag
	cmd.fs.Var(&states, "state", "export only messages in `state`: scheduled, inflight, dead or done (repeatable, or comma-separated)")
	out := cmd.fs.String("out", "", "write to `file` instead of stdout")
	batch := cmd.fs.Int("batch", delayq.DefaultExportBatch, "fields per HSCAN of a partition's records")
	pace := cmd.fs.Float64("pace", delayq.DefaultExportPace, "pause after each batch, as a `multiple` of the time the batch took (0: none)")
	rate := cmd.fs.Int("rate", 0, "read at most `n` messages a second (0: no cap)")
	if err := cmd.parse(args); err != nil {
		return err
	}
	opts := delayq.ExportOptions{Batch: *batch, Pace: *pace, Rate: *rate}
	if *pace == 0 {
		opts.Pace = -1 // the option's zero is its default
	}
	switch {
	case *batch < 1:
		return cmd.usageErr("invalid value %d for flag --batch: must be at least 1", *batch)
	case *pace < 0:
		return cmd.usageErr("invalid value %v for flag --pace: negative", *pace)
	case *rate < 0:
		return cmd.usageErr("invalid value %d for flag --rate: negative", *rate)
	}
	for _, list := range states {
		sts, err := delayq.ParseStates(list)
		if err != nil {
			return cmd.usageErr("invalid value %q for flag --state: want scheduled, inflight, dead or done", list)
		}
		opts.States = append(opts.States, sts...)
	}
	// What is at --out is looked at (a directory refused) before any
	// connection.
	var w io.Writer = stdout
	var o *output
	if *out != "" {
		var err error
		if o, err = createOutput(*out); err != nil {
			return err
		}
		defer o.Abort()
		w = o
	}
	return cmd.connect(func(client *delayq.Client) error {
		last := time.Now()
		opts.Progress = func(st delayq.ExportStats) {
			if time.Since(last) >= progressEvery {
				last = time.Now()
				fmt.Fprintln(stderr, progressLine(cmd.c.topic, st))
			}
		}
		st, err := client.Inspector().ExportJSON(ctx, cmd.c.topic, w, opts)
		if o != nil && o.werr != nil {
			err = o.werr // as it came, without the wrapping of a write through a buffer
		}
		if err != nil {
			return err
		}
		if o != nil {
			if err := o.Commit(); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "exported %d %s of %s in %v (%.0f/s)", st.Exported, plural(st.Exported, "message", "messages"), cmd.c.topic, st.Elapsed.Round(time.Millisecond), rate64(st.Exported, st.Elapsed))
		if st.Corrupt > 0 {
			fmt.Fprintf(stderr, "; %d undecodable records left out (logged)", st.Corrupt)
		}
		fmt.Fprintln(stderr)
		printExportControls(stderr, cmd.c.topic, st)
		printExportSchedules(stderr, cmd.c.topic, st)
		return nil
	})
}

// progressLine is the line export prints while it runs: worded apart
// from the line of an export that finished, so that one that fails later
// does not read as done.
func progressLine(topic string, st delayq.ExportStats) string {
	return fmt.Sprintf("exporting %s: %d %s so far (%.0f/s)", topic, st.Exported, plural(st.Exported, "message", "messages"), rate64(st.Exported, st.Elapsed))
}

// rate64 is n per second over d.
func rate64(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// runImport implements "delayq import": the JSON lines of an export into
// a topic.
func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newCommand("import", "--topic T [--in FILE] [--batch N] [--strict]",
		"Reads the JSON lines of \"delayq export\" from stdin or --in FILE and writes each\n"+
			"message into the topic with its id, due, attempts, max attempts, last error,\n"+
			"created and updated times: scheduled and in flight ones scheduled at their due\n"+
			"(delivered at once when it is past), dead ones dead. An id the topic holds\n"+
			"already is left alone and reported as a duplicate, so importing a file twice\n"+
			"changes nothing. A malformed line is reported with its number and skipped, or\n"+
			"with --strict ends the import (the lines before it are written); it is never\n"+
			"written in part. Each line not imported is reported on stderr; the exit\n"+
			"status is 1 when there was any. A schedule's line (an export of a whole topic\n"+
			"begins with them) adds the schedule, unless the topic has one of that name,\n"+
			"and its chain goes on at the occurrence that was pending in the export; the\n"+
			"occurrences of schedules among the messages are left out. A done line keeps\n"+
			"its id taken in the topic until its unique_until, where the id holds nothing;\n"+
			"one whose window has ended is left out and counted.", stdout, stderr)
	in := cmd.fs.String("in", "", "read `file` instead of stdin")
	batch := cmd.fs.Int("batch", delayq.DefaultImportBatch, "messages per write")
	strict := cmd.fs.Bool("strict", false, "stop at the first malformed line")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if *batch < 1 {
		return cmd.usageErr("invalid value %d for flag --batch: must be at least 1", *batch)
	}
	r := stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		r = f
	}
	return cmd.connect(func(client *delayq.Client) error {
		begin, last := time.Now(), time.Now()
		badLine := 0 // the last malformed line reported
		st, err := client.Admin().ImportJSON(ctx, cmd.c.topic, r, delayq.ImportOptions{
			Batch: *batch, Strict: *strict,
			Report: func(line int, id string, err error) {
				msg := strings.TrimPrefix(err.Error(), "delayq: ")
				if strings.HasPrefix(msg, "malformed line: ") {
					badLine = line
					fmt.Fprintln(stderr, strings.TrimPrefix(msg, "malformed line: ")) // names its line
					return
				}
				fmt.Fprintln(stderr, importRejection(line, id, err))
			},
			Progress: func(st delayq.ImportStats) {
				if time.Since(last) >= progressEvery {
					last = time.Now()
					fmt.Fprintf(stderr, "imported %d %s into %s (%.0f/s)\n", st.Imported, plural(st.Imported, "message", "messages"),
						cmd.c.topic, rate64(st.Imported, time.Since(begin)))
				}
			},
		})
		elapsed := time.Since(begin)
		lines := importMessageLines(st)
		fmt.Fprintf(stderr, "imported %d of %d %s into %s in %v (%.0f/s)\n", st.Imported, lines, plural(lines, "message", "messages"), cmd.c.topic,
			elapsed.Round(time.Millisecond), rate64(st.Imported, elapsed))
		printImportControls(stderr, cmd.c.topic, st)
		printImportSchedules(stderr, cmd.c.topic, st)
		if st.Ended > 0 {
			fmt.Fprintf(stderr, "left out %d done %s whose uniqueness window had ended: %s free\n", st.Ended, plural(st.Ended, "id", "ids"), plural(st.Ended, "it is", "they are"))
		}
		if *strict && badLine > 0 && errors.Is(err, delayq.ErrMalformed) {
			// The line and its reason are reported above already.
			return fmt.Errorf("import into %s stopped at line %d, which is malformed (--strict)", cmd.c.topic, badLine)
		}
		if err != nil {
			return fmt.Errorf("import into %s: %w", cmd.c.topic, err)
		}
		return importErr(st)
	})
}

// Deletes of "delete --in": ids per DeleteMany call, calls at once.
const (
	deleteBatch   = 500
	deleteWorkers = 4
)

// deleteListed deletes the messages of topic whose ids are on the lines
// of the file at path (JSON objects with an "id", as export writes them),
// deleteBatch at a time with Client.DeleteMany, deleteWorkers batches at
// once, and prints how many it deleted and how many were gone already. A
// line without an id stops it, naming the line.
func deleteListed(ctx context.Context, client *delayq.Client, topic, path string, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	defer f.Close()
	batches := make(chan []string)
	var deleted, gone atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range deleteWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ids := range batches {
				found, err := client.DeleteMany(ctx, topic, ids)
				if err != nil {
					fail(err)
					cancel()
					continue
				}
				for _, ok := range found {
					if ok {
						deleted.Add(1)
					} else {
						gone.Add(1)
					}
				}
			}
		}()
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var ids, schedules []string
	for n := 1; ctx.Err() == nil; n++ {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			fail(fmt.Errorf("read %s line %d: %w", path, n, rerr))
			break
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var v struct {
				ID       string `json:"id"`
				Schedule *struct {
					Name string `json:"name"`
				} `json:"schedule"` // a schedule's line: deleted after the messages
				Controls json.RawMessage `json:"controls"` // the topic's controls: left as they are
			}
			err := json.Unmarshal(line, &v)
			switch {
			case err == nil && v.Controls != nil && v.ID == "":
			case err == nil && v.Schedule != nil && v.Schedule.Name != "":
				schedules = append(schedules, v.Schedule.Name)
			case err != nil || v.ID == "":
				fail(fmt.Errorf("%s line %d: no id (%v)", path, n, err))
				rerr = io.EOF // stop reading: only the full batches sent before are deleted
				ids = nil
			default:
				ids = append(ids, v.ID)
			}
		}
		if len(ids) == deleteBatch || (rerr != nil && len(ids) > 0) {
			select {
			case batches <- ids:
			case <-ctx.Done():
			}
			ids = nil
		}
		if rerr != nil {
			break
		}
	}
	close(batches)
	wg.Wait()
	d, g := int(deleted.Load()), int(gone.Load())
	fmt.Fprintf(stdout, "deleted %d %s of %s; %d %s gone already\n", d, plural(d, "message", "messages"), topic, g, plural(g, "was", "were"))
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr == nil {
		firstErr = deleteListedSchedules(ctx, client, topic, schedules, stdout)
	}
	return firstErr
}
