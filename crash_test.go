package delayq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// Crash safety, shown rather than assumed (I1 and I2 of docs/architecture.md).
//
// Each storage operation of a message's life is run through a connection
// whose hook kills it before its k-th command, for every k: exactly the
// first k-1 commands reach Redis (the hook flushes what was pipelined
// before it, see portable.DialOptions.Hook), as when a process dies with
// kill -9 between two commands. Then a fresh client and consumer start on
// the topic, and the message must be delivered or correctly gone.

// crashHook counts the commands sent through the connections of one store
// and, when failAt is k > 0, refuses the k-th command and every later one.
type crashHook struct {
	mu     sync.Mutex
	failAt int
	n      int
	cmds   []string
	// redirect, when set, runs before the failAt-th command in place of
	// the crash: a redirection (see crashMatrix), after which every
	// command goes through.
	redirect func(cmd string, args []any)
	// wakeLost: the first command refused was an enqueue's wake-up (see
	// Client.wake), which is best effort: the enqueue succeeds without it.
	wakeLost bool
	hit      string // the command the crash hit, and its key
}

func (h *crashHook) hook(cmd string, args []any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cmd == "PING" || cmd == "CLUSTER" {
		// The pool's health check of an idle connection, and a cluster
		// router's read of the slot map, which it also makes in the
		// background: not part of an operation. Refused once the crash
		// happened: an operation that needs the map then fails before
		// it sends anything, as after a failed dial.
		if cmd == "CLUSTER" && h.failAt > 0 && h.n >= h.failAt && h.redirect == nil {
			return fmt.Errorf("crash before CLUSTER: %w", portable.ErrInjected)
		}
		return nil
	}
	if cmd == "EVAL" {
		// Only ever the NOSCRIPT fallback of an EVALSHA counted before
		// it, maybe earlier in a pipeline: the same logical command
		// (whether the script is cached on the backend that holds the key
		// must not change the count). Refused once the crash happened.
		if h.failAt > 0 && h.n >= h.failAt && h.redirect == nil {
			return fmt.Errorf("crash before EVAL: %w", portable.ErrInjected)
		}
		return nil
	}
	h.n++
	if h.redirect != nil {
		if h.n == h.failAt {
			h.redirect(cmd, args)
		}
		h.cmds = append(h.cmds, cmd)
		return nil
	}
	if h.failAt > 0 && h.n >= h.failAt {
		if h.n == h.failAt {
			h.hit = fmt.Sprint(cmd, " ", args[:min(len(args), 3)])
			if cmd == "EVALSHA" && len(args) > 2 && args[2] == keys.Changes(DefaultNamespace) {
				h.wakeLost = true
			}
		}
		return fmt.Errorf("crash before command %d (%s): %w", h.n, cmd, portable.ErrInjected)
	}
	h.cmds = append(h.cmds, cmd)
	return nil
}

func (h *crashHook) count() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, append([]string(nil), h.cmds...)
}

// crashOutcome is what the fresh start must do with the message.
type crashOutcome int

const (
	outDelivered crashOutcome = iota // delivered exactly once by the fresh consumer, then acked and gone
	outGone                          // never delivered, not found
	outDead                          // never delivered, kept in the dead set
)

func (o crashOutcome) String() string {
	return [...]string{"delivered", "gone", "dead"}[o]
}

// crashCase is one operation crashed before its k-th command.
type crashCase struct {
	op      *crashOp
	k, n    int // the command the crash hits (n+1: no crash); the operation's command count
	tg      target
	topic   string
	p       int
	id      string
	witness string // same partition, due no earlier than id: delivered => the consumer polled past id
	sibling string // segment ops: the other message of id's segment

	c      *Client // a normal client: setup, inspection, the fresh start
	token  int64
	rec0   *store.Record // the record as claimed (in-flight setups)
	due    int64         // unix ms: the message's due time after setup
	newDue int64         // reschedule: the new due time

	err    error        // returned by the crashed operation
	expect crashOutcome // decided by op.after from the state the crash left
	minAt  time.Time    // no delivery before this
	note   string

	rec  *recorder
	cons *Consumer
}

