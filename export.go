package delayq

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// Defaults for ExportOptions.
const (
	DefaultExportBatch = 256
	DefaultExportPace  = 1.0
)

// ExportOptions configures Export. The zero value of each field means its
// default.
type ExportOptions struct {
	// States limits the export to messages in these states. Default: all.
	// StateDone is one of them: the ids kept after their delivery, until
	// the end of their uniqueness windows (see Message.UniqueFor); the
	// live states without it leave them out.
	States []State
	// Batch is the COUNT of each HSCAN of a partition's records: about
	// that many messages per read (more when segments are among them, 16
	// at most each). Default DefaultExportBatch (256).
	Batch int
	// Pace is the pause after each read, as a multiple of the time the
	// read took: at 1 the export waits as long as it read, so it keeps
	// one command in flight at most half of the time, whatever the
	// backends' load (a slower backend slows it down in proportion).
	// Default DefaultExportPace (1); negative: no pause.
	Pace float64
	// Rate caps the messages read per second (on top of Pace). Default 0:
	// no cap.
	Rate int
	// Progress, when set, is called after each read with the counts so
	// far.
	Progress func(ExportStats)
}

// ExportStats counts what an export did.
type ExportStats struct {
	Exported   int // messages passed to emit, done ones among them
	Filtered   int // messages read but not in ExportOptions.States
	Duplicates int // messages read again (a rescan of the records, or a move between partitions) and left out
	Corrupt    int // records that could not be decoded, left out (and logged)
	Reads      int // HSCAN batches read
	Rescans    int // partitions scanned twice, as messages left their segments during the first scan
	Schedules  int // schedule definitions written (ExportJSON of a whole topic)
	// Controls: ExportJSON of a whole topic wrote the topic's flow
	// controls (see ExportedControls); false when it has none.
	Controls bool
	Elapsed  time.Duration // since the export began
}

// Export reads every message of topic, partition by partition, and calls
// emit with each, in no particular order; emit may keep the message it is
// given (each is its own). It stops at the first error of emit and
// returns it. The ids kept after their delivery (see Message.UniqueFor)
// are messages in StateDone, with only their Finished and UniqueUntil
// times, while their window lasts by the client's clock (Options.Now);
// one whose window ended is no message, and is left out.
//
// It reads through any proxy with bounded commands, one at a time, while
// consumers and producers run. Each message present from the export's
// start to its end is emitted exactly once, with its record as it was at
// some moment of the export and its state as read just after; messages
// added or removed meanwhile may or may not be. Its memory grows with the
// partition it reads (about 80 bytes a message), not with the topic. A
// change of the partition count that begins during the export fails it
// with ErrChangeRunning: export again. How: see docs/export-import.md,
// Export while consumers run.
func (ins *Inspector) Export(ctx context.Context, topic string, opts ExportOptions, emit func(*ExportedMessage) error) (ExportStats, error) {
	c := ins.c
	begin := time.Now()
	if err := validateTopic(topic); err != nil {
		return ExportStats{}, err
	}
	if err := opts.setDefaults(topic); err != nil {
		return ExportStats{}, err
	}
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		return ExportStats{}, err
	}
	ex := &exporter{c: c, topic: topic, opts: opts, l: l, emit: emit, begin: begin, moving: map[string]struct{}{}}
	for _, p := range exportOrder(l) {
		if err := ex.scanPartition(ctx, p); err != nil {
			return ex.st, err
		}
		if err := c.exportLayoutSame(ctx, topic, l); err != nil {
			return ex.st, err
		}
	}
	ex.st.Elapsed = time.Since(begin)
	return ex.st, nil
}

// setDefaults sets the default of each zero field of o, and fails,
// naming topic, on a negative Batch or Rate or an unknown state.
func (o *ExportOptions) setDefaults(topic string) error {
	if o.Batch == 0 {
		o.Batch = DefaultExportBatch
	}
	if o.Pace == 0 {
		o.Pace = DefaultExportPace
	}
	if o.Batch < 0 || o.Rate < 0 {
		return fmt.Errorf("%w: export of %s: Batch %d and Rate %d must not be negative", ErrInvalid, topic, o.Batch, o.Rate)
	}
	for _, s := range o.States {
		if !validState(s) {
			return fmt.Errorf("%w: export of %s: unknown state %q (want %s, %s, %s or %s)", ErrInvalid, topic, s, StateScheduled, StateInFlight, StateDead, StateDone)
		}
	}
	return nil
}

