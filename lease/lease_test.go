package lease_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/lease"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"
)

func setup(t *testing.T, addr string) (*store.Store, *redsync.Redsync) {
	st, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, redsync.New(redigo.NewPool(st.Pool()))
}

func opts(st *store.Store, value string, expiry time.Duration) lease.Options {
	return lease.Options{
		Expiry: expiry,
		Value:  value,
		Token:  func(ctx context.Context) (int64, error) { return st.NextToken(ctx, "lt", 0, time.Now().UnixMilli()) },
	}
}

func TestAcquireExclusiveTokensRelease(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			st, rs := setup(t, tg.Addr)
			name := "lt:" + tg.Name
			a, err := lease.Acquire(ctx, rs, name, opts(st, "a", time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lease.Acquire(ctx, rs, name, opts(st, "b", time.Second)); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("second acquire: %v, want ErrTaken", err)
			}
			if !a.Valid() || a.Token() < 1 {
				t.Fatalf("fresh lease: valid %v token %d", a.Valid(), a.Token())
			}
			// Kept alive past several expiries.
			until0 := a.Until()
			deadline := time.Now().Add(5 * time.Second)
			for !a.Until().After(until0.Add(time.Second)) {
				if time.Now().After(deadline) || a.Ctx().Err() != nil {
					t.Fatalf("lease not extended: until %v (was %v), ctx %v", a.Until(), until0, a.Ctx().Err())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatalf("second release: %v", err)
			}
			if !errors.Is(context.Cause(a.Ctx()), lease.ErrReleased) || a.Valid() {
				t.Fatalf("after release: cause %v valid %v", context.Cause(a.Ctx()), a.Valid())
			}
			b, err := lease.Acquire(ctx, rs, name, opts(st, "b", time.Second))
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			defer b.Release(ctx)
			if b.Token() <= a.Token() {
				t.Errorf("token of the next owner %d is not above %d", b.Token(), a.Token())
			}
		})
	}
}