// tp is the partition of the crashed operation's message.
func (cs *crashCase) tp() store.TopicPartition {
	return store.TopicPartition{Topic: cs.topic, P: cs.p}
}

type crashOp struct {
	name    string
	segment bool // the message is one of two held by a segment (cs.sibling the other)
	// unique is the uniqueness window the message is sent with: once
	// delivered, it ends as a Done (Get: done) rather than not found.
	unique time.Duration
	// setup brings the message to the state the operation starts from,
	// with cs.c (no faults).
	setup func(t *testing.T, cs *crashCase)
	// run is the operation under test, through the faulty store fs (or the
	// faulty client fc, which uses the same hook).
	run func(ctx context.Context, cs *crashCase, fs *store.Store, fc *Client) error
	// after inspects the state the crash left, with cs.c, and sets
	// cs.expect and cs.minAt (re-running the operation where I2 is tested).
	after func(t *testing.T, cs *crashCase)
}

const (
	crashPartitions = 2
	crashMsgBody    = "payload"
)

func (cs *crashCase) ctx() context.Context { return context.Background() }

// enqueue puts id (delay d) and the witness (due 200ms after it) on the topic.
func (cs *crashCase) enqueue(t *testing.T, d time.Duration, maxAttempts int, withMsg bool) {
	t.Helper()
	ctx := cs.ctx()
	witnessAt := time.Now().Add(d + 200*time.Millisecond)
	if withMsg {
		if _, err := cs.c.Send(ctx, Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), Delay: d, MaxAttempts: maxAttempts, UniqueFor: cs.op.unique}); err != nil {
			t.Fatalf("%s: enqueue: %v", cs.name(), err)
		}
		in, err := cs.c.Get(ctx, cs.topic, cs.id)
		if err != nil {
			t.Fatalf("%s: get after enqueue: %v", cs.name(), err)
		}
		cs.due = in.Due.UnixMilli()
		witnessAt = in.Due.Add(200 * time.Millisecond)
	}
	if _, err := cs.c.Send(ctx, Message{Topic: cs.topic, ID: cs.witness, Body: []byte("witness"), At: witnessAt}); err != nil {
		t.Fatalf("%s: enqueue witness: %v", cs.name(), err)
	}
}

// fence makes cs.token the partition's newest token, as a consumer that
// just acquired the lease does.
func (cs *crashCase) fence(t *testing.T) {
	t.Helper()
	cs.token = takeFence(t, cs.c.store, cs.topic, cs.p)
}

// claimAndBegin does what poller.poll does with a due message: claim it,
// put it in flight with a short visibility deadline, read its record and
// start its delivery; it returns the record as claimed.
func claimAndBegin(ctx context.Context, s *store.Store, cs *crashCase) (*store.Record, error) {
	deadline := time.Now().Add(300 * time.Millisecond).UnixMilli()
	now := time.Now()
	cl, recs, err := s.ClaimBegin(ctx, cs.tp(), store.Claim{Token: cs.token, MaxDueMS: now.Add(100 * time.Millisecond).UnixMilli(),
		StartByMS: now.Add(100 * time.Millisecond).UnixMilli(), Limit: 1, Deadline: func(int64) int64 { return deadline }})
	if err != nil {
		return nil, err
	}
	if len(cl) != 1 || cl[0].ID != cs.id {
		return nil, fmt.Errorf("claimed %+v, want just %q", cl, cs.id)
	}
	if recs[0] == nil {
		return nil, fmt.Errorf("begin: no record for %q", cs.id)
	}
	if !cl[0].Started {
		// Taken out of a segment: the loop starts it when it hands it to
		// a handler.
		got, err := s.StartMany(ctx, cs.tp(), cs.token, []string{cs.id}, recs[:1])
		if err != nil {
			return nil, err
		}
		if got[0] != store.StartOK {
			return nil, fmt.Errorf("start %q: %d, want StartOK", cs.id, got[0])
		}
	}
	return recs[0], nil
}

