package delayq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// exportAll exports topic and returns its messages by id, failing the
// test on an error or on an id emitted twice.
func exportAll(t *testing.T, c *Client, topic string, opts ExportOptions) (map[string]*ExportedMessage, ExportStats) {
	t.Helper()
	out := map[string]*ExportedMessage{}
	st, err := c.Inspector().Export(context.Background(), topic, opts, func(m *ExportedMessage) error {
		if _, ok := out[m.ID]; ok {
			return fmt.Errorf("%q emitted twice", m.ID)
		}
		out[m.ID] = m
		return nil
	})
	if err != nil {
		t.Fatalf("export %s: %v", topic, err)
	}
	if st.Exported != len(out) {
		t.Fatalf("export %s: stats say %d exported, emit saw %d", topic, st.Exported, len(out))
	}
	return out, st
}

// sameExported reports how two exports of a message differ, "" if in no
// way (times compared to the millisecond).
func sameExported(a, b *ExportedMessage) string {
	var diffs []string
	tm := func(name string, x, y time.Time) {
		if !x.Equal(y) {
			diffs = append(diffs, fmt.Sprintf("%s %v != %v", name, x, y))
		}
	}
	if a.State != b.State {
		diffs = append(diffs, fmt.Sprintf("state %s != %s", a.State, b.State))
	}
	tm("due", a.Due, b.Due)
	tm("died_at", a.DiedAt, b.DiedAt)
	tm("created", a.Created, b.Created)
	tm("updated", a.Updated, b.Updated)
	if a.Attempts != b.Attempts || a.MaxAttempts != b.MaxAttempts || a.LastError != b.LastError {
		diffs = append(diffs, fmt.Sprintf("attempts %d/%d %q != %d/%d %q", a.Attempts, a.MaxAttempts, a.LastError, b.Attempts, b.MaxAttempts, b.LastError))
	}
	if a.Traceparent != b.Traceparent {
		diffs = append(diffs, fmt.Sprintf("traceparent %q != %q", a.Traceparent, b.Traceparent))
	}
	if a.UniqueFor != b.UniqueFor {
		diffs = append(diffs, fmt.Sprintf("unique for %v != %v", a.UniqueFor, b.UniqueFor))
	}
	tm("finished", a.Finished, b.Finished)
	tm("unique_until", a.UniqueUntil, b.UniqueUntil)
	if !bytes.Equal(a.Body, b.Body) {
		diffs = append(diffs, fmt.Sprintf("body %q != %q", a.Body, b.Body))
	}
	return strings.Join(diffs, "; ")
}

