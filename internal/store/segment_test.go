package store

import (
	"bytes"
	"testing"
)

func TestSegmentRoundTrip(t *testing.T) {
	const prefix = "01JDQ0000000000000000A"
	msgs := []NewMessage{
		{ID: prefix + "0012", Record: &Record{Due: 1700000000500, Created: 1699999000000, Body: []byte("one")}},
		{ID: prefix + "01ZZ", Record: &Record{Due: 1700000000400, Created: 1699999000000, LastError: "e", Body: bytes.Repeat([]byte{0, 0xff}, 300)}},
		{ID: prefix + "0200", Record: &Record{Due: 1700000000600, Body: nil}},
	}
	seg, due := encodeSegment(msgs)
	if due != 1700000000400 {
		t.Errorf("earliest due %d, want 1700000000400", due)
	}
	entries, err := decodeSegment(seg)
	if err != nil || len(entries) != len(msgs) {
		t.Fatalf("decode: %d entries, %v", len(entries), err)
	}
	for i, m := range msgs {
		e := entries[i]
		r, err := DecodeRecord(e.rec)
		if err != nil || prefix+e.suffix != m.ID || e.due != m.Record.Due || r.Due != m.Record.Due ||
			r.LastError != m.Record.LastError || !bytes.Equal(r.Body, m.Record.Body) {
			t.Errorf("entry %d: %+v (record %+v, %v), want %s due %d", i, e, r, err, m.ID, m.Record.Due)
		}
		if got, err := segLookup(seg, m.ID); err != nil || got == nil || got.due != m.Record.Due {
			t.Errorf("lookup %s: %+v, %v", m.ID, got, err)
		}
	}
	if got, err := segLookup(seg, prefix+"0300"); got != nil || err != nil {
		t.Errorf("lookup of an id not in the segment: %+v, %v", got, err)
	}
	if _, err := decodeSegment(seg[:len(seg)-1]); err == nil {
		t.Error("a truncated segment decoded")
	}
}

func FuzzDecodeSegment(f *testing.F) {
	seg, _ := encodeSegment([]NewMessage{{ID: "01JDQ0000000000000000A0000", Record: &Record{Due: 5, Body: []byte("x")}}})
	f.Add(seg)
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeSegment(b)
		if err != nil {
			return
		}
		n := 0
		for _, e := range entries {
			n += len(e.suffix) + 12 + len(e.rec)
		}
		if n != len(b) {
			t.Fatalf("%d entries cover %d of %d bytes", len(entries), n, len(b))
		}
	})
}
