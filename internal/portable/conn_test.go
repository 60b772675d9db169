package portable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// A read waiting on a server that answers nothing (SIGSTOP) ends when its
// context does, long before the read timeout, with the context's error;
// the connection is then broken, and a new one works once the server
// resumes. Both the context-aware calls are covered: DoContext and a
// pipelined Send + ReceiveContext.
func TestContextEndsBlockedRead(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	addr := env.Backends[0]
	const readTimeout = time.Minute
	dial := func() redis.Conn {
		t.Helper()
		c, err := portable.Dial(context.Background(), addr, portable.DialOptions{ReadTimeout: readTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	calls := []struct {
		name string
		call func(ctx context.Context, c redis.Conn) error
	}{
		{"DoContext", func(ctx context.Context, c redis.Conn) error {
			_, err := redis.DoContext(c, ctx, "GET", "k")
			return err
		}},
		{"ReceiveContext", func(ctx context.Context, c redis.Conn) error {
			if err := c.Send("GET", "k"); err != nil {
				return err
			}
			if err := c.Flush(); err != nil {
				return err
			}
			_, err := redis.ReceiveContext(c, ctx)
			return err
		}},
	}
	for _, tc := range calls {
		for _, end := range []struct {
			name string
			ctx  func() (context.Context, context.CancelFunc)
			want error
		}{
			{"cancel", func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)
				return ctx, cancel
			}, context.Canceled},
			{"deadline", func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 100*time.Millisecond)
			}, context.DeadlineExceeded},
		} {
			t.Run(tc.name+"/"+end.name, func(t *testing.T) {
				c := dial()
				if _, err := c.Do("PING"); err != nil {
					t.Fatal(err)
				}
				env.PauseBackend(t, 0)
				defer env.ResumeBackend(t, 0)
				ctx, cancel := end.ctx()
				defer cancel()
				start := time.Now()
				err := tc.call(ctx, c)
				took := time.Since(start)
				if !errors.Is(err, end.want) {
					t.Errorf("%s on a paused server: %v, want %v", tc.name, err, end.want)
				}
				// Returned at the context's end, not at the read timeout.
				if took >= readTimeout/2 {
					t.Errorf("%s returned after %v: waited for the read timeout", tc.name, took)
				}
				if c.Err() == nil {
					t.Errorf("connection not broken after its read was abandoned")
				}
				env.ResumeBackend(t, 0)
				if _, err := dial().Do("PING"); err != nil {
					t.Errorf("new connection after resume: %v", err)
				}
			})
		}
	}
	// A context that never ends leaves replies alone.
	c := dial()
	if r, err := redis.String(redis.DoContext(c, context.Background(), "PING")); err != nil || r != "PONG" {
		t.Fatalf("PING = %q, %v", r, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if r, err := redis.String(redis.DoContext(c, ctx, "PING")); err != nil || r != "PONG" || c.Err() != nil {
		t.Fatalf("PING with a live context = %q, %v (conn err %v)", r, err, c.Err())
	}
}