// TestExportImportRoundTrip fills a topic with messages in every state and
// storage (segments, records of given ids, UTF-8 and binary bodies),
// exports it as JSON lines, imports them into another topic and exports
// that: in flight becomes scheduled, everything else is the same, field
// by field. A second import changes nothing and reports every message as
// a duplicate.
func TestExportImportRoundTrip(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const n = 4
		c := newClient(t, addr, Options{Partitions: n})
		src, dst := "exp-src", "exp-dst"
		far := time.Now().Add(time.Hour)
		// Generated ids due far ahead: stored in segments.
		var batch []Message
		for i := range 40 {
			batch = append(batch, Message{Topic: src, Body: []byte(fmt.Sprintf("seg %d ☃", i)), At: far.Add(time.Duration(i) * time.Millisecond)})
		}
		batch = append(batch, Message{Topic: src, ID: "bin", Body: []byte{0xff, 0x00, 0xfe}, At: far, MaxAttempts: 3})
		batch = append(batch, Message{Topic: src, ID: "empty", At: far})
		mustBatch(t, c, batch)
		// One in flight and one dead, in partition 0.
		flight, dead := samePartition("f", 0, n), samePartition("d", 0, n)
		soon := time.Now().Add(20 * time.Millisecond)
		recs := beginAll(t, c, src,
			Message{Topic: src, ID: flight, Body: []byte("b-" + flight), At: soon},
			Message{Topic: src, ID: dead, Body: []byte("b-" + dead), At: soon})
		r := *recs[1]
		r.Attempts, r.LastError, r.Updated = 4, "boom \"quoted\"", time.Now().UnixMilli()
		diedAt := time.Now().Add(-time.Minute).UnixMilli()
		makeDead(t, c, src, dead, &r, time.UnixMilli(diedAt))

		got, st := exportAll(t, c, src, ExportOptions{Batch: 7, Pace: -1})
		if len(got) != len(batch)+2 {
			t.Fatalf("exported %d messages, want %d (stats %+v)", len(got), len(batch)+2, st)
		}
		if got[flight].State != StateInFlight || got[dead].State != StateDead || got["bin"].State != StateScheduled {
			t.Fatalf("states: flight %s, dead %s, bin %s", got[flight].State, got[dead].State, got["bin"].State)
		}
		if !got[dead].DiedAt.Equal(time.UnixMilli(diedAt)) || got[dead].Attempts != 4 || got[dead].LastError != r.LastError {
			t.Fatalf("dead message exported as %+v", got[dead])
		}
		// Every message as Get sees it.
		for id, m := range got {
			in, err := c.Get(ctx, src, id)
			if err != nil {
				t.Fatal(err)
			}
			want := &ExportedMessage{ID: id, State: in.State, Due: in.Due, DiedAt: in.DiedAt, Attempts: in.Attempts,
				MaxAttempts: in.MaxAttempts, LastError: in.LastError, Created: in.Created, Updated: in.Updated, Body: in.Body}
			if d := sameExported(m, want); d != "" {
				t.Errorf("%q: export and Get differ: %s", id, d)
			}
		}
		// Through the JSON lines format, into another topic.
		var buf bytes.Buffer
		if _, err := c.Inspector().ExportJSON(ctx, src, &buf, ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		file := buf.String()
		if !strings.Contains(file, `"body_base64":"/wD+"`) || !strings.Contains(file, `"state":"inflight"`) {
			t.Fatalf("export lacks the binary body or the in-flight state:\n%s", file)
		}
		ist, err := c.Admin().ImportJSON(ctx, dst, strings.NewReader(file), ImportOptions{Batch: 5})
		if err != nil || ist.Imported != len(got) || ist.Duplicates+ist.Malformed+ist.Rejected != 0 {
			t.Fatalf("import: %+v, %v", ist, err)
		}
		back, _ := exportAll(t, c, dst, ExportOptions{})
		if len(back) != len(got) {
			t.Fatalf("re-exported %d messages, want %d", len(back), len(got))
		}
		for id, m := range got {
			want := *m
			if want.State == StateInFlight {
				want.State = StateScheduled
			}
			if d := sameExported(back[id], &want); d != "" {
				t.Errorf("%q: imported message differs: %s", id, d)
			}
		}
		// A second import: all duplicates, nothing changed.
		var reported atomic.Int64
		ist, err = c.Admin().ImportJSON(ctx, dst, strings.NewReader(file), ImportOptions{Report: func(line int, id string, err error) {
			if !errors.Is(err, ErrDuplicate) {
				t.Errorf("line %d (%q): %v, want a duplicate", line, id, err)
			}
			reported.Add(1)
		}})
		if err != nil || ist.Duplicates != len(got) || ist.Imported != 0 || reported.Load() != int64(len(got)) {
			t.Fatalf("second import: %+v (%d reported), %v", ist, reported.Load(), err)
		}
		again, _ := exportAll(t, c, dst, ExportOptions{})
		for id, m := range back {
			if d := sameExported(again[id], m); d != "" {
				t.Errorf("%q changed by the second import: %s", id, d)
			}
		}
		stats, err := c.Inspector().Stats(ctx, dst)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Scheduled != int64(len(got)-1) || stats.Dead != 1 || stats.InFlight != 0 {
			t.Fatalf("destination counts: %d scheduled, %d in flight, %d dead", stats.Scheduled, stats.InFlight, stats.Dead)
		}
		// --state filters.
		only, st := exportAll(t, c, src, ExportOptions{States: []State{StateDead}})
		if len(only) != 1 || only[dead] == nil || st.Filtered != len(got)-1 {
			t.Fatalf("dead-only export: %d messages, stats %+v", len(only), st)
		}
	})
}

