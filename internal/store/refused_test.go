package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// A peer that will never serve us fails at once, saying which, and is no
// outage even while a write retries: a wrong password, a missing one, and
// a port that does not speak Redis (an HTTP server). A port that cannot
// be one is refused by Open.
func TestRefusedIsNoOutage(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, Password: "right"})
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go srv.Serve(httpLn)
	t.Cleanup(func() { srv.Close() })

	for _, tc := range []struct {
		name, addr, password string
		want                 error
		says                 string
	}{
		{"wrong password", env.Backends[0], "wrong", ErrAuth, env.Backends[0] + " refused the credentials"},
		{"no password", env.Backends[0], "", ErrAuth, "NOAUTH"},
		{"no password via proxy", env.Proxy, "", ErrAuth, "NOAUTH"},
		{"http", httpLn.Addr().String(), "", ErrNotRedis, httpLn.Addr().String() + " does not speak Redis"},
		{"http with password", httpLn.Addr().String(), "x", ErrNotRedis, "HTTP/1.1 400"},
		{"http of two", httpLn.Addr().String() + "," + httpLn.Addr().String(), "", ErrNotRedis, "does not speak Redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			st, err := Open(Options{Conn: Conn{Addr: tc.addr, Password: tc.password}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			start := time.Now()
			_, err = st.ReadLayout(WithRetry(context.Background(), 5*time.Second), "t")
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %v", took)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want %v saying %q", err, tc.want, tc.says)
			}
			if Unavailable(err) || errors.Is(err, ErrUnreachable) {
				t.Errorf("err = %v: an outage", err)
			}
			if strings.Contains(logs.String(), "outage") {
				t.Errorf("logs: %s", logs.String())
			}
		})
	}
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:nope", "127.0.0.1:-1"} {
		if _, err := Open(Options{Conn: Conn{Addr: addr}}); err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("Open(%s): %v, want an error naming it", addr, err)
		}
	}
}
