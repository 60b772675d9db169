package delayq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// importedFields is what an imported message keeps of its record besides
// what a Message carries (see Admin.Import).
type importedFields struct {
	attempts         int
	lastError        string
	created, updated int64 // unix ms; 0: the time of the write
	first            int64 // unix ms: the debounce window's opening; 0: none
	dead             bool
	diedAt           int64 // unix ms, when dead
}

// fill sets the imported fields of rec, a record written now.
func (f *importedFields) fill(rec *store.Record) {
	rec.Attempts, rec.LastError, rec.First = f.attempts, f.lastError, f.first
	if f.created != 0 {
		rec.Created = f.created
	}
	if f.updated != 0 {
		rec.Updated = f.updated
	}
}

// OutcomeEnded is Import's outcome of a done message whose uniqueness
// window had ended (UniqueUntil not after the client's Options.Now): its
// id is free, there is nothing to keep, and nothing is written. Its
// result has no error.
const OutcomeEnded Outcome = "ended"

// Import writes exported messages into topic, each with its id, due time,
// attempts, max attempts, last error, created and updated times, trace,
// uniqueness window and body:
// a scheduled message stays scheduled at its due, one in flight becomes
// scheduled at its due (its delivery in progress did not end where it was
// exported), and a dead one is written dead, with its time of death. A
// message due in the past is delivered at once. A message with a
// uniqueness window (UniqueFor) keeps it: after its delivery, its id is
// done in topic.
//
// It writes as SendBatch writes messages of given ids, in the topic's
// layout (during a change of the partition count too): an id the topic
// holds already, in any state, is left alone and its result wraps
// ErrDuplicate, so importing the same messages twice changes nothing.
//
// A done message (StateDone: an id kept after its delivery, with only
// Finished and UniqueUntil) keeps its id taken in topic until
// UniqueUntil, as it was in the topic it was exported from: its Done is
// written into the id's partition of the topic's layout, where the id
// holds nothing (or a done id whose window ended). An id that holds a
// message or another done id is left alone and its result wraps
// ErrDuplicate; one that holds the same done id already (an import of
// the same messages again) is a success. A done message whose window
// ended by the client's clock (Options.Now) is not written: its outcome
// is OutcomeEnded, without an error.
//
// Each message's outcome is in its slot of the result; the error is for
// failures of the whole call, after which some messages may have been
// written (import them again and treat ErrDuplicate as success).
func (adm *Admin) Import(ctx context.Context, topic string, msgs []ExportedMessage) ([]SendResult, error) {
	c := adm.c
	select {
	case <-c.co.closed:
		return nil, fmt.Errorf("import: %w", ErrClosed)
	default:
	}
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	now := c.opts.Now()
	res := make([]SendResult, len(msgs))
	var live, dones []int // indexes into msgs
	for i := range msgs {
		e := &msgs[i]
		if e.State != StateDone {
			live = append(live, i)
			continue
		}
		res[i].ID = e.ID
		switch err := checkImportedDone(e); {
		case err != nil:
			res[i].Err = err
		case !e.UniqueUntil.After(now):
			res[i].Outcome = OutcomeEnded
		default:
			dones = append(dones, i)
		}
	}
	ms := make([]Message, len(live))
	ws := make([]pendingWrite, len(live))
	imps := make([]importedFields, len(live))
	for j, i := range live {
		e := &msgs[i]
		imps[j] = importedFields{
			attempts: e.Attempts, lastError: e.LastError, dead: e.State == StateDead,
			created: e.Created.UnixMilli(), updated: e.Updated.UnixMilli(), diedAt: e.DiedAt.UnixMilli(),
		}
		if e.Created.IsZero() {
			imps[j].created = 0
		}
		if e.Updated.IsZero() {
			imps[j].updated = 0
		}
		if !e.WindowOpened.IsZero() {
			imps[j].first = e.WindowOpened.UnixMilli()
		}
		if e.DiedAt.IsZero() {
			imps[j].diedAt = imps[j].updated
			if imps[j].diedAt == 0 {
				imps[j].diedAt = now.UnixMilli()
			}
		}
		ms[j] = Message{Topic: topic, ID: e.ID, Body: e.Body, At: e.Due, MaxAttempts: e.MaxAttempts, UniqueFor: e.UniqueFor,
			trace: e.Traceparent, imported: &imps[j]}
		w := &ws[j]
		w.msg, w.res.ID = &ms[j], e.ID
		switch {
		case e.ID == "":
			w.res.Err = fmt.Errorf("%w: an imported message needs its id", ErrInvalid)
		case !validState(e.State):
			w.res.Err = fmt.Errorf("%w: state %q of %q (want %s, %s, %s or %s)", ErrInvalid, e.State, e.ID, StateScheduled, StateInFlight, StateDead, StateDone)
		case e.Due.IsZero():
			w.res.Err = fmt.Errorf("%w: %q has no due time", ErrInvalid, e.ID)
		case e.Attempts < 0:
			w.res.Err = fmt.Errorf("%w: attempts %d of %q is negative", ErrInvalid, e.Attempts, e.ID)
		case e.Traceparent != "" && !parseTraceparent(e.Traceparent).IsValid():
			w.res.Err = fmt.Errorf("%w: traceparent %q of %q is not a W3C traceparent", ErrInvalid, e.Traceparent, e.ID)
		case !e.Finished.IsZero() || !e.UniqueUntil.IsZero():
			w.res.Err = fmt.Errorf("%w: %q in state %s has a finished or unique-until time: only a done message has them", ErrInvalid, e.ID, e.State)
		}
		if w.res.Err != nil {
			continue
		}
		id, due, err := c.prepare(&ms[j], now)
		w.res = SendResult{ID: id, Due: due, Err: err}
	}
	if len(ws) > 0 {
		if err := c.write(ctx, now, ws); err != nil {
			return nil, fmt.Errorf("import into %s: %w", topic, err)
		}
	}
	if len(dones) > 0 {
		if err := c.importDones(ctx, topic, now, msgs, dones, res); err != nil {
			return nil, fmt.Errorf("import into %s: %w", topic, err)
		}
	}
	for j, i := range live {
		res[i] = ws[j].res
	}
	return res, nil
}