// TestExportWhileConsuming exports a topic while its messages move: a
// consumer fails every delivery of some (scheduled, in flight, scheduled
// again, all through the export), acks others that a producer keeps
// adding (the acks shrink the records' hash, which makes HSCAN return
// fields again), and messages are rescheduled out of their segments
// (read in the segment, then again as records of their own). Every
// message present for the whole export is emitted exactly once, and no
// message twice.
//
// What it tests does not depend on timing: the export is held after its
// first read until the consumer and the rescheduler have been at work,
// and after each read of a partition's first scan but its last until the
// test has taken a message of that partition out of its segment, so that
// every partition is scanned a second time.
func TestExportWhileConsuming(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const partitions = 4
		c := newClient(t, addr, Options{Partitions: partitions})
		topic := "exp-busy"
		far := time.Now().Add(time.Hour)
		stay := map[string]bool{}
		enqueue := func(msgs []Message) []SendResult {
			t.Helper()
			res, err := c.SendBatch(ctx, msgs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				stay[r.ID] = true
			}
			return res
		}
		// Generated ids due far ahead: in segments. A batch's go to one
		// partition (steered), drawn at random: batches of 60 until
		// each partition holds 180 at least.
		var segIDs []string
		held := map[int][]string{} // by partition: messages in segments the export's hook takes out
		byPart := map[int]int{}
		for batches := 0; len(byPart) < partitions || slices.Min(slices.Collect(maps.Values(byPart))) < 180; batches++ {
			if batches == 1000 {
				t.Fatalf("messages in segments by partition after %d batches: %v", batches, byPart)
			}
			seg := make([]Message, 60)
			for i := range seg {
				seg[i] = Message{Topic: topic, Body: []byte("seg"), At: far}
			}
			for _, r := range enqueue(seg) {
				// Every 8th of a partition's is held for the hook,
				// spread over its segments.
				p := partition.For(r.ID, partitions)
				if byPart[p]++; byPart[p]%8 == 1 {
					held[p] = append(held[p], r.ID)
				} else {
					segIDs = append(segIDs, r.ID)
				}
			}
		}
		var msgs []Message
		for i := range 400 {
			msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("far-%d", i), At: far})
		}
		for i := range 300 { // failed at every delivery: they cycle through the export
			msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("cycle-%d", i), Body: []byte("cycle"), MaxAttempts: 1 << 20})
		}
		enqueue(msgs)
		var delivered, acked atomic.Int64
		runConsumer(t, c, ConsumerOptions{
			Topic: topic, Concurrency: 8, PollInterval: 20 * time.Millisecond,
			Backoff: []time.Duration{10 * time.Millisecond},
		}, func(ctx context.Context, d *Delivery) error {
			delivered.Add(1)
			if strings.HasPrefix(d.ID, "cycle-") {
				return errors.New("again")
			}
			acked.Add(1)
			return nil
		})
		waitFor(t, 10*time.Second, "deliveries under way", func() bool { return delivered.Load() > 300 })
		// The producer of churn and the rescheduler, from the export's
		// first read to its end.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var rescheduled atomic.Int64
		startMovers := func() {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.Send(ctx, Message{Topic: topic, ID: fmt.Sprintf("churn-%d", i)}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				// Through the whole export (paced by Rate below): one a
				// millisecond.
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for _, id := range segIDs {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := c.Reschedule(ctx, topic, id, far.Add(time.Minute)); err != nil {
						t.Error(err)
						return
					}
					rescheduled.Add(1)
				}
			}()
		}
		stopMovers := sync.OnceFunc(func() {
			close(stop)
			wg.Wait()
		})
		defer stopMovers()
		// The export waits after its first read until deliveries and
		// reschedules went on under it, and after each read of a
		// partition's first scan but its last (a scan of more than one
		// read: Batch is small) until the test took a message of that
		// partition out of its segment: the scan must go again for
		// those (the later ones are likely behind its cursor).
		before := delivered.Load()
		forced := map[int]int{} // by partition: messages taken out of their segments during its first scan
		reads := 0
		c.exportRead = func(p, scan int, last bool) {
			if reads++; reads == 1 {
				startMovers()
				waitFor(t, 30*time.Second, "deliveries and reschedules during the export", func() bool {
					return delivered.Load()-before >= 100 && rescheduled.Load() >= 10
				})
			}
			if scan != 1 || last || forced[p] == len(held[p]) {
				return
			}
			id := held[p][forced[p]]
			if _, err := c.Reschedule(ctx, topic, id, far.Add(2*time.Minute)); err != nil {
				t.Fatalf("reschedule %s out of its segment in partition %d: %v", id, p, err)
			}
			forced[p]++
		}
		got, st := exportAll(t, c, topic, ExportOptions{Batch: 10, Rate: 2000})
		during := delivered.Load() - before
		stopMovers()
		for id := range stay {
			if got[id] == nil {
				t.Errorf("%q, present for the whole export, is missing from it", id)
			}
		}
		if during < 100 || rescheduled.Load() < 10 || len(forced) != partitions || st.Rescans < partitions {
			t.Fatalf("only %d deliveries, %d reschedules, messages taken out of segments in %d partitions (%v) and %d partitions scanned again during the export: it tested nothing moving",
				during, rescheduled.Load(), len(forced), forced, st.Rescans)
		}
		t.Logf("exported %d, %d read twice and left out, %d partitions scanned again; during the export %d deliveries, %d acks, %d reschedules and %v taken out of segments by partition",
			len(got), st.Duplicates, st.Rescans, during, acked.Load(), rescheduled.Load(), forced)
	})
}

