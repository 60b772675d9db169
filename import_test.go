package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
	st, err := c.ImportJSON(ctx, "malformed", strings.NewReader(file), ImportOptions{Batch: 2, Writers: 3, Report: func(line int, id string, err error) {
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
		st, err = c.ImportJSON(ctx, topic, strings.NewReader(file), o)
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
	if _, err := c.Enqueue(ctx, Message{Topic: topic, ID: old, At: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, topic, 4, PartitionsOptions{}); err != nil {
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
	res, err := c.Import(ctx, topic, msgs)
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
