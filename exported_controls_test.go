package delayq

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// An export of a whole topic carries its pause, limits and automatic
// count on a line of its own, and an import applies each where the
// destination topic has none of its own, and keeps the destination's
// own: ImportStats says which.
func TestExportCarriesControls(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 2})
	const from = "ctl-from"
	if _, err := c.Send(ctx, Message{Topic: from, ID: "m1", Body: []byte("x"), Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	limits := Limits{Rate: 50, Burst: 7, Concurrency: 3}
	auto := &AutoPartitions{Min: 2, Max: 16, GrowAfter: 20 * time.Second, ShrinkAfter: time.Hour, Cooldown: 30 * time.Second}
	if err := c.Admin().Pause(ctx, from, PauseOptions{Until: until}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, from, limits); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetAutoPartitions(ctx, from, auto); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := c.Inspector().ExportJSON(ctx, from, &buf, ExportOptions{})
	if err != nil || !st.Controls || st.Exported != 1 {
		t.Fatalf("export: %+v, %v", st, err)
	}
	first, _, _ := strings.Cut(buf.String(), "\n")
	if want := `{"controls":{"paused":true,"paused_until":"`; !strings.HasPrefix(first, want) || !strings.Contains(first, `"limits":{"rate":"50/s","burst":7,"concurrency":3}`) ||
		!strings.Contains(first, `"auto_partitions":{"min":2,"max":16,"grow_after":"20s","shrink_after":"1h0m0s","cooldown":"30s"}`) {
		t.Errorf("the controls line reads %s", first)
	}
	var round ExportedControls
	if err := round.UnmarshalJSON([]byte(first)); err != nil {
		t.Fatal(err)
	}
	if want := (ExportedControls{Paused: true, PausedUntil: until, Limits: &limits, AutoPartitions: auto}); !reflect.DeepEqual(round.Limits, want.Limits) ||
		!reflect.DeepEqual(round.AutoPartitions, want.AutoPartitions) || !round.PausedUntil.Equal(until) || !round.Paused {
		t.Errorf("read back %+v, want %+v", round, want)
	}

	// A fresh topic takes every control of the file.
	st2, err := c.Admin().ImportJSON(ctx, "ctl-fresh", bytes.NewReader(buf.Bytes()), ImportOptions{})
	if err != nil || st2.Imported != 1 || st2.ControlsLines != 1 {
		t.Fatalf("import: %+v, %v", st2, err)
	}
	if want := []string{"pause", "limits", "automatic partitions"}; !reflect.DeepEqual(st2.Controls.Applied, want) || len(st2.Controls.Kept) != 0 {
		t.Errorf("import into a fresh topic: %+v, want all applied", st2.Controls)
	}
	checkControls(t, c, "ctl-fresh", true, limits, auto)

	// A topic with limits of its own (even cleared ones) keeps them.
	const own = "ctl-own"
	if _, err := c.Send(ctx, Message{Topic: own, ID: "o1", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, own, Limits{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetAutoPartitions(ctx, own, nil); err != nil { // turned off: a decision too
		t.Fatal(err)
	}
	st3, err := c.Admin().ImportJSON(ctx, own, bytes.NewReader(buf.Bytes()), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st3.Controls.Applied, []string{"pause"}) || !reflect.DeepEqual(st3.Controls.Kept, []string{"limits", "automatic partitions"}) {
		t.Errorf("import into a topic with its own: %+v", st3.Controls)
	}
	checkControls(t, c, own, true, Limits{Concurrency: 1}, nil)

	// A timed pause over by the time of the import is not applied; a
	// state filter leaves the controls out.
	old := ExportedControls{Paused: true, PausedUntil: time.Now().Add(-time.Minute)}
	did, err := c.Admin().ImportControls(ctx, "ctl-fresh", old)
	if err != nil || len(did.Applied)+len(did.Kept) != 0 {
		t.Errorf("a past pause: %+v, %v", did, err)
	}
	buf.Reset()
	if st, err := c.Inspector().ExportJSON(ctx, from, &buf, ExportOptions{States: []State{StateScheduled}}); err != nil || st.Controls || strings.Contains(buf.String(), "controls") {
		t.Errorf("export of a state: %+v, %v\n%s", st, err, buf.String())
	}
}

func checkControls(t *testing.T, c *Client, topic string, paused bool, l Limits, a *AutoPartitions) {
	t.Helper()
	ctx := context.Background()
	e, err := c.Inspector().ExportControls(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if e.Paused != paused {
		t.Errorf("%s: paused %v, want %v", topic, e.Paused, paused)
	}
	got, err := c.Inspector().Limits(ctx, topic)
	if err != nil || got != l {
		t.Errorf("%s: limits %+v (%v), want %+v", topic, got, err, l)
	}
	if !reflect.DeepEqual(e.AutoPartitions, a) {
		t.Errorf("%s: automatic partitions %+v, want %+v", topic, e.AutoPartitions, a)
	}
}

// A controls line that decodes encodes to a line that decodes to the
// same controls; no line panics the decoder.
func FuzzControlsLine(f *testing.F) {
	for _, seed := range []string{
		`{"controls":{"paused":true,"paused_until":"2026-11-27T08:00:00.000Z","limits":{"rate":"200/s","burst":20,"concurrency":10},"auto_partitions":{"min":4,"max":32,"grow_after":"10s","shrink_after":"10m0s","cooldown":"10s"}}}`,
		`{"controls":{"paused":true}}`,
		`{"controls":{"limits":{"rate":0.5}}}`,
		`{"controls":{"paused_until":"2026-11-27T08:00:00.000Z"}}`,
		`{"controls":null}`,
		`{"schedule":{"name":"b","spec":"@every 5s"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var a ExportedControls
		if a.UnmarshalJSON(line) != nil {
			return
		}
		enc, err := a.MarshalJSON()
		if err != nil {
			return // limits JSON cannot carry (see Limits.MarshalJSON): ImportControls refuses them too
		}
		var b ExportedControls
		if err := b.UnmarshalJSON(enc); err != nil {
			if a.Limits != nil && a.Limits.Validate() != nil {
				return // a rate the limits refuse: never exported
			}
			t.Fatalf("decode %s again: %v", enc, err)
		}
		if a.Paused != b.Paused || !a.PausedUntil.Equal(b.PausedUntil) && a.PausedUntil.UnixMilli() != b.PausedUntil.UnixMilli() ||
			!reflect.DeepEqual(a.AutoPartitions, b.AutoPartitions) || (a.Limits == nil) != (b.Limits == nil) {
			t.Fatalf("%s decodes to %+v, which encodes to %s, which decodes to %+v", line, a, enc, b)
		}
	})
}