// checkImportedDone checks a done message of an import: its id, its
// times, and no field but those.
func checkImportedDone(e *ExportedMessage) error {
	if e.ID == "" {
		return fmt.Errorf("%w: an imported done message needs its id", ErrInvalid)
	}
	if err := validateID(e.ID); err != nil {
		return err
	}
	switch {
	case e.Finished.IsZero() || e.UniqueUntil.IsZero():
		return fmt.Errorf("%w: done message %q needs its finished and unique-until times", ErrInvalid, e.ID)
	case e.UniqueUntil.Before(e.Finished):
		return fmt.Errorf("%w: done message %q is unique until %s, before it finished (%s)", ErrInvalid, e.ID,
			e.UniqueUntil.UTC().Format(exportTime), e.Finished.UTC().Format(exportTime))
	case !e.Due.IsZero() || len(e.Body) > 0 || e.Attempts != 0 || e.MaxAttempts != 0 || e.LastError != "" || !e.DiedAt.IsZero() ||
		e.UniqueFor != 0 || e.Traceparent != "" || !e.WindowOpened.IsZero() || !e.Created.IsZero() || !e.Updated.IsZero():
		return fmt.Errorf("%w: done message %q has fields of a message (due, body, attempts...): a done message has only its id and times", ErrInvalid, e.ID)
	}
	return nil
}

