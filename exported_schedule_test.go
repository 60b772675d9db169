package delayq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/wire"
)

// An export of a whole topic begins with its schedules, each with the
// time of its pending occurrence; an importer of messages only refuses
// those lines by name. The import writes each schedule as it was (zone,
// max attempts, binary body, paused state, created and updated times)
// and its pending occurrence in its own chain, under its own partition
// count, at the time it had, and leaves out the source's occurrences.
// Importing again changes nothing and reports each schedule by name.
func TestExportImportSchedules(t *testing.T) {
	ctx := context.Background()
	a := newClient(t, startDirect(t), Options{Partitions: 4})
	b := newClient(t, startDirect(t), Options{Partitions: 8})
	const topic = "sched-move"
	daily := Schedule{Name: "daily", Spec: "0 9 * * *", TimeZone: "America/New_York", MaxAttempts: 3, Body: []byte{0xff, 0, 1}}
	for _, s := range []Schedule{daily, {Name: "beat", Spec: "@every 5m", Body: []byte("b")}, {Name: "held", Spec: "@hourly"}} {
		if _, err := a.Admin().AddSchedule(ctx, topic, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Admin().PauseSchedule(ctx, topic, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Message{Topic: topic, ID: "order-1", Body: []byte("x"), Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	src, err := a.Inspector().Schedules(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	var file bytes.Buffer
	st, err := a.Inspector().ExportJSON(ctx, topic, &file, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(file.String()), "\n")
	if st.Schedules != 3 || st.Exported != 3 || len(lines) != 6 {
		t.Fatalf("export: %+v, %d lines:\n%s", st, len(lines), file.String())
	}
	for i, want := range []string{`{"schedule":{"name":"beat",`, `{"schedule":{"name":"daily",`, `{"schedule":{"name":"held",`} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: %s, want it to begin %s", i+1, lines[i], want)
		}
	}
	wantNext := map[string]time.Time{}
	for _, s := range src {
		if n := s.Next(time.Now(), 1); len(n) == 1 {
			wantNext[s.Name] = n[0]
			if !strings.Contains(file.String(), `"next":"`+wire.Time(n[0])+`"`) {
				t.Errorf("the export does not give %s's pending occurrence %v:\n%s", s.Name, n[0], file.String())
			}
		}
	}
	var m ExportedMessage
	if err := m.UnmarshalJSON([]byte(lines[0])); err == nil || !strings.Contains(err.Error(), `unknown field "schedule"`) {
		t.Errorf("a schedule line read as a message: %v, want an unknown field \"schedule\"", err)
	}
	// Only a whole topic's export carries the schedules.
	var part bytes.Buffer
	if st, err := a.Inspector().ExportJSON(ctx, topic, &part, ExportOptions{States: []State{StateScheduled}}); err != nil || st.Schedules != 0 || strings.Contains(part.String(), `"schedule"`) {
		t.Errorf("export of scheduled messages: %+v, %v:\n%s", st, err, part.String())
	}

	ist, err := b.Admin().ImportJSON(ctx, topic, bytes.NewReader(file.Bytes()), ImportOptions{Report: func(line int, id string, err error) {
		t.Errorf("import reports line %d %q: %v", line, id, err)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if ist.Schedules != 3 || ist.SchedulesImported != 3 || ist.Occurrences != 2 || ist.Imported != 1 || ist.Lines != 6 {
		t.Errorf("import: %+v", ist)
	}
	got, err := b.Inspector().Schedules(ctx, topic)
	if err != nil || len(got) != 3 {
		t.Fatalf("the destination's schedules: %v, %+v", err, got)
	}
	for i, g := range got {
		s := src[i]
		if g.Name != s.Name || g.Spec != s.Spec || g.TimeZone != s.TimeZone || g.MaxAttempts != s.MaxAttempts || !bytes.Equal(g.Body, s.Body) ||
			g.Policy != s.Policy || g.Paused != s.Paused || !g.Created.Equal(s.Created) || !g.Updated.Equal(s.Updated) {
			t.Errorf("imported %+v, exported %+v", g, s)
		}
		at, ok := wantNext[g.Name]
		if !ok {
			continue
		}
		if n := g.Next(time.Now(), 1); len(n) != 1 || !n[0].Equal(at) {
			t.Errorf("%s's next occurrence is %v in the destination, %v in the source", g.Name, n, at)
		}
		// The pending occurrence, in the destination's chain: its id under
		// 8 partitions, due at its time.
		id := ScheduleID(g.Name, g.Version, at, 8)
		if in, err := b.Get(ctx, topic, id); err != nil || !in.Due.Equal(at) {
			t.Errorf("%s's pending occurrence %s in the destination: %+v, %v", g.Name, id, in, err)
		}
	}
	if st, err := b.Inspector().Stats(ctx, topic); err != nil || st.Scheduled != 3 {
		t.Errorf("the destination holds %+v, %v: want the message and two occurrences", st, err)
	}

	var reported []string
	ist, err = b.Admin().ImportJSON(ctx, topic, bytes.NewReader(file.Bytes()), ImportOptions{Report: func(line int, id string, err error) {
		if id == "" && !errors.Is(err, ErrExists) {
			t.Errorf("line %d: %v, want ErrExists", line, err)
		}
		reported = append(reported, err.Error())
	}})
	if err != nil || ist.SchedulesImported != 0 || ist.Duplicates != 1 || len(reported) != 4 || !strings.Contains(reported[0], `schedule "beat" of topic sched-move exists already`) {
		t.Errorf("import again: %+v, %v, reported %q", ist, err, reported)
	}
	if st, err := b.Inspector().Stats(ctx, topic); err != nil || st.Scheduled != 3 {
		t.Errorf("after a second import the destination holds %+v, %v", st, err)
	}

	// A pending occurrence that fell due during the move is written at its
	// time: delivered at once.
	past := time.UnixMilli(time.Now().Add(-3 * time.Second).Truncate(time.Second).UnixMilli())
	in, err := b.Admin().ImportSchedule(ctx, "sched-late", ExportedSchedule{Schedule: Schedule{Name: "late", Spec: "* * * * * *"}, Next: past})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := b.Get(ctx, "sched-late", ScheduleID("late", in.Version, past, 8)); err != nil || !m.Due.Equal(past) {
		t.Errorf("a past pending occurrence: %+v, %v", m, err)
	}
}

// An import that died between writing a schedule's definition and its
// first occurrence is mended by importing the same line again, which
// writes that occurrence once: a third import writes nothing more.
func TestImportScheduleAfterCrash(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startDirect(t), Options{Partitions: 4})
	const topic = "sched-crash"
	next := time.Now().Add(time.Hour).Truncate(time.Second)
	spec := fmt.Sprintf("%d %d * * * *", next.Second(), next.Minute()) // hourly, at next
	s := ExportedSchedule{Schedule: Schedule{Name: "daily", Spec: spec}, Created: next.Add(-48 * time.Hour), Updated: next.Add(-24 * time.Hour), Next: next}
	in, err := c.Admin().ImportSchedule(ctx, topic, s)
	if err != nil {
		t.Fatal(err)
	}
	id := ScheduleID("daily", in.Version, next, 4)
	// The crash: the definition is written, the chain is not.
	if _, _, err := c.store.ChainSchedule(ctx, store.TopicPartition{Topic: topic, P: schedulePartition("daily", 4)}, store.ChainStep{Name: "daily", Version: in.Version, Mode: store.ChainForget}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, topic, id); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Admin().ImportSchedule(ctx, topic, s); !errors.Is(err, ErrExists) {
			t.Fatalf("import %d again: %v, want ErrExists", i+2, err)
		}
		if m, err := c.Get(ctx, topic, id); err != nil || !m.Due.Equal(next) {
			t.Errorf("after import %d the pending occurrence is %+v, %v", i+2, m, err)
		}
		if st, err := c.Inspector().Stats(ctx, topic); err != nil || st.Scheduled != 1 {
			t.Errorf("after import %d the topic holds %+v, %v: want the one occurrence", i+2, st, err)
		}
	}
	// A schedule of that name that the import did not write is left alone.
	other := s
	other.Body = []byte("other")
	if _, err := c.Admin().ImportSchedule(ctx, topic, other); !errors.Is(err, ErrExists) {
		t.Errorf("import of another definition: %v, want ErrExists", err)
	}
	if st, err := c.Inspector().Stats(ctx, topic); err != nil || st.Scheduled != 1 {
		t.Errorf("after an import of another definition the topic holds %+v, %v", st, err)
	}
}

// A schedule's line that decodes encodes to a line that decodes to the
// same schedule; no line panics the decoder.
func FuzzScheduleLine(f *testing.F) {
	for _, seed := range []string{
		`{"schedule":{"name":"daily","spec":"0 3 * * *","tz":"Asia/Shanghai","policy":"skip","max_attempts":3,"created":"2026-11-20T08:00:00.000Z","updated":"2026-11-20T08:00:00.000Z","next":"2026-11-26T19:00:00.000Z","body":"x"}}`,
		`{"schedule":{"name":"b","spec":"@every 5s","paused":true,"body_base64":"/wAB"}}`,
		`{"schedule":{"name":"b"}}`,
		`{"schedule":null}`,
		`{"id":"a","state":"scheduled","due":"2026-11-20T08:00:00.000Z"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var a ExportedSchedule
		if a.UnmarshalJSON(line) != nil {
			return
		}
		enc, err := a.MarshalJSON()
		if err != nil {
			t.Fatalf("encode %+v: %v", a, err)
		}
		var b ExportedSchedule
		if err := b.UnmarshalJSON(enc); err != nil {
			t.Fatalf("decode %s again: %v", enc, err)
		}
		if a.Name != b.Name || a.Spec != b.Spec || a.TimeZone != b.TimeZone || a.Policy != b.Policy || a.MaxAttempts != b.MaxAttempts ||
			a.Paused != b.Paused || !bytes.Equal(a.Body, b.Body) || a.Created.UnixMilli() != b.Created.UnixMilli() ||
			a.Next.UnixMilli() != b.Next.UnixMilli() || a.Updated.UnixMilli() != b.Updated.UnixMilli() {
			t.Fatalf("%s decodes to %+v, which encodes to %s, which decodes to %+v", line, a, enc, b)
		}
	})
}
