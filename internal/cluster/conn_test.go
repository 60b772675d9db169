package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// newRouter returns a Router over seeds (comma-separated).
func newRouter(t *testing.T, seeds string) *Router {
	t.Helper()
	r, err := New(Options{
		Seeds: strings.Split(seeds, ","),
		Dial: func(ctx context.Context, addr string) (*portable.Conn, error) {
			return portable.Dial(ctx, addr, portable.DialOptions{Cluster: true})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// keyIn returns a key of slot, tagged like a partition's.
func keyIn(t *testing.T, slot int, name string) string {
	t.Helper()
	for i := range 1 << 20 {
		tag := fmt.Sprintf("t:%d", i)
		if Slot(tag) == slot {
			return "{" + tag + "}:" + name
		}
	}
	t.Fatalf("no tag of slot %d", slot)
	return ""
}

// direct runs a command on addr itself, with no routing.
func direct(t *testing.T, addr string, cmd string, args ...any) (any, error) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Do(cmd, args...)
}

func TestConnRoutesPipelines(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	r := newRouter(t, cl.Seeds())
	c := r.Conn()
	defer c.Close()
	// Keys over every master, in one pipeline: replies in the order sent.
	var keys []string
	for i := range 60 {
		keys = append(keys, fmt.Sprintf("{k%d}:v", i))
	}
	for i, k := range keys {
		if err := c.Send("SET", k, i, "PX", 60000); err != nil {
			t.Fatal(err)
		}
		if err := c.Send("INCR", "{n}:count"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if r, err := redis.String(c.Receive()); err != nil || r != "OK" {
			t.Fatalf("SET %d: %v %v", i, r, err)
		}
		if n, err := redis.Int(c.Receive()); err != nil || n != i+1 {
			t.Fatalf("INCR %d = %d, %v; want %d", i, n, err, i+1)
		}
	}
	masters := map[string]bool{}
	for i, k := range keys {
		owner, err := cl.MasterOf(Slot(k))
		if err != nil {
			t.Fatal(err)
		}
		masters[owner] = true
		if v, err := redis.Int(direct(t, owner, "GET", k)); err != nil || v != i {
			t.Fatalf("GET %s on its master %s = %d, %v; want %d", k, owner, v, err, i)
		}
	}
	if len(masters) != 3 {
		t.Errorf("60 keys reached %d masters, want 3", len(masters))
	}
	if v, err := redis.Int(c.Do("GET", keys[7])); err != nil || v != 7 {
		t.Errorf("Do GET = %d, %v", v, err)
	}
	if _, err := c.Do("PING"); err != nil {
		t.Errorf("PING: %v", err)
	}
}

func TestConnFollowsMoved(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	r := newRouter(t, cl.Seeds())
	const slot = 100
	k := keyIn(t, slot, "s")
	c := r.Conn()
	defer c.Close()
	if _, err := c.Do("SET", k, "before", "PX", 60000); err != nil {
		t.Fatal(err)
	}
	from, err := cl.MasterOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	masters, err := cl.Masters()
	if err != nil {
		t.Fatal(err)
	}
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	cl.MoveSlot(t, slot, to)
	// The router still says from: the node answers MOVED.
	if a, _ := r.Addr(context.Background(), slot); a != from {
		t.Fatalf("router has slot %d at %s before any redirection, want %s", slot, a, from)
	}
	c.Send("GET", k)
	c.Send("SET", k, "after", "PX", 60000)
	c.Send("GET", k)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"before", "OK", "after"} {
		if v, err := redis.String(c.Receive()); err != nil || v != want {
			t.Fatalf("reply %d after the move = %q, %v; want %q", i, v, err, want)
		}
	}
	if a, _ := r.Addr(context.Background(), slot); a != to {
		t.Errorf("router has slot %d at %s after MOVED, want %s", slot, a, to)
	}
	if v, err := redis.String(direct(t, to, "GET", k)); err != nil || v != "after" {
		t.Errorf("GET on %s = %q, %v", to, v, err)
	}
}

func TestConnFollowsAsk(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	r := newRouter(t, cl.Seeds())
	const slot = 9000
	moved, stays, fresh := keyIn(t, slot, "moved"), keyIn(t, slot, "stays"), keyIn(t, slot, "fresh")
	c := r.Conn()
	defer c.Close()
	for _, k := range []string{moved, stays} {
		if _, err := c.Do("HSET", k, "f", k); err != nil {
			t.Fatal(err)
		}
	}
	from, err := cl.MasterOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	masters, _ := cl.Masters()
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	cl.BeginMove(t, slot, to)
	cl.MoveKeys(t, slot, to, moved)
	// One pipeline: a key still on the source, one moved (ASK), a new
	// one (ASK: the source does not have it).
	c.Send("HGET", stays, "f")
	c.Send("HGET", moved, "f")
	c.Send("HSET", fresh, "f", fresh)
	c.Send("HGET", moved, "f")
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []any{stays, moved, int64(1), moved} {
		v, err := c.Receive()
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		if err != nil || v != want {
			t.Fatalf("reply %d mid-migration = %v, %v; want %v", i, v, err, want)
		}
	}
	if a, _ := r.Addr(context.Background(), slot); a != from {
		t.Errorf("an ASK moved the router's slot to %s; it stays at %s until the migration ends", a, from)
	}
	cl.FinishMove(t, slot, to)
	for _, k := range []string{moved, stays, fresh} {
		if v, err := redis.String(direct(t, to, "HGET", k, "f")); err != nil || v != k {
			t.Errorf("HGET %s on %s after the move = %q, %v", k, to, v, err)
		}
	}
}

func TestSeedDown(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	seeds := strings.Split(cl.Seeds(), ",")
	cl.Kill(t, seeds[0])
	r := newRouter(t, cl.Seeds())
	ms, err := r.Masters(context.Background())
	if err != nil {
		t.Fatalf("map from seeds %v with %s down: %v", seeds, seeds[0], err)
	}
	if len(ms) != 3 {
		t.Errorf("masters %v, want 3", ms)
	}
	dead := newRouter(t, seeds[0])
	if _, err := dead.Masters(context.Background()); err == nil || !strings.Contains(err.Error(), seeds[0]) {
		t.Errorf("map from the dead seed alone: %v, want an error naming it", err)
	}
}

func TestConnAfterFailover(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{})
	r := newRouter(t, cl.Seeds())
	k := keyIn(t, 5000, "f")
	c := r.Conn()
	if _, err := c.Do("SET", k, "v", "PX", 600000); err != nil {
		t.Fatal(err)
	}
	c.Close()
	old, err := cl.MasterOf(5000)
	if err != nil {
		t.Fatal(err)
	}
	// The write reaches the replica before the kill.
	if _, err := direct(t, old, "WAIT", 1, 5000); err != nil {
		t.Fatal(err)
	}
	cl.Kill(t, old)
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for {
		c := r.Conn()
		v, err := redis.String(c.Do("GET", k))
		c.Close()
		if err == nil {
			if v != "v" {
				t.Fatalf("GET after the failover = %q", v)
			}
			break
		}
		last = err
		var re redis.Error
		if errors.As(err, &re) && !strings.HasPrefix(string(re), "CLUSTERDOWN") {
			t.Fatalf("GET during the failover answered %v: only CLUSTERDOWN or a connection's error may come", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover in 30 s; the last error: %v", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a, _ := r.Addr(context.Background(), 5000); a == old {
		t.Errorf("router still sends slot 5000 to the dead %s", old)
	}
}

// TestHealth: a master that stops answering is reported Down once, and
// Up once it answers again.
func TestHealth(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	var mu sync.Mutex
	var events []string
	r, err := New(Options{
		Seeds: strings.Split(cl.Seeds(), ","),
		Dial: func(ctx context.Context, addr string) (*portable.Conn, error) {
			return portable.Dial(ctx, addr, portable.DialOptions{Cluster: true, ConnectTimeout: time.Second, ReadTimeout: time.Second})
		},
		Down: func(addr string, err error) { mu.Lock(); events = append(events, "down "+addr); mu.Unlock() },
		Up:   func(addr string) { mu.Lock(); events = append(events, "up "+addr); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	k := keyIn(t, 3000, "h")
	victim, err := cl.MasterOf(3000)
	if err != nil {
		t.Fatal(err)
	}
	get := func() error {
		c := r.Conn()
		defer c.Close()
		_, err := c.Do("GET", k)
		return err
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	cl.Kill(t, victim)
	for range 3 {
		if err := get(); err == nil {
			t.Fatal("GET of a key on a dead master succeeded")
		}
	}
	cl.Restart(t, victim)
	testenv.WaitFor(t, 20*time.Second, "the master back", func() bool { return get() == nil })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"down " + victim, "up " + victim}; !slices.Equal(events, want) {
		t.Errorf("health events %q, want %q", events, want)
	}
}