// importDones writes the done messages dones (indexes into msgs, each
// checked and within its window at now) into topic: each id's Done into
// its partition in the topic's layout, where the id holds nothing (see
// store.PutDones), in one round trip. During a change of the partition
// count, an id found in its old partition is a duplicate, as a message's
// is (see place). It sets each one's result in res; the error is for a
// failure of the whole write.
func (c *Client) importDones(ctx context.Context, topic string, now time.Time, msgs []ExportedMessage, dones []int, res []SendResult) error {
	ctx = c.retrying(ctx)
	fail := func(err error) error {
		if ctx.Err() != nil {
			return err
		}
		for _, i := range dones {
			if res[i].Err == nil {
				res[i].Err = err
			}
		}
		return nil
	}
	l, err := c.ensureTopic(ctx, topic)
	if err != nil {
		return fail(err)
	}
	var old oldPlaces // ids to look for in their old partition
	for _, i := range dones {
		id := msgs[i].ID
		if p := l.Old(id); p != l.Place(id) {
			old.add(store.TopicPartition{Topic: topic, P: p}, id, i)
		}
	}
	if len(old.lookups) > 0 {
		there, err := c.store.Exists(ctx, old.lookups, c.opts.Now().UnixMilli())
		if err != nil {
			return fail(err)
		}
		for j, lk := range old.lookups {
			for k, i := range old.of[j] {
				if there[j][k].There {
					res[i].Err = fmt.Errorf("%w: %q in topic %s (in its partition before the change of the count)", ErrDuplicate, lk.IDs[k], topic)
					res[i].Outcome = OutcomeRejected
				}
			}
		}
	}
	var groups []store.DoneGroup
	var members [][]int // the indexes of each group's ids
	for _, i := range dones {
		if res[i].Err != nil {
			continue
		}
		e := &msgs[i]
		p := l.Place(e.ID)
		g := slices.IndexFunc(groups, func(g store.DoneGroup) bool { return g.P == p })
		if g < 0 {
			g = len(groups)
			groups, members = append(groups, store.DoneGroup{TopicPartition: store.TopicPartition{Topic: topic, P: p}}), append(members, nil)
		}
		groups[g].IDs = append(groups[g].IDs, e.ID)
		groups[g].Dones = append(groups[g].Dones, store.Done{Finished: e.Finished.UnixMilli(), Until: e.UniqueUntil.UnixMilli()})
		members[g] = append(members[g], i)
	}
	if len(groups) == 0 {
		return nil
	}
	out, err := c.store.PutDones(ctx, groups, now.UnixMilli())
	if err != nil {
		return fail(err)
	}
	for g, m := range members {
		for k, i := range m {
			switch out[g][k] {
			case store.DoneWritten, store.DoneSame:
				res[i].Outcome = OutcomeCreated
			default:
				res[i].Err = fmt.Errorf("%w: %q in topic %s holds a message, or a done id of another delivery", ErrDuplicate, msgs[i].ID, topic)
				res[i].Outcome = OutcomeRejected
			}
		}
	}
	return nil
}

// Defaults for ImportOptions.
const (
	DefaultImportBatch   = 500
	DefaultImportWriters = 4
)

// ImportOptions configures ImportJSON. The zero value of each field means
// its default.
type ImportOptions struct {
	// Batch is the messages per Import call. Default DefaultImportBatch
	// (500).
	Batch int
	// Writers is the Import calls under way at once, while the next lines
	// are read. Default DefaultImportWriters (4).
	Writers int
	// Strict stops the import at the first malformed line: the lines
	// before it are written, none after. Default false: a malformed line
	// is reported (see Report) and skipped.
	Strict bool
	// Report, when set, is called with each line not imported: malformed
	// (err wraps ErrMalformed), a duplicate (ErrDuplicate) or refused
	// (ErrInvalid), in line order, from one goroutine at a time. id is ""
	// when the line had none.
	Report func(line int, id string, err error)
	// Progress, when set, is called after each batch with the counts so
	// far.
	Progress func(ImportStats)
}

// ImportStats counts what ImportJSON did.
type ImportStats struct {
	Lines      int // lines read, blank ones left out
	Imported   int
	Duplicates int // ids the topic held already, left alone
	Malformed  int // lines that could not be read
	Rejected   int // messages refused (ErrInvalid: a body over the limit, a bad id)
	// Ended counts the done lines (ids kept after their delivery) whose
	// uniqueness window had ended by the import: their ids are free,
	// and nothing was written (OutcomeEnded). Neither imported nor
	// reported.
	Ended int
	// Schedules counts the schedule lines read, SchedulesImported those
	// written (ImportSchedule); the others (the topic has a schedule of
	// that name, or the definition is refused) are reported.
	Schedules, SchedulesImported int
	// Occurrences counts the messages left out because they are
	// occurrences of schedules (ids beginning with ScheduleIDPrefix):
	// an imported schedule's chain writes its pending occurrence.
	Occurrences int
	// ControlsLines counts the lines of the topic's flow controls read,
	// and Controls says what ImportControls did with them: the controls
	// applied, and those the topic had of its own and kept.
	ControlsLines int
	Controls      ControlsImport
}