// exportOrder returns the partitions of layout l in the order an export
// reads them: the partitions messages move out of first, then the others.
func exportOrder(l store.Layout) []int {
	order := l.Sources()
	for p := range l.Span() {
		if !l.IsSource(p) {
			order = append(order, p)
		}
	}
	return order
}

// exporter is one Export under way: what it reads, what it has read and
// its counts.
type exporter struct {
	c     *Client
	topic string
	opts  ExportOptions
	l     store.Layout // the topic's, as read at the start
	emit  func(*ExportedMessage) error
	begin time.Time
	st    ExportStats
	// moving holds the ids read in a source partition that belong
	// elsewhere, left out when read there.
	moving map[string]struct{}
}

// scanPartition reads partition p with HSCAN, opts.Batch fields at a
// time, and emits its messages (see emitRead), pausing after each read
// (see exportPause). When messages left segments during the scan, it
// scans p a second time, which finds those whose new field the first
// passed (see docs/architecture.md, Segments).
func (ex *exporter) scanPartition(ctx context.Context, p int) error {
	source := ex.l.IsSource(p)
	seen := map[string]struct{}{}
	var leftBefore int64
	for cursor, done, scan := "0", false, 1; !done; {
		t0 := time.Now()
		pass, err := ex.c.store.ExportScan(ctx, store.TopicPartition{Topic: ex.topic, P: p}, cursor, ex.opts.Batch)
		if err != nil {
			return err
		}
		took := time.Since(t0)
		if ex.c.exportRead != nil {
			ex.c.exportRead(p, scan, pass.Next == "0")
		}
		if cursor == "0" {
			leftBefore = pass.LeftBefore
		}
		cursor, done = pass.Next, pass.Next == "0"
		if done && scan == 1 && pass.LeftAfter != leftBefore {
			// Messages left segments during the scan: a second
			// scan finds those whose new field the first passed.
			cursor, done, scan = "0", false, 2
			ex.st.Rescans++
		}
		ex.st.Reads++
		if err := ex.emitRead(p, source, seen, &pass); err != nil {
			return err
		}
		ex.st.Elapsed = time.Since(ex.begin)
		if ex.opts.Progress != nil {
			ex.opts.Progress(ex.st)
		}
		if err := exportPause(ctx, took, ex.opts, ex.st, ex.begin); err != nil {
			return err
		}
	}
	return nil
}

// emitRead logs the undecodable records of a read of partition p and
// emits its messages in opts.States, but those read before: in p (seen,
// the ids read there so far) or, for a partition that is no source, in a
// source (moving). In a source, it adds to moving the ids that belong
// elsewhere. A done id whose window ended by the client's clock is left
// out, uncounted: it is no message any more (the reconciler removes it).
func (ex *exporter) emitRead(p int, source bool, seen map[string]struct{}, pass *store.ExportPass) error {
	now := ex.c.opts.Now().UnixMilli()
	for _, bad := range pass.Corrupt {
		ex.st.Corrupt++
		ex.c.log.Warn("export: undecodable record left out", "topic", ex.topic, "partition", p, "record", bad)
	}
	for _, m := range pass.Msgs {
		if _, ok := seen[m.ID]; ok {
			ex.st.Duplicates++
			continue
		}
		seen[m.ID] = struct{}{}
		if source {
			if ex.l.Place(m.ID) != p {
				ex.moving[m.ID] = struct{}{}
			}
		} else if _, ok := ex.moving[m.ID]; ok {
			ex.st.Duplicates++
			continue
		}
		if m.State == store.StateDone && m.Done.Until <= now {
			continue // its window ended: the id is free
		}
		e := exportedOf(m)
		if len(ex.opts.States) > 0 && !slices.Contains(ex.opts.States, e.State) {
			ex.st.Filtered++
			continue
		}
		if err := ex.emit(e); err != nil {
			return err
		}
		ex.st.Exported++
	}
	return nil
}

