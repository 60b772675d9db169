package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// TestImportMalformed: a malformed line is reported with its line number
// and skipped, or ends a strict import, never written; the lines before
// it are.
func TestImportMalformed(t *testing.T) {
	addr := startDirect(t)
	ctx := context.Background()
	c := newClient(t, addr, Options{Partitions: 2})
	due := time.Now().Add(time.Hour).UTC().Format(exportTime)
	good := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"state":"scheduled","due":%q,"body":"x"}`, id, due)
	}
	file := strings.Join([]string{
		good("a"),
		`{"id":"b","state":"scheduled","due":"tomorrow"}`,
		"",
		`{"id":"c","state":"sleeping","due":"` + due + `"}`,
		`{"id":"d","state":"dead","due":"` + due + `","body":"x","body_base64":"eA=="}`,
		`{"id":"e","state":"scheduled","due":"` + due + `","colour":"red"}`,
		good("f"),
		`not json`,
		good("g"),
	}, "\n")
	var lines []string
	// Small batches, several at once: the reports still come in line order.
	st, err := c.Admin().ImportJSON(ctx, "malformed", strings.NewReader(file), ImportOptions{Batch: 2, Writers: 3, Report: func(line int, id string, err error) {
		lines = append(lines, fmt.Sprintf("%d %s %v", line, id, err))
	}})
	if err != nil || st.Imported != 3 || st.Malformed != 5 || st.Lines != 8 {
		t.Fatalf("import: %+v, %v", st, err)
	}
	want := []string{"2 b", "4 c", "5 d", "6 e", "8 "}
	for i, l := range lines {
		if i >= len(want) || !strings.HasPrefix(l, want[i]+" ") || !strings.Contains(l, "line "+strings.Fields(want[i])[0]+":") {
			t.Fatalf("report %d: %q, want it to begin %q and name the line", i, l, want[i])
		}
	}
	if !strings.Contains(lines[0], `"due": parsing time "tomorrow"`) {
		t.Fatalf("report of line 2 does not say why: %q", lines[0])
	}
	for _, id := range []string{"b", "c", "d", "e"} {
		if _, err := c.Get(ctx, "malformed", id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("malformed line %q was written: %v", id, err)
		}
	}
	// Strict: stops at line 2, with line 1 written, nothing after; in one
	// batch, or in batches of a line written four at a time.
	for _, o := range []ImportOptions{{Strict: true}, {Strict: true, Batch: 1, Writers: 4}} {
		topic := fmt.Sprintf("strict-%d", o.Batch)
		st, err = c.Admin().ImportJSON(ctx, topic, strings.NewReader(file), o)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "line 2:") || st.Imported != 1 || st.Malformed != 1 {
			t.Fatalf("strict import (%+v): %+v, %v", o, st, err)
		}
		if _, err := c.Get(ctx, topic, "a"); err != nil {
			t.Fatalf("line 1 of a strict import: %v", err)
		}
		if _, err := c.Get(ctx, topic, "f"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("line 7 of a strict import that stopped at line 2: %v", err)
		}
	}
}

// TestImportDuringChange imports into a topic whose partition count
// changes: each message goes to its partition in the new count, and an
// id still in its old partition is a duplicate.
func TestImportDuringChange(t *testing.T) {
	t.Parallel()
	addr := startDirect(t)
	ctx := context.Background()
	c := newClient(t, addr, Options{Partitions: 2})
	topic := "imp-change"
	old := samePartition("old-", 2, 4) // partition 0 of 2 now, 2 of 4 once moved
	if _, err := c.Send(ctx, Message{Topic: topic, ID: old, At: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().SetPartitions(ctx, topic, 4, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var msgs []ExportedMessage
	for i := range 40 {
		st := StateScheduled
		if i%4 == 0 {
			st = StateDead
		}
		msgs = append(msgs, ExportedMessage{ID: fmt.Sprintf("m-%d", i), State: st, Due: due, Body: []byte("x")})
	}
	msgs = append(msgs, ExportedMessage{ID: old, State: StateScheduled, Due: due})
	res, err := c.Admin().Import(ctx, topic, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:40] {
		if r.Err != nil {
			t.Fatalf("%q: %v", msgs[i].ID, r.Err)
		}
		in, err := c.Get(ctx, topic, msgs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := partition.For(msgs[i].ID, 4); in.Partition != want || in.State != msgs[i].State {
			t.Errorf("%q imported %s in partition %d, want %s in %d", msgs[i].ID, in.State, in.Partition, msgs[i].State, want)
		}
	}
	if !errors.Is(res[40].Err, ErrDuplicate) {
		t.Fatalf("import of %q, in its old partition: %v, want a duplicate", old, res[40].Err)
	}
}

// TestImportDoneLines: a done line within its window keeps its id taken
// in the topic; one whose window ended by the client's clock is skipped
// and counted, unreported; one whose id holds a message or another done
// id is a duplicate, left alone; a done line with a message's fields is
// malformed. Import itself checks done messages as the lines are.
func TestImportDoneLines(t *testing.T) {
	addr := startDirect(t)
	ctx := context.Background()
	c := newClient(t, addr, Options{Partitions: 2})
	topic := "imp-done"
	now := time.Now()
	at := func(d time.Duration) string { return now.Add(d).UTC().Format(exportTime) }
	done := func(id string, finished, until time.Duration) string {
		return fmt.Sprintf(`{"id":%q,"state":"done","finished":%q,"unique_until":%q}`, id, at(finished), at(until))
	}
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "busy", Delay: time.Hour, Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	other := store.Done{Finished: now.Add(-time.Minute).UnixMilli(), Until: now.Add(time.Hour).UnixMilli()}
	if _, err := c.store.PutDones(ctx, []store.DoneGroup{{TopicPartition: store.TopicPartition{Topic: topic, P: l.Place("other")},
		IDs: []string{"other"}, Dones: []store.Done{other}}}, now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	file := strings.Join([]string{
		done("kept", -time.Minute, 2*time.Hour),
		done("gone", -2*time.Hour, -time.Hour),
		done("busy", -time.Minute, 2*time.Hour),
		done("other", -time.Minute, 2*time.Hour),
		`{"id":"nofinish","state":"done","unique_until":"` + at(time.Hour) + `"}`,
		`{"id":"withdue","state":"done","due":"` + at(0) + `","finished":"` + at(0) + `","unique_until":"` + at(time.Hour) + `"}`,
	}, "\n")
	var reports []string
	st, err := c.Admin().ImportJSON(ctx, topic, strings.NewReader(file), ImportOptions{Report: func(line int, id string, err error) {
		reports = append(reports, fmt.Sprintf("%d %s %v", line, id, err))
	}})
	if err != nil || st.Lines != 6 || st.Imported != 1 || st.Ended != 1 || st.Duplicates != 2 || st.Malformed != 2 || st.Rejected != 0 {
		t.Fatalf("import: %+v, %v", st, err)
	}
	want := []string{"3 busy", "4 other", "5 nofinish", "6 withdue"}
	if len(reports) != len(want) {
		t.Fatalf("reports %q, want lines %q", reports, want)
	}
	for i, r := range reports {
		if !strings.HasPrefix(r, want[i]+" ") {
			t.Errorf("report %d: %q, want it to begin %q", i, r, want[i])
		}
	}
	if !strings.Contains(reports[0], "duplicate") || !strings.Contains(reports[2], `"finished" is missing`) || !strings.Contains(reports[3], `"due" is set on a done line`) {
		t.Errorf("reports do not say why: %q", reports)
	}
	in, err := c.Get(ctx, topic, "kept")
	if err != nil || in.State != StateDone || in.UniqueUntil.UnixMilli() != now.Add(2*time.Hour).UnixMilli() {
		t.Errorf("kept after the import: %+v, %v; want done until %v", in, err, now.Add(2*time.Hour))
	}
	if _, err := c.Get(ctx, topic, "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("gone, whose window ended: %v, want ErrNotFound", err)
	}
	if in, err := c.Get(ctx, topic, "busy"); err != nil || in.State != StateScheduled || string(in.Body) != "b" {
		t.Errorf("busy after a done line of its id: %+v, %v; want its message as it was", in, err)
	}
	if in, err := c.Get(ctx, topic, "other"); err != nil || in.State != StateDone || in.UniqueUntil.UnixMilli() != other.Until {
		t.Errorf("other after a done line of its id: %+v, %v; want its own Done", in, err)
	}

	// The client's clock decides: three hours on, kept's window (two
	// hours) has ended.
	later := newClient(t, addr, Options{Partitions: 2, Now: func() time.Time { return time.Now().Add(3 * time.Hour) }})
	st, err = later.Admin().ImportJSON(ctx, topic+"-later", strings.NewReader(done("kept", -time.Minute, 2*time.Hour)), ImportOptions{})
	if err != nil || st.Ended != 1 || st.Imported != 0 {
		t.Errorf("import of a done line whose window ended by the client's clock: %+v, %v", st, err)
	}

	// Import checks done messages as UnmarshalJSON checks lines.
	res, err := c.Admin().Import(ctx, topic, []ExportedMessage{
		{ID: "x1", State: StateDone, Finished: now.Add(-2 * time.Hour), UniqueUntil: now.Add(-time.Hour)},
		{ID: "x2", State: StateDone, UniqueUntil: now.Add(time.Hour)},
		{ID: "x3", State: StateDone, Finished: now, UniqueUntil: now.Add(time.Hour), Body: []byte("b")},
		{ID: "x4", State: StateDone, Finished: now, UniqueUntil: now.Add(-time.Hour)},
		{ID: "x5", State: StateScheduled, Due: now, Finished: now},
		{ID: "x6", State: StateDone, Finished: now, UniqueUntil: now.Add(time.Hour)},
		{ID: "x7", State: StateScheduled, Due: now.Add(time.Hour), UniqueFor: -time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Outcome != OutcomeEnded {
		t.Errorf("import of a done message whose window ended: %+v, want OutcomeEnded without an error", res[0])
	}
	for _, i := range []int{1, 2, 3, 4, 6} {
		if !errors.Is(res[i].Err, ErrInvalid) {
			t.Errorf("import of %s: %+v, want ErrInvalid", res[i].ID, res[i])
		}
	}
	if res[5].Err != nil || res[5].Outcome != OutcomeCreated {
		t.Errorf("import of a done message: %+v", res[5])
	}
	for _, id := range []string{"x1", "x2", "x3", "x4", "x5", "x7"} {
		if _, err := c.Get(ctx, topic, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s was written: %v", id, err)
		}
	}
}
