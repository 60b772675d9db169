package delayq

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/cluster"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
	"go.uber.org/goleak"
)

// TestMain starts the Twemproxy (with two backends) the examples run
// against, as $DELAYQ_ADDR; the tests start servers of their own. Every
// consumer, coalescer and lease a test starts must be stopped by the end
// of the run.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := testenv.StartDaemon("", testenv.Options{Backends: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		return 1
	}
	os.Setenv("DELAYQ_ADDR", env.Proxy)
	code := m.Run()
	env.Stop()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction(testenv.SpawnerFunc)); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	return code
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// forEachTarget runs f against a Redis server directly and through
// Twemproxy (3 backends, no hash_tag). The two have separate servers, so
// the runs cannot see each other's keys.
func forEachTarget(t *testing.T, f func(t *testing.T, addr string)) {
	direct := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	proxied := testenv.Start(t, testenv.Options{Backends: 3})
	t.Run("direct", func(t *testing.T) { f(t, direct.Backends[0]) })
	t.Run("twemproxy", func(t *testing.T) { f(t, proxied.Proxy) })
}

// testAddr starts three Redis servers behind Twemproxy, and returns the
// proxy's address.
func testAddr(t *testing.T) string {
	return testenv.Start(t, testenv.Options{Backends: 3}).Proxy
}

// startDirect starts a Redis server of the test's own and returns its
// address.
func startDirect(t *testing.T) string {
	t.Helper()
	return testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true}).Backends[0]
}

func portOf(t *testing.T, addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func newClient(t *testing.T, addr string, o Options) *Client {
	t.Helper()
	o.Addr = addr
	if o.Logger == nil {
		o.Logger = quiet
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = testenv.WaitFor

type recorder struct {
	mu   sync.Mutex
	seen map[string][]*Delivery
	at   map[string][]time.Time
	fail func(d *Delivery) error
}

func newRecorder() *recorder {
	return &recorder{seen: map[string][]*Delivery{}, at: map[string][]time.Time{}}
}

func (r *recorder) handle(ctx context.Context, d *Delivery) error {
	r.mu.Lock()
	r.seen[d.ID] = append(r.seen[d.ID], d)
	r.at[d.ID] = append(r.at[d.ID], time.Now())
	f := r.fail
	r.mu.Unlock()
	if f != nil {
		return f(d)
	}
	return nil
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[id])
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.seen {
		n += len(v)
	}
	return n
}

// startConsumer runs a consumer of c until stop, which shuts it down (at
// most 10 s) and fails t when its Run did; the test's cleanup calls stop
// too, when the test did not.
func startConsumer(t *testing.T, c *Client, o ConsumerOptions, h Handler) (*Consumer, func()) {
	t.Helper()
	k, err := c.NewConsumer(o, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(context.Background()) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := k.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return k, stop
}

// runConsumer runs a consumer of c until the test ends (see
// startConsumer).
func runConsumer(t *testing.T, c *Client, o ConsumerOptions, h Handler) *Consumer {
	t.Helper()
	k, _ := startConsumer(t, c, o, h)
	return k
}

// runStoppable runs a consumer of o as runConsumer does, under a context
// of its own, and returns it with a stop that shuts it down, cancels that
// context and waits for Run to return: once, however often it is called
// (the test's cleanup calls it too).
func runStoppable(t *testing.T, c *Client, o ConsumerOptions, h Handler) (*Consumer, func()) {
	t.Helper()
	k, err := c.NewConsumer(o, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Run(ctx)
	}()
	stop := sync.OnceFunc(func() {
		k.Shutdown(context.Background())
		cancel()
		<-done
	})
	t.Cleanup(stop)
	return k, stop
}

// mustBatch enqueues msgs and fails on any error.
func mustBatch(t *testing.T, c *Client, msgs []Message) {
	t.Helper()
	res, err := c.SendBatch(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// samePartition returns an id of the form prefix+n in partition p.
func samePartition(prefix string, p, n int) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		if partition.For(id, n) == p {
			return id
		}
	}
}

// addEntry writes an index entry for id in partition p's scheduled set,
// due at (unix ms, returned), with no record behind it: what a write cut
// short leaves.
func addEntry(t *testing.T, addr, topic string, p int, id string, at time.Time) int64 {
	t.Helper()
	ms := at.UnixMilli()
	if _, err := testenv.Do(addr, "ZADD", keys.Scheduled(DefaultNamespace, topic, p), strconv.FormatInt(ms, 10), id); err != nil {
		t.Fatalf("index entry of %s: %v", id, err)
	}
	return ms
}

// beginAll enqueues msgs, all of topic and due soon in its partition 0,
// then claims and begins them under a new fence token as a consumer
// would: they are in flight, their visibility deadline an hour away. It
// returns their records, in the order of msgs.
func beginAll(t *testing.T, c *Client, topic string, msgs ...Message) []*store.Record {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		if _, err := c.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		ids[i] = m.ID
	}
	tok := takeFence(t, c.store, topic, 0)
	var claimed []store.Claimed
	waitFor(t, 5*time.Second, "all claimed", func() bool {
		cl, err := c.store.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: 0}, tok, time.Now().UnixMilli(), 10)
		if err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, cl...)
		return len(claimed) == len(msgs)
	})
	deadlines := make([]int64, len(ids))
	for i := range deadlines {
		deadlines[i] = time.Now().Add(time.Hour).UnixMilli()
	}
	recs, err := c.store.Begin(ctx, store.TopicPartition{Topic: topic, P: 0}, ids, deadlines)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	for i, r := range recs {
		if r == nil {
			t.Fatalf("begin %q: no record", ids[i])
		}
	}
	return recs
}

