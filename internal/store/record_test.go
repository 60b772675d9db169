package store

import (
	"bytes"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{},
		{Due: 1700000000000, Created: 1699999990000, Updated: 1700000001000, Attempts: 3, MaxAttempts: 5, LastError: "boom", Body: []byte("hello")},
		{Due: 1, Created: 2, Updated: 1, Body: bytes.Repeat([]byte{0, 0xff}, 1000)},
		{Due: 1700000000000, Created: 1699999990000, Updated: 1700000001000, First: 1699999995000, MaxAttempts: 2, Body: []byte("debounced")},
		{Due: -5, Created: 1 << 53, Updated: -(1 << 53), First: Started, Attempts: 1, LastError: "x"},
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
			got.MaxAttempts != r.MaxAttempts || got.LastError != r.LastError || !bytes.Equal(got.Body, r.Body) {
			t.Errorf("round trip: got %+v, want %+v", got, r)
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
		if again.Due != r.Due || again.Created != r.Created || again.Updated != r.Updated || again.First != r.First || !bytes.Equal(again.Body, r.Body) || again.LastError != r.LastError {
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
