package delayq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestExportLineRoundTrip: what MarshalJSON writes, UnmarshalJSON reads
// back the same, bodies UTF-8 or not, times to the millisecond.
func TestExportLineRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 21, 0, 0, 125_000_000, time.UTC)
	for _, m := range []ExportedMessage{
		{ID: "a", State: StateScheduled, Due: at, Created: at, Updated: at, Body: []byte(`{"x":"y:{}[]\"\\"}`)},
		{ID: "b ☃", State: StateDead, Due: at, DiedAt: at.Add(time.Second), Attempts: 3, MaxAttempts: 5, LastError: "boom: \"x\"", Created: at, Updated: at, Body: []byte{0xff, 0, 1}},
		{ID: "c", State: StateInFlight, Due: at, Created: at, Updated: at, Body: []byte{}},
		{ID: "d", State: StateScheduled, Due: at, Body: []byte("<&>")},
		{ID: "e", State: StateScheduled, Due: at, Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Body: []byte("traced")},
		{ID: "u", State: StateScheduled, Due: at, UniqueFor: 36 * time.Hour, Body: []byte("windowed")},
		{ID: "f", State: StateDone, Finished: at, UniqueUntil: at.Add(24 * time.Hour)},
	} {
		line, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want := `"due":"2026-11-25T21:00:00.125Z"`
		if m.State == StateDone {
			want = `{"id":"f","state":"done","finished":"2026-11-25T21:00:00.125Z","unique_until":"2026-11-26T21:00:00.125Z"}`
		}
		if bytes.ContainsAny(line, "\n") || !bytes.Contains(line, []byte(want)) {
			t.Fatalf("line %s, want it to hold %s", line, want)
		}
		if m.UniqueFor > 0 && !bytes.Contains(line, []byte(`"unique_for_ms":129600000`)) {
			t.Errorf("line %s lacks the window in ms", line)
		}
		var v exportJSON
		if err := json.Unmarshal(line, &v); err != nil || members(line) != v.set() {
			t.Errorf("%s: %d members, %d fields set (%v): an exported line takes the slow path", line, members(line), v.set(), err)
		}
		var got ExportedMessage
		if err := got.UnmarshalJSON(line); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if d := sameExported(&got, &m); d != "" || got.ID != m.ID {
			t.Errorf("%s read back differs: %s", line, d)
		}
	}
}