// TestExportDuringChange exports a topic while a change of its partition
// count moves its messages: the export reads the partitions messages
// leave first, and leaves out in the others what it read there, so each
// message comes out exactly once. A change that begins during an export
// fails it.
func TestExportDuringChange(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic := "exp-change"
		var msgs []Message
		for i := range 600 {
			msgs = append(msgs, Message{Topic: topic, ID: fmt.Sprintf("m-%d", i), At: time.Now().Add(time.Hour)})
		}
		if _, err := c.SendBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Admin().SetPartitions(ctx, topic, 4, PartitionsOptions{}); err != nil {
			t.Fatal(err)
		}
		l, err := c.store.ReadLayout(ctx, topic)
		if err != nil || !l.Changing() {
			t.Fatalf("layout %+v, %v", l, err)
		}
		// Once the export has read its first batch, move every message
		// of both source partitions to its new partition.
		var movedAll bool
		moved := 0
		opts := ExportOptions{Batch: 20, Pace: -1, Progress: func(ExportStats) {
			if movedAll {
				return
			}
			movedAll = true
			for p := range 2 {
				tok := takeFence(t, c.store, topic, p)
				for cursor := "0"; ; {
					pass, err := c.store.MoveScan(ctx, store.TopicPartition{Topic: topic, P: p}, store.MoveSweep{Layout: l, Token: tok, Cursor: cursor, Count: 50})
					if err != nil {
						t.Fatal(err)
					}
					moved += pass.Moved
					if cursor = pass.Next; cursor == "0" {
						break
					}
				}
			}
		}}
		got, st := exportAll(t, c, topic, opts)
		if moved < 200 {
			t.Fatalf("only %d messages moved during the export", moved)
		}
		if len(got) != 600 {
			t.Fatalf("exported %d messages, want 600 (%+v)", len(got), st)
		}
		t.Logf("%d moved during the export; %d read twice and left out", moved, st.Duplicates)

		// A change that begins during an export.
		other := "exp-change-begins"
		for i := range msgs {
			msgs[i].Topic = other
		}
		if _, err := c.SendBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		began := false
		_, err = c.Inspector().Export(ctx, other, ExportOptions{Batch: 20, Pace: -1, Progress: func(ExportStats) {
			if !began {
				began = true
				if _, err := c.Admin().SetPartitions(ctx, other, 4, PartitionsOptions{}); err != nil {
					t.Error(err)
				}
			}
		}}, func(*ExportedMessage) error { return nil })
		if !errors.Is(err, ErrChangeRunning) || !strings.Contains(err.Error(), "export again") {
			t.Fatalf("export during the start of a change: %v, want ErrChangeRunning", err)
		}
	})
}