// importBatch is a batch of lines ImportJSON writes: the lines read, then
// (parsed by the batch's goroutine) its messages, the lines they came
// from and the malformed lines among them, and once done the outcome.
type importBatch struct {
	raw      [][]byte
	rawLines []int
	msgs     []ExportedMessage
	lines    []int
	bad      []badLine
	scheds   []importedSchedule
	controls []importedControls
	occurs   int // occurrences left out
	// halt: this batch, or one before it, stops a strict import; only
	// the lines before the malformed one were written.
	halt   bool
	parsed chan struct{} // closed once msgs, bad and halt are set
	res    []SendResult
	err    error
	done   chan struct{} // closed once written
}

// importedSchedule is a schedule line of an importBatch and, once
// written, its outcome.
type importedSchedule struct {
	line int
	s    ExportedSchedule
	err  error
}

// importedControls is a controls line of an importBatch and, once
// applied, what became of it.
type importedControls struct {
	line int
	e    ExportedControls
	did  ControlsImport
	err  error
}

// badLine is a malformed line, for its report.
type badLine struct {
	line int
	id   string
	err  error
}

// parse reads the batch's lines. With strict, the messages after the
// first malformed line are dropped and the batch halts the import.
func (b *importBatch) parse(strict bool) {
	for i, line := range b.raw {
		var m ExportedMessage
		err := m.UnmarshalJSON(line)
		if err != nil && isLineOf(line, "controls") {
			var e ExportedControls
			if err = e.UnmarshalJSON(line); err == nil {
				b.controls = append(b.controls, importedControls{line: b.rawLines[i], e: e})
				continue
			}
		}
		if err != nil && isLineOf(line, "schedule") {
			var s ExportedSchedule
			if err = s.UnmarshalJSON(line); err == nil {
				b.scheds = append(b.scheds, importedSchedule{line: b.rawLines[i], s: s})
				continue
			}
		}
		if err == nil && strings.HasPrefix(m.ID, ScheduleIDPrefix) {
			b.occurs++
			continue
		}
		if err != nil {
			n := b.rawLines[i]
			b.bad = append(b.bad, badLine{n, lenientID(line), fmt.Errorf("%w: line %d: %v", ErrMalformed, n, err)})
			if strict {
				b.halt = true
				break
			}
			continue
		}
		b.msgs, b.lines = append(b.msgs, m), append(b.lines, b.rawLines[i])
	}
	b.raw = nil
}

// ImportJSON imports the JSON lines of r (see ExportedMessage.MarshalJSON)
// into topic with Import, opts.Batch lines at a time, opts.Writers
// batches at once (each parsed by its own goroutine: JSON costs the
// client more than the write). Blank lines are skipped. A malformed line
// is never written, not even in part: it is reported with its line number
// and skipped, or with opts.Strict ends the import, the lines before it
// written and none after, with an error wrapping ErrMalformed. The error
// is nil when every line was read; duplicates and refused messages are in
// the stats and reported, not errors.
//
// A controls line (see ExportedControls.MarshalJSON) is applied with
// ImportControls, before the schedules and messages of its batch: each
// control only where the topic has none of its own (ImportStats.Controls
// says which it applied and which it kept).
// A schedule's line (see ExportedSchedule.MarshalJSON) is written with
// ImportSchedule, before the messages of its batch: one the topic has
// already is left alone and reported as a duplicate. The occurrences of
// schedules among the messages (ids beginning with ScheduleIDPrefix) are
// counted and left out: the imported schedule's chain writes its pending
// occurrence, at the time the schedule's line gives.
//
// A done line (an id kept after its delivery, see MarshalJSON) keeps the
// id taken in topic until its unique_until, as Import writes it; one
// whose window ended by the import is counted (ImportStats.Ended) and
// left out, unreported.
func (adm *Admin) ImportJSON(ctx context.Context, topic string, r io.Reader, opts ImportOptions) (ImportStats, error) {
	c := adm.c
	if err := opts.setDefaults(); err != nil {
		return ImportStats{}, err
	}
	im := &importer{c: c, topic: topic, opts: opts, cur: &importBatch{}}
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n') // no length limit: bodies may be over 1 MiB
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return im.end(fmt.Errorf("read line %d: %w", n, rerr))
		}
		if len(bytes.TrimSpace(line)) > 0 {
			im.cur.raw, im.cur.rawLines = append(im.cur.raw, line), append(im.cur.rawLines, n)
		}
		if len(im.cur.raw) >= opts.Batch || (rerr != nil && len(im.cur.raw) > 0) {
			im.send(ctx)
		}
		if im.stopped() || rerr != nil {
			return im.end(nil)
		}
		if err := ctx.Err(); err != nil {
			return im.end(fmt.Errorf("stopped at line %d: %w", n, err))
		}
	}
}