// inFlight leaves the message claimed by a consumer that will never finish it.
func (cs *crashCase) inFlight(t *testing.T, maxAttempts int) {
	t.Helper()
	cs.enqueue(t, 0, maxAttempts, true)
	cs.fence(t)
	rec, err := claimAndBegin(cs.ctx(), cs.c.store, cs)
	if err != nil {
		t.Fatalf("%s: claim: %v", cs.name(), err)
	}
	cs.rec0 = rec
}

// finished leaves the message delivered and acked with a uniqueness
// window of d: a Done (its window over at once for a short d).
func (cs *crashCase) finished(t *testing.T, d time.Duration) {
	t.Helper()
	cs.inFlight(t, 0)
	if _, err := cs.c.store.Ack(cs.ctx(), cs.tp(), []store.Acked{{ID: cs.id, Header: cs.rec0.Header(), KeepFor: d.Milliseconds(), Token: cs.token}}, time.Now().UnixMilli()); err != nil {
		t.Fatalf("%s: ack: %v", cs.name(), err)
	}
	if d < time.Second { // a window that ends at once: wait for its end
		waitFor(t, time.Second, "the window to end", func() bool { return cs.found(t) == nil })
	}
}

// claimedAhead leaves the message claimed ahead by a consumer that will
// never start it: in flight, its delivery not started, due in d.
func (cs *crashCase) claimedAhead(t *testing.T, d time.Duration) {
	t.Helper()
	cs.enqueue(t, d, 0, true)
	cs.fence(t)
	deadline := time.Now().Add(d + 300*time.Millisecond).UnixMilli()
	cl, recs, err := cs.c.store.ClaimBegin(cs.ctx(), cs.tp(), store.Claim{Token: cs.token,
		MaxDueMS: time.UnixMilli(cs.due).Add(time.Millisecond).UnixMilli(), Limit: 1, Deadline: func(int64) int64 { return deadline }})
	if err != nil || len(cl) != 1 || cl[0].ID != cs.id || recs[0] == nil || cl[0].Started {
		t.Fatalf("%s: claim ahead: %+v %v", cs.name(), cl, err)
	}
	cs.rec0 = recs[0]
}

// found reads the message with the normal client: nil when not found.
func (cs *crashCase) found(t *testing.T) *Info {
	t.Helper()
	in, err := cs.c.Get(cs.ctx(), cs.topic, cs.id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("%s: get after crash: %v", cs.name(), err)
	}
	return in
}

func (cs *crashCase) name() string { return fmt.Sprintf("%s/k=%d", cs.op.name, cs.k) }

func newRecord(due time.Time, maxAttempts int) *store.Record {
	now := time.Now().UnixMilli()
	return &store.Record{Due: clock.CeilMS(due).UnixMilli(), Created: now, Updated: now, MaxAttempts: maxAttempts, Body: []byte(crashMsgBody)}
}