// TestExportLineParse: the quick check of a line's members takes the
// same decisions as the decoder that refuses unknown fields.
func TestExportLineParse(t *testing.T) {
	const due = `"due":"2026-11-25T21:00:00.000Z"`
	const done = `"finished":"2026-11-25T21:00:00.000Z","unique_until":"2026-11-26T21:00:00.000Z"`
	for _, tt := range []struct {
		line, wantErr string // "" for success
	}{
		{`{"id":"a","state":"scheduled",` + due + `}`, ""},
		{`{"id":"a","state":"scheduled",` + due + `,"last_error":""}`, ""},
		{`{"id":"a","state":"scheduled",` + due + `,"body":null,"attempts":null}`, ""},
		{`{"id":"x","id":"a","state":"scheduled",` + due + `}`, ""},
		{`{"ID":"a","state":"scheduled",` + due + `}`, ""},
		{`{"id":"a","last_error":"x:{\"colour\":1}","state":"scheduled",` + due + `,"body":"\\\":,{"}`, ""},
		{`{"id":"a","state":"scheduled",` + due + `,"colour":"red"}`, `unknown field "colour"`},
		{`{"id":"a","state":"scheduled",` + due + `,"extra":{"id":"b"}}`, `unknown field "extra"`},
		{`{"id":"a","state":"scheduled",` + due + `} {"id":"b"}`, "more than one value"},
		{`{"id":"a","state":"scheduled",` + due, "invalid JSON"},
		{`{"id":"a","state":"sleeping",` + due + `}`, `"state" "sleeping"`},
		{`{"id":"a","state":"scheduled"}`, `"due" is missing`},
		{`{"state":"scheduled",` + due + `}`, `"id" is missing`},
		{`{"id":"a","state":"scheduled","due":"tomorrow"}`, `"due": parsing time "tomorrow"`},
		{`{"id":"a","state":"scheduled",` + due + `,"attempts":-1}`, `"attempts" -1 is negative`},
		{`{"id":"a","state":"scheduled",` + due + `,"died_at":"2026-11-25T21:00:00Z"}`, `"died_at" is set`},
		{`{"id":"a","state":"dead",` + due + `,"body":"x","body_base64":"eA=="}`, `both "body" and "body_base64"`},
		{`{"id":"a","state":"dead",` + due + `,"body_base64":"!"}`, `"body_base64"`},
		{`{"id":"a","state":"scheduled",` + due + `,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, ""},
		{`{"id":"a","state":"scheduled",` + due + `,"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`, `"traceparent" "00-0000`},
		{`{"id":"a","state":"scheduled",` + due + `,"traceparent":"trace me"}`, `"traceparent" "trace me": want a W3C traceparent`},
		{`["a"]`, "not an object"},
		{`{"id":"a","state":"scheduled",` + due + `,"unique_for_ms":86400000}`, ""},
		{`{"id":"a","state":"scheduled",` + due + `,"unique_for_ms":0}`, ""},
		{`{"id":"a","state":"scheduled",` + due + `,"unique_for_ms":-1}`, `"unique_for_ms" -1 is negative`},
		{`{"id":"a","state":"scheduled",` + due + `,"unique_for_ms":9223372036855}`, `"unique_for_ms" 9223372036855 is over`},
		{`{"id":"a","state":"scheduled",` + due + `,"finished":"2026-11-25T21:00:00Z"}`, `"finished" or "unique_until" is set on a message in state "scheduled"`},
		{`{"id":"a","state":"dead",` + due + `,"unique_until":"2026-11-25T21:00:00Z"}`, `"finished" or "unique_until" is set on a message in state "dead"`},
		{`{"id":"a","state":"done",` + done + `}`, ""},
		{`{"id":"a","state":"done","finished":"2026-11-25T21:00:00Z","unique_until":"2026-11-25T21:00:00Z"}`, ""},
		{`{"id":"a","state":"done",` + done + `,"last_error":""}`, ""},
		{`{"id":"a","state":"done","unique_until":"2026-11-26T21:00:00Z"}`, `"finished" is missing`},
		{`{"id":"a","state":"done","finished":"2026-11-25T21:00:00Z"}`, `"unique_until" is missing`},
		{`{"id":"a","state":"done",` + done + `,` + due + `}`, `"due" is set on a done line`},
		{`{"id":"a","state":"done",` + done + `,"body":""}`, `"body" is set on a done line`},
		{`{"id":"a","state":"done",` + done + `,"attempts":0}`, `"attempts" is set on a done line`},
		{`{"id":"a","state":"done",` + done + `,"unique_for_ms":5}`, `"unique_for_ms" is set on a done line`},
		{`{"id":"a","state":"done","finished":"2026-11-25T21:00:00Z","unique_until":"2026-11-25T20:00:00Z"}`, `"unique_until" 2026-11-25T20:00:00Z is before "finished"`},
		{`{"id":"a","state":"done","finished":"later","unique_until":"2026-11-25T20:00:00Z"}`, `"finished": parsing time "later"`},
	} {
		var m ExportedMessage
		err := m.UnmarshalJSON([]byte(tt.line))
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.line, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err %v, want one containing %q", tt.line, err, tt.wantErr)
		case err == nil && m.ID != "a":
			t.Errorf("%s: id %q, want a", tt.line, m.ID)
		}
	}
}

// A debounce window's opening survives an export and an import.
func TestExportWindowOpened(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	if _, err := c.Send(ctx, Message{Topic: "win", ID: "w", Delay: time.Hour, OnDuplicate: Debounce, MaxWait: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.Inspector().ExportJSON(ctx, "win", &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"window_opened":"`) {
		t.Fatalf("export of a debounced message has no window_opened:\n%s", buf.String())
	}
	d := newClient(t, testAddr(t), Options{Partitions: 2})
	if _, err := d.Admin().ImportJSON(ctx, "win", &buf, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	// The window opened at the first send: a debounce now is capped by
	// it, not by the import's time.
	res, err := d.Send(ctx, Message{Topic: "win", ID: "w", Delay: 3 * time.Hour, OnDuplicate: Debounce, MaxWait: 2 * time.Hour})
	if err != nil || res.Outcome != OutcomeDebounced {
		t.Fatalf("debounce after import: %+v, %v", res, err)
	}
	if lim := time.Now().Add(2 * time.Hour); res.Due.After(lim) {
		t.Errorf("debounced to %v, past the window's end %v", res.Due, lim)
	}
}

// A message's trace survives an export and an import. It is stored
// without any tracer provider too: an enqueue under a span context
// (here a remote one, as a request's) stores it.
func TestExportTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := parseTraceparent(tp)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	c := newClient(t, testAddr(t), Options{Partitions: 2, TracerProvider: noop.NewTracerProvider()})
	if _, err := c.Send(ctx, Message{Topic: "tr", ID: "t", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(context.Background(), Message{Topic: "tr", ID: "u", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.Inspector().ExportJSON(context.Background(), "tr", &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), `"traceparent":"`+tp+`"`); n != 1 {
		t.Fatalf("export has %d lines with the traceparent %s, want 1:\n%s", n, tp, buf.String())
	}
	if _, err := c.Admin().ImportJSON(context.Background(), "tr2", &buf, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ := exportAll(t, c, "tr2", ExportOptions{})
	if got["t"] == nil || got["t"].Traceparent != tp || got["u"] == nil || got["u"].Traceparent != "" {
		t.Errorf("imported: t %+v, u %+v; want t with traceparent %s, u without", got["t"], got["u"], tp)
	}
	res, err := c.Admin().Import(context.Background(), "tr3", []ExportedMessage{{ID: "v", State: StateScheduled, Due: time.Now(), Traceparent: "nope"}})
	if err != nil || !errors.Is(res[0].Err, ErrInvalid) {
		t.Errorf("import of a bad traceparent: %+v, %v; want ErrInvalid", res, err)
	}
}

// FuzzExportLine: UnmarshalJSON takes outside input (an import's
// lines). Whatever the line, it returns an error or a message, never
// panics; a message it accepts is written back by MarshalJSON as a line
// it reads back the same.
func FuzzExportLine(f *testing.F) {
	const due = `"due":"2026-11-25T21:00:00.000Z"`
	for _, seed := range []string{
		`{"id":"a","state":"scheduled",` + due + `}`,
		`{"id":"b ☃","state":"dead",` + due + `,"died_at":"2026-11-25T21:00:01Z","attempts":3,"max_attempts":5,"last_error":"boom","body_base64":"/wAB"}`,
		`{"id":"c","state":"in_flight",` + due + `,"created":"2026-11-25T21:00:00Z","updated":"2026-11-25T21:00:00Z","body":""}`,
		`{"id":"e","state":"scheduled",` + due + `,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","body":"x"}`,
		`{"id":"w","state":"scheduled",` + due + `,"window_opened":"2026-11-25T20:00:00Z"}`,
		`{"id":"u","state":"scheduled",` + due + `,"unique_for_ms":86400000,"body":"x"}`,
		`{"id":"u","state":"dead",` + due + `,"died_at":"2026-11-25T21:00:01Z","unique_for_ms":1}`,
		`{"id":"u","state":"scheduled",` + due + `,"unique_for_ms":-5}`,
		`{"id":"d","state":"done","finished":"2026-11-25T21:00:00.000Z","unique_until":"2026-11-26T21:00:00.000Z"}`,
		`{"id":"d","state":"done","finished":"2026-11-25T21:00:00Z","unique_until":"2026-11-25T21:00:00Z"}`,
		`{"id":"d","state":"done","finished":"2026-11-25T21:00:00Z"}`,
		`{"id":"d","state":"done","finished":"2026-11-25T21:00:00Z","unique_until":"2026-11-26T21:00:00Z",` + due + `}`,
		`{"id":"d","state":"done","finished":"2026-11-25T21:00:00Z","unique_until":"2026-11-24T21:00:00Z"}`,
		`{"id":"d","state":"scheduled",` + due + `,"finished":"2026-11-25T21:00:00Z"}`,
		`{"id":"x","id":"a","state":"scheduled",` + due + `}`,
		`{"id":"a","state":"scheduled",` + due + `,"extra":{"id":"b"}}`,
		`{"id":"a","state":"scheduled",` + due + `} {"id":"b"}`,
		`["a"]`, `{`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var m ExportedMessage
		if m.UnmarshalJSON(line) != nil {
			return
		}
		out, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("%q read as %+v, which does not write back: %v", line, m, err)
		}
		var back ExportedMessage
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("%q read as %+v, written back as %s, which does not read: %v", line, m, out, err)
		}
		if d := sameExported(&back, &m); d != "" || back.ID != m.ID {
			t.Fatalf("%q read as %+v, written back as %s, read again differs: %s", line, m, out, d)
		}
	})
}