// setDefaults sets the default of each zero field of o, and fails on a
// negative Batch or Writers.
func (o *ImportOptions) setDefaults() error {
	if o.Batch == 0 {
		o.Batch = DefaultImportBatch
	}
	if o.Writers == 0 {
		o.Writers = DefaultImportWriters
	}
	if o.Batch < 0 || o.Writers < 0 {
		return fmt.Errorf("%w: ImportOptions.Batch %d and Writers %d must not be negative", ErrInvalid, o.Batch, o.Writers)
	}
	return nil
}

// importer is one ImportJSON under way: the batch being read, the batches
// sent, and what they did. Only ImportJSON's goroutine uses it.
type importer struct {
	c     *Client
	topic string
	opts  ImportOptions
	st    ImportStats
	// queue holds the batches under way, oldest first: their outcomes
	// are counted and reported in that order.
	queue []*importBatch
	prev  *importBatch // the batch sent last
	cur   *importBatch // the batch being read
	// failed is the error of the first batch that failed, halted the
	// malformed line that stopped a strict import: either ends it.
	failed, halted error
}

// stopped reports whether a batch failed or a strict import halted.
func (im *importer) stopped() bool { return im.failed != nil || im.halted != nil }

// send starts a goroutine that parses and writes the batch read so far
// (see importBatch.run) and begins the next; then, while opts.Writers
// batches are under way, it finishes the oldest.
func (im *importer) send(ctx context.Context) {
	b, before := im.cur, im.prev
	b.parsed, b.done = make(chan struct{}), make(chan struct{})
	im.cur, im.prev = &importBatch{}, b
	im.queue = append(im.queue, b)
	go b.run(ctx, im.c, im.topic, im.opts.Strict, before)
	for len(im.queue) >= im.opts.Writers && !im.stopped() {
		im.finish()
	}
}

// finish waits until the oldest batch under way is written and counts it
// (see count); after a batch failed or a strict import halted, it only
// waits. A batch that failed ends the import with its lines' numbers.
func (im *importer) finish() {
	b := im.queue[0]
	im.queue = im.queue[1:]
	<-b.done
	if im.stopped() {
		return
	}
	if b.err != nil {
		im.failed = fmt.Errorf("lines %d to %d: %w", b.rawLines[0], b.rawLines[len(b.rawLines)-1], b.err)
		return
	}
	im.count(b)
}