// storeDyingBefore opens a store whose connections refuse every cmd
// command, as a process killed just before sending its first one: what
// was sent before it reached Redis, nothing after.
func storeDyingBefore(t *testing.T, addr, cmd string) *store.Store {
	t.Helper()
	fs, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}, Hook: func(c string, _ []any) error {
		if c == cmd {
			return fmt.Errorf("crash before %s: %w", cmd, portable.ErrInjected)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func crashConsumerOptions(topic string) ConsumerOptions {
	return ConsumerOptions{
		Topic: topic, Concurrency: 2, Prefetch: 2,
		// A lease long enough not to be lost on a loaded machine: a lost
		// lease is a fault that allows a duplicate (I5), not what is tested.
		PollInterval: 50 * time.Millisecond, Lease: 5 * time.Second, Timeout: 200 * time.Millisecond, ChangePoll: 500 * time.Millisecond,
		ReconcileInterval: 50 * time.Millisecond, Backoff: []time.Duration{100 * time.Millisecond},
		ShutdownTimeout: 5 * time.Second,
	}
}

// TestCrashSafety crashes every operation before each of its commands in
// turn, then starts afresh and checks I1 (the message is delivered, or
// gone because it was acked or deleted, or dead) and I2 (repeating the
// operation after the crash gives the same result). All cases of a target
// run their fresh consumers at once; checks then run one by one.
func TestCrashSafety(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	forEachTarget(t, func(t *testing.T, addr string) { crashMatrix(t, target{addr: addr}, crashKill) })
}

// TestCrashSafetyCluster runs the matrix on a Redis Cluster of 3
// masters: a connection lost before each command of each operation, as
// TestCrashSafety; then, before each command, the slot of the command's
// key moves to another master (the command meets MOVED), or begins to
// (ASK: the key, when it exists, already on the target). A redirected
// operation must succeed, and leave what it leaves without one.
func TestCrashSafetyCluster(t *testing.T) {
	t.Parallel()
	for _, f := range []crashFault{crashKill, crashMoved, crashAsk} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel() // a cluster each: the moves of one never meet another's
			cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
			crashMatrix(t, target{addr: cl.Seeds(), cluster: cl}, f)
		})
	}
}

// crashFault is what happens before the k-th command of a case.
type crashFault string

const (
	crashKill  crashFault = "kill"  // the connection dies
	crashMoved crashFault = "moved" // the key's slot moves (cluster)
	crashAsk   crashFault = "ask"   // the key's slot begins to move, the key already moved (cluster)
)

// crashMatrix runs every operation with fault before each of its
// commands, on tg. The cases of an operation run their fresh consumers
// at once; their checks then run one by one, and their consumers stop
// before the next operation's cases begin.
func crashMatrix(t *testing.T, tg target, fault crashFault) {
	ctx := context.Background()
	port := portOf(t, strings.Split(tg.addr, ",")[0])
	for _, op := range append(crashOps[:len(crashOps):len(crashOps)], segmentCrashOps...) {
		var cases []*crashCase
		var stops []func()
		{
			// The run without a fault first: it counts the commands.
			n := 0
			for k := 0; k == 0 || k <= n; k++ {
				cs := &crashCase{op: op, k: k, tg: tg}
				cs.topic = fmt.Sprintf("crash-%s-%s-%s-%d", port, fault, op.name, k)
				cs.id = "msg"
				cs.p = partition.For(cs.id, crashPartitions)
				cs.witness = samePartition("witness", cs.p, crashPartitions)
				if op.segment {
					cs.id, cs.sibling = segmentPair(t, cs.p, crashPartitions)
				}
				cs.c = newClient(t, tg.addr, tg.options(Options{Partitions: crashPartitions}))

				h := &crashHook{failAt: k}
				var finish func()
				if fault != crashKill && k > 0 {
					h.redirect, finish = tg.redirector(t, fault == crashAsk)
				}
				fs, err := store.Open(store.Options{Conn: tg.conn(), Hook: h.hook})
				if err != nil {
					t.Fatal(err)
				}
				fc := newClient(t, tg.addr, tg.options(Options{Partitions: crashPartitions, hook: h.hook}))
				op.setup(t, cs)
				cs.err = op.run(ctx, cs, fs, fc)
				fs.Close()
				fc.Close()
				if finish != nil {
					finish()
					if cs.err != nil {
						t.Errorf("%s: failed over a redirection (%s): %v", cs.name(), fault, cs.err)
					}
				}
				if k == 0 {
					var cmds []string
					n, cmds = h.count()
					cs.n, cs.k = n, n+1
					t.Logf("%s: N=%d commands: %s", op.name, n, strings.Join(cmds, " "))
					if cs.err != nil {
						t.Fatalf("%s without a fault: %v", op.name, cs.err)
					}
				} else {
					cs.n = n
					if fault == crashKill && !errors.Is(cs.err, portable.ErrInjected) && !(h.wakeLost && cs.err == nil) {
						t.Errorf("%s: crashed operation returned %v, want the injected fault (it hit %s)", cs.name(), cs.err, h.hit)
					}
				}
				op.after(t, cs)

				// The fresh start: a new client and consumer.
				fresh := newClient(t, tg.addr, tg.options(Options{Partitions: crashPartitions}))
				cs.c = fresh
				cs.rec = newRecorder()
				var stop func()
				cs.cons, stop = startConsumer(t, fresh, crashConsumerOptions(cs.topic), cs.rec.handle)
				cases = append(cases, cs)
				stops = append(stops, stop)
			}
		}
		for i, cs := range cases {
			t.Run(fmt.Sprintf("%s/k=%d", cs.op.name, cs.k), func(t *testing.T) { cs.check(t) })
			stops[i]()
		}
	}
}

