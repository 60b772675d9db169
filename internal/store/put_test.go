package store

import (
	"bytes"
	"context"
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// TestPutHeaders checks that the headers the scripts write (a Put that
// creates, replaces and debounces, a start) are the bytes Go encodes for
// the same record, since an outcome compares a record's stored header
// with the one Go encodes from its claim; and that each holds what the
// policy says.
func TestPutHeaders(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const now = int64(1_800_000_000_000)
	stored := func(what string, want Record) *Record {
		t.Helper()
		r, err := s.do(ctx, cmd{"HGET", []any{keys.Records(s.ns, "t", 0), "x"}})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		raw, err := redis.Bytes(r[0], nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		rec, err := DecodeRecord(raw)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if enc := rec.Encode(); !bytes.Equal(enc, raw) {
			t.Errorf("%s: stored %x, Go encodes the record decoded as %x", what, raw, enc)
		}
		if rec.Due != want.Due || rec.Created != want.Created || rec.Updated != want.Updated || rec.First != want.First || rec.Trace != want.Trace || string(rec.Body) != string(want.Body) {
			t.Errorf("%s: stored %+v, want %+v", what, rec, want)
		}
		return rec
	}
	put := func(at int64, p Put) {
		t.Helper()
		if _, err := s.Puts(ctx, []PutGroup{{Topic: "t", P: 0, Puts: []Put{p}}}, at); err != nil {
			t.Fatal(err)
		}
	}
	start := func(what string, r *Record) {
		t.Helper()
		if got, err := s.StartMany(ctx, TopicPartition{Topic: "t", P: 0}, 1, []string{"x"}, []*Record{r}); err != nil || got[0] != StartOK {
			t.Fatalf("%s: %v %v", what, got, err)
		}
	}
	put(now, Put{ID: "x", Policy: PolicyDebounce, Due: now + 5000, MaxWait: 60000, Body: []byte("a")})
	stored("created", Record{Due: now + 5000, Created: now, Updated: now, First: now, Body: []byte("a")})
	put(now+1000, Put{ID: "x", Policy: PolicyDebounce, Due: now + 1000 + 70000, MaxWait: 60000, Body: []byte("b")})
	stored("debounced, capped by its window", Record{Due: now + 60000, Created: now, Updated: now + 1000, First: now, Body: []byte("b")})
	put(now+1000, Put{ID: "x", Policy: PolicyReplace, Due: now + 2000, Body: []byte("c")})
	r := stored("replaced in the same millisecond", Record{Due: now + 2000, Created: now, Updated: now + 1001, First: now + 1000, Body: []byte("c")})
	start("start", r)
	stored("started: the record is as it was", Record{Due: now + 2000, Created: now, Updated: now + 1001, First: now + 1000, Body: []byte("c")})
	// A debounce send while the delivery runs opens a new window; the
	// outcome of the delivery finds the record replaced, keeps it and
	// clears the running mark.
	put(now+3000, Put{ID: "x", Policy: PolicyDebounce, Due: now + 3000 + 70000, MaxWait: 60000, Body: []byte("d")})
	stored("debounced after a start: a new window", Record{Due: now + 3000 + 60000, Created: now, Updated: now + 3000, First: now + 3000, Body: []byte("d")})
	if kept, err := s.Ack(ctx, TopicPartition{Topic: "t", P: 0}, []Acked{{ID: "x", Header: r.Header(), Token: 1}}, 0); err != nil || kept != 1 {
		t.Fatalf("ack of the started record, replaced since: kept %d, %v", kept, err)
	}
	if r, err := s.do(ctx, cmd{"HGET", []any{keys.Records(s.ns, "t", 0), keys.RunningField("x")}}); err != nil || r[0] != nil {
		t.Errorf("running mark after the ack: %v, %v", r, err)
	}
	stored("the delivery that ran acked", Record{Due: now + 3000 + 60000, Created: now, Updated: now + 3000, First: now + 3000, Body: []byte("d")})

	// A trace: the flag of the version byte follows the event written
	// (the trace comes with the rest of the record), and a start keeps it.
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	put(now+4000, Put{ID: "x", Policy: PolicyReplace, Due: now + 9000, Trace: tp, Body: []byte("e")})
	r = stored("replaced by a traced event", Record{Due: now + 9000, Created: now, Updated: now + 4000, First: now + 4000, Trace: tp, Body: []byte("e")})
	start("start a traced record", r)
	// Its delivery failed: the retry writes the record back with First
	// at Started (a delivery started), and no running mark.
	retry := *r
	retry.First, retry.Attempts = Started, 1
	if gone, err := s.Moves(ctx, TopicPartition{Topic: "t", P: 0}, []Move{{ID: "x", Score: now + 9000, Record: &retry, Was: r.Header()}}); err != nil || gone != 0 {
		t.Fatalf("retry: gone %d, %v", gone, err)
	}
	stored("traced, retried", Record{Due: now + 9000, Created: now, Updated: now + 4000, First: Started, Trace: tp, Body: []byte("e")})
	put(now+5000, Put{ID: "x", Policy: PolicyDebounce, Due: now + 9500, MaxWait: 60000, Body: []byte("f")})
	stored("debounced by an untraced event after a start", Record{Due: now + 9500, Created: now, Updated: now + 5000, First: now + 5000, Body: []byte("f")})
	put(now+6000, Put{ID: "x", Policy: PolicyDebounce, Due: now + 9600, MaxWait: 60000, Trace: tp, Body: []byte("g")})
	r = stored("debounced by a traced event", Record{Due: now + 9600, Created: now, Updated: now + 6000, First: now + 5000, Trace: tp, Body: []byte("g")})
	// The outcome of its delivery compares the header Go encodes with
	// the stored one: the ack removes it.
	if kept, err := s.Ack(ctx, TopicPartition{Topic: "t", P: 0}, []Acked{{ID: "x", Header: r.Header()}}, 0); err != nil || kept != 0 {
		t.Fatalf("ack a traced record: kept %d, %v", kept, err)
	}
	if r, err := s.do(ctx, cmd{"HGET", []any{keys.Records(s.ns, "t", 0), "x"}}); err != nil || r[0] != nil {
		t.Errorf("the traced record acked by its header is still there (%v, %v)", r, err)
	}
	put(now+7000, Put{ID: "x", Policy: PolicyDebounce, Due: now + 9700, MaxWait: 60000, Trace: tp, Body: []byte("h")})
	stored("created traced", Record{Due: now + 9700, Created: now + 7000, Updated: now + 7000, First: now + 7000, Trace: tp, Body: []byte("h")})
}
