package store

import (
	"bytes"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{},
		{Due: 1700000000000, Created: 1699999990000, Updated: 1700000001000, Attempts: 3, MaxAttempts: 5, LastError: "boom", Body: []byte("hello")},
		{Due: 1, Created: 2, Updated: 1, Body: bytes.Repeat([]byte{0, 0xff}, 1000)},
		{Due: 1700000000000, Created: 1699999990000, Updated: 1700000001000, First: 1699999995000, MaxAttempts: 2, Body: []byte("debounced")},
		{Due: -5, Created: 1 << 53, Updated: -(1 << 53), First: Started, Attempts: 1, LastError: "x"},
		{Due: 1700000000000, Created: 1699999990000, Updated: 1700000001000, Attempts: 2, LastError: "boom", Trace: testTrace, Body: []byte("traced")},
		{Due: 1700000000000, Created: 1699999990000, Updated: 1700000001000, First: Started, Trace: testTrace, Body: []byte("traced, debounced")},
		{Due: 1, Trace: testTrace},
	} {
		b := r.Encode()
		if len(b) != r.encodedLen() || cap(b) != len(b) {
			t.Errorf("encoded %d bytes (capacity %d), encodedLen says %d", len(b), cap(b), r.encodedLen())
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got.Due != r.Due || got.Created != r.Created || got.Updated != r.Updated || got.First != r.First || got.Attempts != r.Attempts ||
			got.MaxAttempts != r.MaxAttempts || got.LastError != r.LastError || got.Trace != r.Trace || !bytes.Equal(got.Body, r.Body) {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
		if !bytes.HasPrefix(b, r.Header()) {
			t.Errorf("%x does not begin with its header %x", b, r.Header())
		}
	}
}

// testTrace is a traceparent, as Record.Trace holds one.
const testTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestRecordTraceFlag: a record without a trace is encoded as it was
// before traces existed (version 1 or 2, nothing between the last error
// and the body); one with a trace has the flag in its version byte and
// the trace, length-prefixed, after the last error.
func TestRecordTraceFlag(t *testing.T) {
	plain := Record{Due: 5, Created: 5, Updated: 5, LastError: "e", Body: []byte("b")}
	if got, want := plain.Encode(), []byte{1, 10, 0, 0, 0, 0, 1, 'e', 'b'}; !bytes.Equal(got, want) {
		t.Errorf("untraced record: %x, want %x", got, want)
	}
	traced := plain
	traced.Trace = "tp"
	if got, want := traced.Encode(), []byte{0x11, 10, 0, 0, 0, 0, 1, 'e', 2, 't', 'p', 'b'}; !bytes.Equal(got, want) {
		t.Errorf("traced record: %x, want %x", got, want)
	}
	traced.First = 7
	if b := traced.Encode(); b[0] != 0x12 || len(traced.Header()) != headerFirstLen {
		t.Errorf("traced record with a First: version byte %#x (want 0x12), header %d bytes (want %d)", b[0], len(traced.Header()), headerFirstLen)
	}
	for _, b := range [][]byte{
		{0x41, 10, 0, 0, 0, 0, 1, 'e', 'b'},    // an unknown flag
		{0x21, 10, 0, 0, 0, 0, 1, 'e', 0x80},   // a truncated uniqueness window
		{0x21, 10, 0, 0, 0, 0, 1, 'e', 0},      // a window of 0 (none is no flag)
		{0x13, 10, 0, 0, 0, 0, 1, 'e', 'b'},    // an unknown version
		{0x11, 10, 0, 0, 0, 0, 1, 'e', 9, 't'}, // a trace past the end
		{0x11, 10, 0, 0, 0, 0, 1, 'e', 0x80},   // a truncated trace length
	} {
		if r, err := DecodeRecord(b); !errors.Is(err, ErrBadRecord) {
			t.Errorf("DecodeRecord(%x) = %+v, %v; want ErrBadRecord", b, r, err)
		}
	}
}

func TestRecordSize(t *testing.T) {
	r := Record{Due: 1700000000000, Created: 1699999000000, Updated: 1699999000000, Body: make([]byte, 256)}
	if n := len(r.Encode()); n > 256+16 {
		t.Errorf("encoded record of a 256-byte body is %d bytes, want at most %d", n, 256+16)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&Record{Due: 5, Body: []byte("x"), LastError: "e"}).Encode())
	f.Add((&Record{Due: 5, First: Started, Body: []byte("x")}).Encode())
	f.Add((&Record{Due: 5, Trace: testTrace, Body: []byte("x")}).Encode())
	f.Add((&Record{Due: 5, First: 3, LastError: "e", Trace: testTrace, Body: []byte("x")}).Encode())
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if n := len(r.Encode()); n != r.encodedLen() {
			t.Fatalf("%+v: encoded %d bytes, encodedLen says %d", r, n, r.encodedLen())
		}
		again, err := DecodeRecord(r.Encode())
		if err != nil {
			t.Fatalf("re-decode of %+v: %v", r, err)
		}
		if again.Due != r.Due || again.Created != r.Created || again.Updated != r.Updated || again.First != r.First || !bytes.Equal(again.Body, r.Body) || again.LastError != r.LastError || again.Trace != r.Trace {
			t.Fatalf("not stable: %+v vs %+v", r, again)
		}
	})
}

func BenchmarkRecordEncode(b *testing.B) {
	r := Record{Due: 1700000000000, Created: 1699999000000, Updated: 1699999000000, Body: make([]byte, 256)}
	b.ReportAllocs()
	for b.Loop() {
		r.Encode()
	}
}

func BenchmarkRecordDecode(b *testing.B) {
	enc := (&Record{Due: 1700000000000, Created: 1699999000000, Updated: 1699999000000, Body: make([]byte, 256)}).Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRecord(enc); err != nil {
			b.Fatal(err)
		}
	}
}