// check waits until the fresh consumer settled the partition and checks
// what became of the message.
func (cs *crashCase) check(t *testing.T) {
	ctx := context.Background()
	wantAcks := int64(1) // the witness
	if cs.expect == outDelivered {
		wantAcks++
	}
	wantDead := int64(0)
	if cs.expect == outDead {
		wantDead = 1
	}
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s; deliveries of %s: %d", last, cs.id, cs.rec.count(cs.id))
		}
	}()
	waitFor(t, 20*time.Second, fmt.Sprintf("%s: message %s, witness delivered, indexes settled", cs.name(), cs.expect), func() bool {
		if cs.rec.count(cs.witness) == 0 {
			last = "witness not delivered"
			return false
		}
		if cs.expect == outDelivered && cs.rec.count(cs.id) == 0 {
			last = "message not delivered"
			return false
		}
		if a := cs.cons.Stats().Acked; a < wantAcks {
			last = fmt.Sprintf("%d acks", a)
			return false
		}
		st, err := cs.c.Inspector().Stats(ctx, cs.topic)
		if err != nil || st.Scheduled != 0 || st.InFlight != 0 || st.Dead != wantDead {
			last = fmt.Sprintf("stats %+v, %v", st, err)
			return false
		}
		in, err := cs.c.Get(ctx, cs.topic, cs.id)
		if cs.expect == outDead {
			last = fmt.Sprintf("get: %+v, %v", in, err)
			return err == nil && in.State == StateDead
		}
		if cs.op.unique > 0 {
			last = fmt.Sprintf("get: %+v, %v", in, err)
			return err == nil && in.State == StateDone
		}
		last = fmt.Sprintf("get: %+v, %v", in, err)
		return errors.Is(err, ErrNotFound)
	})

	got := cs.rec.count(cs.id)
	t.Logf("expected %s (%s): delivered %d times; crash: %v", cs.expect, cs.note, got, cs.err)
	leaseLost := cs.cons.Stats().LeasesLost > 0 // I5: a duplicate is then allowed
	switch cs.expect {
	case outDelivered:
		if got == 0 || got > 1 && !leaseLost {
			t.Errorf("delivered %d times after the crash, want exactly once", got)
		}
	default:
		if got != 0 {
			t.Errorf("delivered %d times, want never (%s)", got, cs.expect)
		}
	}
	if cs.expect == outDead {
		dead, err := cs.c.Inspector().ListDead(ctx, cs.topic, 10)
		if err != nil || len(dead) != 1 || dead[0].ID != cs.id || dead[0].Attempts < 1 {
			t.Errorf("dead = %+v, %v; want %q with its attempts", dead, err, cs.id)
		}
	}
	cs.rec.mu.Lock()
	defer cs.rec.mu.Unlock()
	for id, ds := range cs.rec.seen {
		for i, d := range ds {
			at := cs.rec.at[id][i]
			if at.Before(d.Due) {
				t.Errorf("I4: %s delivered at %v, before its due time %v", id, at.Format(time.StampMilli), d.Due.Format(time.StampMilli))
			}
			if id == cs.id && at.Before(cs.minAt) {
				t.Errorf("%s delivered at %v, before %v (%s)", id, at.Format(time.StampMilli), cs.minAt.Format(time.StampMilli), cs.note)
			}
			if string(d.Body) != crashMsgBody && id == cs.id {
				t.Errorf("%s delivered with body %q", id, d.Body)
			}
		}
	}
	if n := len(cs.rec.seen[cs.witness]); n == 0 || n > 1 && !leaseLost {
		t.Errorf("witness delivered %d times, want once", len(cs.rec.seen[cs.witness]))
	}
}