// TestExportImportDone carries uniqueness windows through an export and
// an import, with a real consumer making the Dones: a live message's
// window is its unique_for_ms, an acked windowed id is a done line (an
// ended window, an id without one: no line), --state without done
// leaves the done lines out, and an import into another topic restores
// both: the imported done id refuses a send as finished until the same
// time, and the live message keeps its window, so that after its
// delivery there its id is done. A second import writes nothing.
func TestExportImportDone(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		src, dst := "uq-exp-src", "uq-exp-dst"
		if _, err := c.Send(ctx, Message{Topic: src, ID: "acked", UniqueFor: time.Hour, Body: []byte("a")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, Message{Topic: src, ID: "plain", Body: []byte("p")}); err != nil {
			t.Fatal(err)
		}
		k, stop := startConsumer(t, c, ConsumerOptions{Topic: src}, newRecorder().handle)
		waitFor(t, 10*time.Second, "two acks", func() bool { return k.Stats().Acked >= 2 })
		stop()
		in, err := c.Get(ctx, src, "acked")
		if err != nil || in.State != StateDone {
			t.Fatalf("get of the acked windowed id: %+v, %v", in, err)
		}
		// No consumer runs now: "live" stays scheduled in src.
		if _, err := c.Send(ctx, Message{Topic: src, ID: "live", UniqueFor: 30 * time.Minute, Body: []byte("l")}); err != nil {
			t.Fatal(err)
		}
		// A Done whose window ended, not yet removed by a reconciler.
		l, err := c.readTopic(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		old := store.Done{Finished: time.Now().Add(-2 * time.Hour).UnixMilli(), Until: time.Now().Add(-time.Hour).UnixMilli()}
		if _, err := c.store.PutDones(ctx, []store.DoneGroup{{TopicPartition: store.TopicPartition{Topic: src, P: l.Place("old")},
			IDs: []string{"old"}, Dones: []store.Done{old}}}, old.Finished); err != nil {
			t.Fatal(err)
		}

		got, st := exportAll(t, c, src, ExportOptions{})
		if len(got) != 2 || got["acked"] == nil || got["live"] == nil {
			t.Fatalf("exported %v (stats %+v), want acked and live only (old's window ended, plain had none)", slices.Collect(maps.Keys(got)), st)
		}
		if d := got["acked"]; d.State != StateDone || !d.Finished.Equal(in.Finished) || !d.UniqueUntil.Equal(in.UniqueUntil) ||
			d.UniqueUntil.Sub(d.Finished) != time.Hour || !d.Due.IsZero() || d.Body != nil {
			t.Errorf("acked exported as %+v, want done, finished %v, unique until %v", d, in.Finished, in.UniqueUntil)
		}
		if m := got["live"]; m.State != StateScheduled || m.UniqueFor != 30*time.Minute || string(m.Body) != "l" {
			t.Errorf("live exported as %+v, want scheduled with a window of 30m", m)
		}
		var buf bytes.Buffer
		if _, err := c.Inspector().ExportJSON(ctx, src, &buf, ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		file := buf.String()
		doneLine := fmt.Sprintf(`{"id":"acked","state":"done","finished":%q,"unique_until":%q}`+"\n",
			in.Finished.UTC().Format(exportTime), in.UniqueUntil.UTC().Format(exportTime))
		if !strings.Contains(file, doneLine) || !strings.Contains(file, `"unique_for_ms":1800000`) || strings.Contains(file, `"old"`) {
			t.Fatalf("export lacks the done line %s or the window of live, or has old:\n%s", doneLine, file)
		}

		// The live states leave the done lines out; done alone is them.
		live := []State{StateScheduled, StateInFlight, StateDead}
		only, st := exportAll(t, c, src, ExportOptions{States: live})
		if len(only) != 1 || only["live"] == nil || st.Filtered != 1 {
			t.Errorf("export of the live states: %v, stats %+v; want live only, acked filtered", slices.Collect(maps.Keys(only)), st)
		}
		buf.Reset()
		if _, err := c.Inspector().ExportJSON(ctx, src, &buf, ExportOptions{States: live}); err != nil || strings.Contains(buf.String(), `"done"`) {
			t.Errorf("JSON export of the live states has a done line (%v):\n%s", err, buf.String())
		}
		only, _ = exportAll(t, c, src, ExportOptions{States: []State{StateDone}})
		if len(only) != 1 || only["acked"] == nil {
			t.Errorf("export of done: %v, want acked only", slices.Collect(maps.Keys(only)))
		}

		// Into another topic: both restored.
		ist, err := c.Admin().ImportJSON(ctx, dst, strings.NewReader(file), ImportOptions{})
		if err != nil || ist.Imported != 2 || ist.Ended != 0 || ist.Duplicates+ist.Malformed+ist.Rejected != 0 {
			t.Fatalf("import: %+v, %v", ist, err)
		}
		back, _ := exportAll(t, c, dst, ExportOptions{})
		for id, m := range got {
			if d := sameExported(back[id], m); back[id] == nil || d != "" {
				t.Errorf("%q imported differs: %s", id, d)
			}
		}
		res, err := c.Send(ctx, Message{Topic: dst, ID: "acked", Body: []byte("again")})
		var fe *FinishedError
		if !errors.As(err, &fe) || res.Outcome != OutcomeFinished || fe.Done.Until != in.UniqueUntil.UnixMilli() {
			t.Errorf("send of the imported done id: %+v, %v; want a FinishedError until %v", res, err, in.UniqueUntil)
		}
		// Again: the done id holds the same Done (imported), the live
		// message is a duplicate.
		ist, err = c.Admin().ImportJSON(ctx, dst, strings.NewReader(file), ImportOptions{})
		if err != nil || ist.Imported != 1 || ist.Duplicates != 1 {
			t.Errorf("second import: %+v, %v; want the done id imported (the same) and live a duplicate", ist, err)
		}
		// The live message keeps its window: delivered in dst, its id is
		// done there for 30 minutes.
		rec := newRecorder()
		runConsumer(t, c, ConsumerOptions{Topic: dst}, rec.handle)
		waitFor(t, 10*time.Second, "live done in dst", func() bool {
			in, err := c.Get(ctx, dst, "live")
			return err == nil && in.State == StateDone
		})
		if in, err := c.Get(ctx, dst, "live"); err != nil || in.UniqueUntil.Sub(in.Finished) != 30*time.Minute || rec.count("live") != 1 {
			t.Errorf("live after its delivery in dst: %+v, %v, %d deliveries; want done for 30m", in, err, rec.count("live"))
		}
		if _, err := c.Send(ctx, Message{Topic: dst, ID: "live"}); !errors.As(err, &fe) {
			t.Errorf("send of live after its delivery in dst: %v, want a FinishedError", err)
		}
		if rec.count("acked") != 0 {
			t.Errorf("the done id was delivered in dst")
		}
	})
}