// exportLayoutSame fails when a change of the partition count began since
// the export read layout l. One that ended is fine: its messages moved
// where the export looked (see Export).
func (c *Client) exportLayoutSame(ctx context.Context, topic string, l store.Layout) error {
	now, err := c.store.ReadLayout(ctx, topic)
	if err != nil {
		return err
	}
	same := now == l || (l.Changing() && !now.Changing() && now.Count == l.Next)
	if !same {
		return fmt.Errorf("%w: the partition count of topic %s began changing (from %d to %d partitions) during the export: export again once it ends",
			ErrChangeRunning, topic, now.Count, now.Next)
	}
	return nil
}

// exportPause waits after a read that took took: Pace times as long, and
// more if needed to keep under Rate.
func exportPause(ctx context.Context, took time.Duration, opts ExportOptions, st ExportStats, begin time.Time) error {
	var wait time.Duration
	if opts.Pace > 0 {
		wait = time.Duration(float64(took) * opts.Pace)
	}
	if opts.Rate > 0 {
		read := st.Exported + st.Filtered + st.Duplicates
		due := time.Duration(float64(read) / float64(opts.Rate) * float64(time.Second))
		wait = max(wait, due-time.Since(begin))
	}
	if wait <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// exportedOf turns a message the store read into an ExportedMessage.
func exportedOf(m store.Exported) *ExportedMessage {
	if m.State == store.StateDone {
		return &ExportedMessage{ID: m.ID, State: StateDone, Finished: msTime(m.Done.Finished), UniqueUntil: msTime(m.Done.Until)}
	}
	r := m.Record
	e := &ExportedMessage{
		ID: m.ID, State: StateScheduled, Due: msTime(r.Due), Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		LastError: r.LastError, Created: msTime(r.Created), Updated: msTime(r.Updated), Traceparent: r.Trace,
		UniqueFor: time.Duration(r.UniqueFor) * time.Millisecond, Body: r.Body,
	}
	if r.First > 0 {
		e.WindowOpened = msTime(r.First)
	}
	switch m.State {
	case store.StateInFlight:
		e.State = StateInFlight
	case store.StateDead:
		e.State, e.DiedAt = StateDead, msTime(m.DiedAt)
	}
	return e
}

// ExportJSON exports topic as Export does, writing each message to w as
// one JSON line (see ExportedMessage.MarshalJSON). An export of every
// state (opts.States empty) first writes a line of the topic's flow
// controls when it has any (see ExportedControls.MarshalJSON), which
// ImportJSON applies with ImportControls, and a line for each of the topic's
// schedules (see ExportSchedules and ExportedSchedule.MarshalJSON), which
// ImportJSON imports with ImportSchedule; the occurrences of schedules
// are among the messages, as they are in the topic.
func (ins *Inspector) ExportJSON(ctx context.Context, topic string, w io.Writer, opts ExportOptions) (ExportStats, error) {
	c := ins.c
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	var scheds []ExportedSchedule
	var ctrl ExportedControls
	if len(opts.States) == 0 {
		var err error
		if ctrl, err = c.Inspector().ExportControls(ctx, topic); err != nil {
			return ExportStats{}, err
		}
		if scheds, err = c.Inspector().ExportSchedules(ctx, topic); err != nil {
			return ExportStats{}, err
		}
	}
	if !ctrl.IsZero() {
		b, err := ctrl.MarshalJSON()
		if err != nil {
			return ExportStats{}, err
		}
		if _, err := bw.Write(append(b, '\n')); err != nil {
			return ExportStats{}, fmt.Errorf("export of %s: write: %w", topic, err)
		}
	}
	for i := range scheds {
		b, err := scheds[i].MarshalJSON()
		if err != nil {
			return ExportStats{}, err
		}
		if _, err := bw.Write(append(b, '\n')); err != nil {
			return ExportStats{}, fmt.Errorf("export of %s: write: %w", topic, err)
		}
	}
	st, err := c.Inspector().Export(ctx, topic, opts, func(m *ExportedMessage) error {
		var err error
		if buf, err = m.appendJSON(buf[:0]); err != nil {
			return err
		}
		_, err = bw.Write(append(buf, '\n'))
		return err
	})
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("export of %s: write: %w", topic, ferr)
	}
	st.Schedules, st.Controls = len(scheds), !ctrl.IsZero()
	return st, err
}