// TestReconcilerRepairBound leaves R records in one partition with no
// index entry (an enqueue that died after its HSETNX), then measures how
// long a consumer takes to deliver them all: the reconciler reads about B
// records per pass, one pass per ReconcileInterval I, so the bound is
// ceil(R/B) passes of at most 1.2 I (jitter) plus the slack of a poll.
func TestReconcilerRepairBound(t *testing.T) {
	const (
		R = 300
		B = 64
		I = 100 * time.Millisecond
	)
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		topic := "reconcile-bound-" + portOf(t, addr)
		c := newClient(t, addr, Options{Partitions: crashPartitions})
		if _, err := c.ensureTopic(ctx, topic); err != nil { // creates the topic's meta
			t.Fatal(err)
		}
		const p = 0
		var news []store.NewMessage
		due := time.Now()
		for i := 0; len(news) < R; i++ {
			id := fmt.Sprintf("orphan-%d", i)
			if partition.For(id, crashPartitions) == p {
				r := newRecord(due, 0)
				// Bodies past hash-max-listpack-value make the records a
				// real hash table, where HSCAN honours COUNT (a listpack is
				// returned whole, whatever COUNT says).
				r.Body = []byte(strings.Repeat("b", 256))
				news = append(news, store.NewMessage{ID: id, Record: r})
			}
		}
		// Die right after the HSETNX pipeline: R records, no index.
		fs := storeDyingBefore(t, addr, "ZADD")
		_, err := fs.Add(ctx, store.TopicPartition{Topic: topic, P: p}, news)
		fs.Close()
		if !errors.Is(err, portable.ErrInjected) {
			t.Fatalf("add: %v, want the injected fault", err)
		}
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil || st.Scheduled != 0 || st.InFlight != 0 {
			t.Fatalf("stats after the crash: %+v, %v; want nothing indexed", st, err)
		}
		if _, err := c.Get(ctx, topic, news[R-1].ID); err != nil {
			t.Fatalf("record of %s: %v", news[R-1].ID, err)
		}

		rec := newRecorder()
		o := crashConsumerOptions(topic)
		o.ReconcileInterval, o.ReconcileBatch = I, B
		o.Concurrency, o.Prefetch = 16, 16
		start := time.Now()
		k := runConsumer(t, c, o, rec.handle)
		passes := int(math.Ceil(float64(R) / float64(B)))
		bound := time.Duration(passes)*I*12/10 + 2*time.Second
		waitFor(t, bound+10*time.Second, fmt.Sprintf("%d orphaned records delivered", R), func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return len(rec.seen) == R
		})
		took := time.Since(start)
		t.Logf("reconciler: %d orphaned records (batch %d, interval %v) all delivered in %v; bound %v (%d passes); repaired %d",
			R, B, I, took.Round(time.Millisecond), bound, passes, k.Stats().Repaired)
		if took > bound {
			t.Errorf("repair took %v, more than the bound %v", took, bound)
		}
		waitFor(t, 10*time.Second, "all acked", func() bool { return k.Stats().Acked >= R })
		for id, ds := range rec.seen {
			if len(ds) != 1 {
				t.Errorf("%s delivered %d times", id, len(ds))
			}
		}
	})
}