// makeDead moves id, in flight in partition 0 of topic, to the dead set
// with its record rec, dead since diedAt.
func makeDead(t *testing.T, c *Client, topic, id string, rec *store.Record, diedAt time.Time) {
	t.Helper()
	if _, err := c.store.Moves(context.Background(), store.TopicPartition{Topic: topic, P: 0}, []store.Move{{ID: id, Dead: true, Score: diedAt.UnixMilli(), Record: rec}}); err != nil {
		t.Fatal(err)
	}
}

// takeFence draws a new fencing token for partition p and raises the
// fence to it, as a consumer that just acquired the lease does.
func takeFence(t *testing.T, st *store.Store, topic string, p int) int64 {
	t.Helper()
	ctx := context.Background()
	tok, err := st.NextToken(ctx, topic, p, time.Now().UnixMilli())
	if err != nil {
		t.Fatalf("token of %s/%d: %v", topic, p, err)
	}
	if err := st.RaiseFence(ctx, store.TopicPartition{Topic: topic, P: p}, tok); err != nil {
		t.Fatalf("fence of %s/%d: %v", topic, p, err)
	}
	return tok
}

// target is where a test's clients go: a server or a proxy (addr), or a
// Redis Cluster (addr its seeds).
type target struct {
	addr    string
	cluster *testenv.Cluster // nil but on a cluster
}

// options returns o for a client of tg.
func (tg target) options(o Options) Options {
	o.Cluster = tg.cluster != nil
	return o
}

// conn returns the store's connection settings for tg.
func (tg target) conn() store.Conn {
	return store.Conn{Addr: tg.addr, Cluster: tg.cluster != nil}
}

// nodeOf returns the server that holds key: tg's address, or on a
// cluster the master of key's slot.
func (tg target) nodeOf(t testing.TB, key string) string {
	t.Helper()
	if tg.cluster == nil {
		return tg.addr
	}
	m, err := tg.cluster.MasterOf(cluster.Slot(key))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// offTest is a test's T for helpers that may run off the test's
// goroutine: its Fatal reports the failure and unwinds to recover
// (deferred where the helper was called) instead of ending the goroutine.
type offTest struct{ testing.TB }

// offTestFatal is what offTest's Fatal unwinds with.
type offTestFatal struct{}

func (t offTest) Fatal(args ...any) {
	t.TB.Helper()
	t.TB.Error(args...)
	panic(offTestFatal{})
}

func (t offTest) Fatalf(format string, args ...any) {
	t.TB.Helper()
	t.TB.Errorf(format, args...)
	panic(offTestFatal{})
}

func (t offTest) FailNow() {
	t.TB.Fail()
	panic(offTestFatal{})
}

// recover ends the unwinding of a Fatal; any other panic goes on.
func (offTest) recover() {
	if r := recover(); r != nil {
		if _, ok := r.(offTestFatal); !ok {
			panic(r)
		}
	}
}

// redirector returns a crashHook's redirect on a cluster target: the
// slot of the command's key moves to another master (MOVED), or, with
// ask, begins to move with the key already there (ASK); finish ends a
// move begun. A move that fails fails the test, and the command goes
// without its redirection.
func (tg target) redirector(t *testing.T, ask bool) (redirect func(cmd string, args []any), finish func()) {
	moving, to := -1, ""
	redirect = func(cmd string, args []any) {
		// The hook runs on whatever goroutine sends the command, a
		// coalescer's flusher say: a Fatal there would end that goroutine
		// alone, and the test would wait forever for its reply.
		t := offTest{t}
		defer t.recover()
		key := ""
		switch {
		case cmd == "EVALSHA" || cmd == "EVAL":
			key = fmt.Sprint(args[2])
		case len(args) > 0 && cmd != "AUTH" && cmd != "CLUSTER":
			key = fmt.Sprint(args[0])
		default:
			return // no key: nothing to redirect
		}
		slot := cluster.Slot(key)
		from := tg.nodeOf(t, key)
		masters, err := tg.cluster.Masters()
		if err != nil {
			t.Fatal(err)
		}
		to = masters[0]
		if to == from {
			to = masters[1]
		}
		if !ask {
			tg.cluster.MoveSlot(t, slot, to)
			return
		}
		tg.cluster.BeginMove(t, slot, to)
		tg.cluster.MoveKeys(t, slot, to, key)
		moving = slot
	}
	finish = func() {
		t := offTest{t}
		defer t.recover()
		if moving >= 0 {
			tg.cluster.FinishMove(t, moving, to)
		}
	}
	return redirect, finish
}