// A lease whose extensions fail (the lock was taken over) is lost: its
// context is cancelled with ErrLost before Until.
func TestLostWhenTakenOver(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	st, rs := setup(t, env.Backends[0])
	a, err := lease.Acquire(ctx, rs, "lt:lost", opts(st, "a", 600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Someone deletes the lock and takes it (as after an expiry during a pause).
	if _, err := testenv.Do(env.Backends[0], "DEL", "lt:lost"); err != nil {
		t.Fatal(err)
	}
	b, err := lease.Acquire(ctx, rs, "lt:lost", opts(st, "b", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	select {
	case <-a.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("lease not lost after its lock was taken over")
	}
	if !errors.Is(context.Cause(a.Ctx()), lease.ErrLost) || a.Valid() {
		t.Fatalf("cause %v valid %v, want ErrLost and invalid", context.Cause(a.Ctx()), a.Valid())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release of a lost lease: %v", err)
	}
	// The lost lease's release must not free the new owner's lock.
	if _, err := lease.Acquire(ctx, rs, "lt:lost", opts(st, "c", time.Second)); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("acquire after a lost lease's release: %v, want ErrTaken", err)
	}
}

// With Redis unreachable, the lease is given up before Until, so no work
// runs past the point where another process may own the partition.
func TestLostBeforeUntilWhenRedisGone(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	st, rs := setup(t, env.Backends[0])
	a, err := lease.Acquire(ctx, rs, "lt:gone", opts(st, "a", 900*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	env.StopBackend(t, 0)
	var lostAt atomic.Int64
	<-a.Done()
	lostAt.Store(time.Now().UnixNano())
	if until := a.Until(); time.Unix(0, lostAt.Load()).After(until) {
		t.Fatalf("lease cancelled at %v, after its Until %v", time.Unix(0, lostAt.Load()), until)
	}
	if !errors.Is(context.Cause(a.Ctx()), lease.ErrLost) {
		t.Fatalf("cause %v", context.Cause(a.Ctx()))
	}
	_ = a.Release(ctx) // Redis is down: an error is expected; the call must return
}

// An idle lease is extended every Expiry/2; once its holder is busy
// again, the next extension comes Expiry/3 after the last one.
func TestIdleExtendsLessOften(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	st, rs := setup(t, env.Backends[0])
	const expiry = 1200 * time.Millisecond
	l, err := lease.Acquire(context.Background(), rs, "lt:idle", opts(st, "a", expiry))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	l.SetIdle(time.UnixMilli(1)) // idle, a message due soon
	// extended waits for the next extension and returns when it landed.
	extended := func() time.Time {
		t.Helper()
		before := l.Until()
		deadline := time.Now().Add(expiry)
		for time.Now().Before(deadline) {
			if l.Until() != before {
				return time.Now()
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("no extension within %v", expiry)
		return time.Time{}
	}
	prev := extended()
	for range 2 {
		at := extended()
		if gap := at.Sub(prev); gap < expiry/2-20*time.Millisecond {
			t.Errorf("idle lease extended %v after the last, want Expiry/2 (%v)", gap, expiry/2)
		}
		prev = at
	}
	time.Sleep(expiry / 12)
	l.SetIdle(time.Time{})
	if gap := extended().Sub(prev); gap > expiry/2-expiry/12 {
		t.Errorf("busy again, the lease was extended %v after the last, want about Expiry/3 (%v)", gap, expiry/3)
	}
	if !l.Valid() {
		t.Error("lease not valid")
	}
}

// A quiet lease (idle, nothing due within IdleExpiry) is extended to
// IdleExpiry, every IdleExpiry/2, in Redis too; once something falls due
// sooner, it tells Busy and is extended to Expiry within Expiry/3.
func TestQuietExtendsLonger(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	st, rs := setup(t, env.Backends[0])
	const expiry = 900 * time.Millisecond
	o := opts(st, "a", expiry)
	busy := make(chan struct{}, 1)
	o.Busy = func() { busy <- struct{}{} }
	l, err := lease.Acquire(context.Background(), rs, "lt:quiet", o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	l.SetIdle(time.Now().Add(time.Hour))
	deadline := time.Now().Add(expiry)
	for !l.Quiet() {
		if time.Now().After(deadline) {
			t.Fatalf("not quiet %v after SetIdle, Until in %v", expiry, time.Until(l.Until()))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if left := time.Until(l.Until()); left < 2*expiry {
		t.Fatalf("quiet lease extended until %v from now, want about IdleExpiry (%v)", left, lease.IdleFactor*expiry)
	}
	if pttl := pttl(t, env.Backends[0], "lt:quiet"); pttl < 2*expiry {
		t.Fatalf("quiet lease's PTTL %v in Redis, want about IdleExpiry (%v)", pttl, lease.IdleFactor*expiry)
	}
	// Still held after its first Expiry, and extended again about
	// IdleExpiry/2 after the last extension.
	first := l.Until()
	time.Sleep(expiry + expiry/5)
	if !l.Valid() {
		t.Fatal("quiet lease not valid after Expiry")
	}
	deadline = time.Now().Add(lease.IdleFactor * expiry)
	for l.Until().Equal(first) {
		if time.Now().After(deadline) {
			t.Fatal("quiet lease not extended within IdleExpiry")
		}
		time.Sleep(2 * time.Millisecond)
	}
	l.SetIdle(time.Now().Add(expiry)) // a message due soon
	select {
	case <-busy:
	case <-time.After(time.Second):
		t.Fatal("Busy not told when the lease stopped being quiet")
	}
	deadline = time.Now().Add(expiry / 2)
	for time.Until(l.Until()) > expiry+expiry/10 {
		if time.Now().After(deadline) {
			t.Fatalf("no longer quiet, the lease still runs %v", time.Until(l.Until()))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if pttl := pttl(t, env.Backends[0], "lt:quiet"); pttl > expiry {
		t.Fatalf("no longer quiet, PTTL %v in Redis, want at most Expiry (%v)", pttl, expiry)
	}
}

// pttl reads key's time to live from the Redis at addr.
func pttl(t *testing.T, addr, key string) time.Duration {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ms, err := redis.Int64(c.Do("PTTL", key))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

// An error of the lease's one Redis connection reads as the store's,
// naming the address, without redsync's "node #0: " prefix.
func TestAcquireErrorNamesAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a server that hangs up once it has read a command
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512))
			c.Close()
		}
	}()
	st, rs := setup(t, ln.Addr().String())
	_, err = lease.Acquire(context.Background(), rs, "lt:eof", opts(st, "a", time.Second))
	if err == nil {
		t.Fatal("acquired a lease from a server that hangs up")
	}
	if msg := err.Error(); strings.Contains(msg, "node #") || !strings.Contains(msg, ln.Addr().String()) || !strings.Contains(msg, "EOF") {
		t.Errorf("error %q: want the address and EOF, without redsync's node number", msg)
	}
}

// A failed extension makes the lease unsteady (Steady false) until one
// goes through: through a proxy that stops and starts again before the
// lease's deadline, the lease is kept, and steady again.
func TestSteadyAcrossAnOutage(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	ctx := context.Background()
	st, rs := setup(t, env.Proxy)
	a, err := lease.Acquire(ctx, rs, "lt:steady", opts(st, "a", 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	if !a.Steady() {
		t.Fatal("a lease just acquired is not steady")
	}
	env.StopProxy(t)
	testenv.WaitFor(t, 3*time.Second, "the lease unsteady once an extension failed", func() bool { return !a.Steady() })
	if !a.Valid() {
		t.Fatal("the lease is no longer valid at its first failed extension")
	}
	env.StartProxy(t)
	testenv.WaitFor(t, 2*time.Second, "the lease steady again", a.Steady)
	select {
	case <-a.Done():
		t.Fatalf("lease lost across an outage shorter than its expiry: %v", context.Cause(a.Ctx()))
	default:
	}
	if !a.Valid() {
		t.Error("the lease is not valid after a successful extension")
	}
}
