package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A dial's error names each address once, as the network error does:
// "dial tcp 127.0.0.1:1: connect: connection refused", not behind
// prefixes that repeat it.
func TestDialErrorNamesAddressOnce(t *testing.T) {
	for _, addrs := range [][]string{{"127.0.0.1:1"}, {"127.0.0.1:1", "127.0.0.1:2"}} {
		st, err := Open(Options{Addr: strings.Join(addrs, ",")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.ReadLayout(context.Background(), "t")
		st.Close()
		if !errors.Is(err, ErrUnreachable) {
			t.Errorf("%v: %v, want ErrUnreachable", addrs, err)
		}
		for _, a := range addrs {
			msg := err.Error()
			if !strings.Contains(msg, "dial tcp "+a+": connect: connection refused") || strings.Count(msg, a) != 1 {
				t.Errorf("%v: %q, want %s named once, by the network error", addrs, msg, a)
			}
		}
	}
}
