package store

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
)

// A dial's error names each address once, as the network error does:
// "dial tcp 127.0.0.1:1: connect: connection refused", not behind
// prefixes that repeat it.
func TestDialErrorNamesAddressOnce(t *testing.T) {
	for _, addrs := range [][]string{{"127.0.0.1:1"}, {"127.0.0.1:1", "127.0.0.1:2"}} {
		st, err := Open(Options{Conn: Conn{Addr: strings.Join(addrs, ",")}})
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

// A proxy down is logged once while another answers, and only then: not
// when a process starts with every proxy down (the outage's line says
// it, alone), and when it starts with one down and another answering,
// once the other answered.
func TestProxyDownLoggedWhileAnotherAnswers(t *testing.T) {
	errA, errB := errors.New("dial tcp a:1: connect: connection refused"), errors.New("dial tcp b:2: connect: connection refused")
	newLogged := func() (*proxies, *testenv.Buffer) {
		var buf testenv.Buffer
		return newProxies([]string{"a:1", "b:2"}, slog.New(slog.NewTextHandler(&buf, nil)), nil), &buf
	}

	// Started during an outage: the dial finds both down.
	x, buf := newLogged()
	done := x.outage.Wait(time.Second)
	_, err := x.dial(context.Background(), func(ctx context.Context, addr string) (*portable.Conn, error) {
		if addr == "a:1" {
			return nil, errA
		}
		return nil, errB
	})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dial: %v", err)
	}
	x.up(1) // b answers again; a is still in its backoff
	done()
	if n := strings.Count(buf.String(), "proxy down"); n != 0 || strings.Count(buf.String(), "outage: no address answers") != 1 {
		t.Errorf("started during an outage: %d proxy-down lines, want only the outage's line:\n%s", n, buf)
	}

	// Started with a down and b answering.
	x, buf = newLogged()
	x.failed(0, errA)
	x.up(1)
	x.up(1)
	if n := strings.Count(buf.String(), `msg="proxy down: skipping it" proxy=a:1`); n != 1 || strings.Contains(buf.String(), "b:2") {
		t.Errorf("started with a down: %d lines for a, want 1:\n%s", n, buf)
	}

	// Running on both, a fails: at once.
	x, buf = newLogged()
	x.up(0)
	x.up(1)
	x.failed(0, errA)
	x.failed(0, errA)
	if n := strings.Count(buf.String(), `msg="proxy down: skipping it" proxy=a:1`); n != 1 {
		t.Errorf("a down while b answers: %d lines, want 1:\n%s", n, buf)
	}
}

// A connection dialed before its proxy failed is stale once the proxy is
// back: it is not used, and its own failure, found when it is closed, is
// the old one, so the proxy is not marked down (and logged) again.
func TestStaleConnAfterProxyBack(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, NoProxy: true})
	var buf testenv.Buffer
	x := newProxies(env.Backends, slog.New(slog.NewTextHandler(&buf, nil)), nil)
	dial := func(ctx context.Context, addr string) (*portable.Conn, error) {
		return portable.Dial(ctx, addr, portable.DialOptions{})
	}
	var stale *proxyConn
	for range 2 { // dials go to each in turn: both answer
		c, err := x.dial(context.Background(), dial)
		if err != nil {
			t.Fatal(err)
		}
		if pc := c.(*proxyConn); pc.i == 0 {
			stale = pc
		} else {
			defer c.Close()
		}
	}
	env.StopBackend(t, 0)
	if _, err := stale.Do("PING"); err == nil {
		t.Fatal("PING of a stopped backend succeeded")
	}
	// Another connection finds it down first: the loss is logged.
	x.failed(0, errors.New("connection reset"))
	env.StartBackend(t, 0)
	x.up(0) // a probe found it back
	if x.usable(stale) {
		t.Error("a connection dialed before its proxy failed is usable after the proxy is back")
	}
	stale.Close()
	x.mu.Lock()
	down := x.state[0].down
	x.mu.Unlock()
	if down {
		t.Error("closing a stale broken connection marked its proxy down again")
	}
	if n := strings.Count(buf.String(), `msg="proxy down: skipping it"`); n != 1 {
		t.Errorf("proxy down logged %d times, want once:\n%s", n, buf.String())
	}
}
