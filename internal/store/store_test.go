package store

import "testing"

// openTest opens a Store on addr, closed when tb ends.
func openTest(tb testing.TB, addr string) *Store {
	tb.Helper()
	s, err := Open(Options{Conn: Conn{Addr: addr}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
