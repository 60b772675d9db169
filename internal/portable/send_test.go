package portable

import (
	"bytes"
	"net"
	"testing"
)

// recConn records each write that reaches the network.
type recConn struct {
	net.Conn
	writes [][]byte
}

func (r *recConn) Write(p []byte) (int, error) {
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

// sendConn sends small pieces together in one write, a pipeline larger
// than sendMax in writes of at most sendMax bytes (but for a single piece
// that large, written as it is), every byte once and in order, and never
// keeps a buffer larger than sendMax.
func TestSendConnWrites(t *testing.T) {
	rc := &recConn{}
	s := &sendConn{Conn: rc}
	var want []byte
	write := func(p []byte) {
		t.Helper()
		if n, err := s.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write of %d bytes: %d, %v", len(p), n, err)
		}
		if cap(s.buf) > sendMax {
			t.Fatalf("buffer of %d bytes kept, more than %d", cap(s.buf), sendMax)
		}
		want = append(want, p...)
	}
	piece := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

	write(piece(10, 'a'))
	write(piece(3000, 'b'))
	write(piece(20, 'c'))
	if len(rc.writes) != 0 {
		t.Fatalf("%d writes before send", len(rc.writes))
	}
	if err := s.send(); err != nil {
		t.Fatal(err)
	}
	if len(rc.writes) != 1 || !bytes.Equal(rc.writes[0], want) {
		t.Fatalf("small pieces: %d writes, want one of %d bytes", len(rc.writes), len(want))
	}

	rc.writes, want = nil, nil
	for i := range 300 { // about 4.6 times sendMax in 1000-byte pieces, with two large ones
		write(piece(1000, byte('d'+i%20)))
		if i == 100 {
			write(piece(sendMax+5, 'X'))
		}
		if i == 200 {
			write(piece(sendMax-1, 'Y'))
		}
	}
	if err := s.send(); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(rc.writes, nil); !bytes.Equal(got, want) {
		t.Fatalf("sent %d bytes, not the %d written in order", len(got), len(want))
	}
	for i, w := range rc.writes {
		if len(w) > sendMax && !bytes.Equal(w, piece(sendMax+5, 'X')) {
			t.Errorf("write %d of %d bytes, more than %d", i, len(w), sendMax)
		}
	}
	if len(rc.writes) < 5 || len(rc.writes) > 9 {
		t.Errorf("%d writes for %d bytes", len(rc.writes), len(want))
	}
}