// count adds the lines of written batch b to the stats, reports those
// not imported in line order, halts a strict import at b's malformed
// line, and reports the progress.
func (im *importer) count(b *importBatch) {
	st := &im.st
	st.Lines += len(b.msgs) + len(b.bad) + len(b.scheds) + len(b.controls) + b.occurs
	st.ControlsLines += len(b.controls)
	st.Malformed += len(b.bad)
	st.Schedules += len(b.scheds)
	st.Occurrences += b.occurs
	// The lines not imported, reported in line order.
	var reps []badLine
	for _, x := range b.controls {
		if x.err != nil {
			reps = append(reps, badLine{x.line, "", x.err})
			continue
		}
		st.Controls.Applied = append(st.Controls.Applied, x.did.Applied...)
		st.Controls.Kept = append(st.Controls.Kept, x.did.Kept...)
	}
	for _, x := range b.scheds {
		if x.err == nil {
			st.SchedulesImported++
			continue
		}
		reps = append(reps, badLine{x.line, "", x.err})
	}
	for i, r := range b.res {
		switch {
		case r.Err == nil && r.Outcome == OutcomeEnded:
			st.Ended++
			continue
		case r.Err == nil:
			st.Imported++
			continue
		case errors.Is(r.Err, ErrDuplicate):
			st.Duplicates++
		default:
			st.Rejected++
		}
		reps = append(reps, badLine{b.lines[i], b.msgs[i].ID, r.Err})
	}
	reps = append(reps, b.bad...)
	slices.SortStableFunc(reps, func(x, y badLine) int { return x.line - y.line })
	if im.opts.Report != nil {
		for _, x := range reps {
			im.opts.Report(x.line, x.id, x.err)
		}
	}
	if b.halt && len(b.bad) > 0 { // the batch with the malformed line: finish counts none after it
		im.halted = b.bad[len(b.bad)-1].err
	}
	if im.opts.Progress != nil {
		im.opts.Progress(*st)
	}
}

// end finishes the batches under way and returns the stats, with the
// error of a failed batch, a strict import's halt, and err.
func (im *importer) end(err error) (ImportStats, error) {
	for len(im.queue) > 0 {
		im.finish()
	}
	return im.st, errors.Join(im.failed, im.halted, err)
}

// run is a batch's goroutine: it parses the batch, drops what it holds
// when the batch before halted a strict import (which writes nothing
// after a malformed line), then writes its schedules and its messages
// (Import). It closes b.parsed once parsed and b.done once written.
func (b *importBatch) run(ctx context.Context, c *Client, topic string, strict bool, before *importBatch) {
	defer close(b.done)
	b.parse(strict)
	if before != nil {
		<-before.parsed // a strict import writes nothing after a malformed line
		if before.halt {
			b.halt, b.msgs, b.bad, b.scheds, b.controls, b.occurs = true, nil, nil, nil, nil, 0
		}
	}
	close(b.parsed)
	if b.err = b.importControls(ctx, c, topic); b.err != nil {
		return
	}
	if b.err = b.importSchedules(ctx, c, topic); b.err != nil {
		return
	}
	if len(b.msgs) > 0 { // none after a batch that halted
		b.res, b.err = c.Admin().Import(ctx, topic, b.msgs)
	}
}

// importControls applies the batch's controls lines with
// ImportControls, creating the topic first (in the client's count, as
// the messages would); controls the library refuses are the line's
// outcome, any other error the batch's.
func (b *importBatch) importControls(ctx context.Context, c *Client, topic string) error {
	for i := range b.controls {
		x := &b.controls[i]
		if _, err := c.ensureTopic(ctx, topic); err != nil {
			return fmt.Errorf("line %d: %w", x.line, err)
		}
		x.did, x.err = c.Admin().ImportControls(ctx, topic, x.e)
		if x.err != nil && !errors.Is(x.err, ErrInvalid) {
			return fmt.Errorf("line %d: %w", x.line, x.err)
		}
	}
	return nil
}

// importSchedules writes the batch's schedules with ImportSchedule, each
// outcome in its slot; a schedule the topic has or a bad one is an
// outcome, any other error the batch's.
func (b *importBatch) importSchedules(ctx context.Context, c *Client, topic string) error {
	for i := range b.scheds {
		x := &b.scheds[i]
		_, x.err = c.Admin().ImportSchedule(ctx, topic, x.s)
		if x.err != nil && !errors.Is(x.err, ErrExists) && !errors.Is(x.err, ErrInvalid) {
			return fmt.Errorf("line %d: %w", x.line, x.err)
		}
	}
	return nil
}

// lenientID returns the id of a line that did not parse, if it has one,
// for its report.
func lenientID(line []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(line, &v)
	return v.ID
}
