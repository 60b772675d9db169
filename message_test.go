package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// An enqueue of an id the topic holds is ErrDuplicate, and whatever state
// the existing message is in (scheduled, in flight, dead), it must leave
// it as it was: no second index entry, no changed score, no changed
// record. Single calls and a batch.
func TestEnqueueDuplicateStates(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		const n = 2
		c := newClient(t, addr, Options{Partitions: n})
		topic := "dup-states"
		due := time.Now().Add(50 * time.Millisecond)
		// One id per state, all in partition 0 so one claim takes them.
		sched, flight, dead := samePartition("s", 0, n), samePartition("f", 0, n), samePartition("d", 0, n)
		recs := beginAll(t, c, topic,
			Message{Topic: topic, ID: flight, Body: []byte("first"), At: due},
			Message{Topic: topic, ID: dead, Body: []byte("first"), At: due})
		r := *recs[1]
		r.Attempts, r.LastError = 1, "boom"
		makeDead(t, c, topic, dead, &r, time.Now())
		if _, err := c.Send(ctx, Message{Topic: topic, ID: sched, Body: []byte("first"), At: due.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		before := map[string]*Info{}
		for _, id := range []string{sched, flight, dead} {
			var err error
			if before[id], err = c.Get(ctx, topic, id); err != nil {
				t.Fatal(err)
			}
		}
		st0, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}

		// Single calls and one batch.
		again := due.Add(2 * time.Hour)
		for _, id := range []string{sched, flight, dead} {
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id, Body: []byte("again"), At: again}); !errors.Is(err, ErrDuplicate) {
				t.Errorf("enqueue %s again: %v, want ErrDuplicate", id, err)
			}
		}
		// In the batch, the scheduled one again at its own due: its entry
		// then looks like one the batch could have added.
		res, err := c.SendBatch(ctx, []Message{
			{Topic: topic, ID: sched, Body: []byte("again"), At: due.Add(time.Hour)},
			{Topic: topic, ID: flight, Body: []byte("again"), At: again},
			{Topic: topic, ID: dead, Body: []byte("again"), At: again},
			{Topic: topic, ID: "new", Body: []byte("new"), At: again},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if want := i < 3; errors.Is(r.Err, ErrDuplicate) != want {
				t.Errorf("batch: %s: %v, duplicate want %v", r.ID, r.Err, want)
			}
		}

		for _, id := range []string{sched, flight, dead} {
			in, err := c.Get(ctx, topic, id)
			if err != nil {
				t.Fatal(err)
			}
			b := before[id]
			if in.State != b.State || !in.Due.Equal(b.Due) || !in.Deadline.Equal(b.Deadline) || !in.DiedAt.Equal(b.DiedAt) || string(in.Body) != "first" {
				t.Errorf("%s after duplicates: %s due %v deadline %v died %v body %q; want %s due %v deadline %v died %v body \"first\"",
					id, in.State, in.Due, in.Deadline, in.DiedAt, in.Body, b.State, b.Due, b.Deadline, b.DiedAt)
			}
		}
		st, err := c.Inspector().Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.Scheduled != st0.Scheduled+1 || st.InFlight != st0.InFlight || st.Dead != st0.Dead {
			t.Errorf("stats %+v after the duplicates and one new message, want scheduled %d, in flight %d, dead %d",
				st, st0.Scheduled+1, st0.InFlight, st0.Dead)
		}
	})
}

// An index entry left behind by a crashed delete (its record gone) holds
// the old due time. A message enqueued again with that id must be indexed
// at its own due time, not the stale one.
func TestEnqueueOverStaleEntry(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic, id := "stale-entry", "m"
		p := partition.For(id, 2)
		if _, err := c.Send(ctx, Message{Topic: topic, ID: id, At: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// A delete that dies after its HDEL: the index entry stays.
		fs := storeDyingBefore(t, addr, "ZREM")
		err := fs.Delete(ctx, store.TopicPartition{Topic: topic, P: p}, id)
		fs.Close()
		if !errors.Is(err, portable.ErrInjected) {
			t.Fatalf("delete: %v, want the injected fault", err)
		}
		if st, err := c.Inspector().Stats(ctx, topic); err != nil || st.Scheduled != 1 {
			t.Fatalf("stats after the crashed delete: %+v, %v; want the stale entry", st, err)
		}

		at := clock.CeilMS(time.Now().Add(2 * time.Hour))
		if _, err := c.Send(ctx, Message{Topic: topic, ID: id, At: at}); err != nil {
			t.Fatalf("enqueue over a stale entry: %v", err)
		}
		f, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: p}, id)
		if err != nil {
			t.Fatal(err)
		}
		if f.State != store.StateScheduled || f.Score != at.UnixMilli() || f.Record.Due != at.UnixMilli() {
			t.Errorf("after enqueue: state %v score %d record due %d; want scheduled at %d", f.State, f.Score, f.Record.Due, at.UnixMilli())
		}
	})
}

// A caller that gives up once an enqueue's first round trip is in does not
// cut the write short: the mending that follows (here, the new due of an id
// that had a stale entry) is written all the same.
func TestEnqueueAheadFinishesAfterCancel(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		c := newClient(t, addr, Options{Partitions: 2})
		topic, id := "ahead-cancel", "m"
		p := partition.For(id, 2)
		if _, err := c.Send(context.Background(), Message{Topic: topic, ID: "other", Delay: time.Hour}); err != nil {
			t.Fatal(err) // creates the topic
		}
		stale := addEntry(t, addr, topic, p, id, time.Now().Add(time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sent := 0
		fs, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}, Hook: func(string, []any) error {
			if sent++; sent == 3 { // the first command of the second round trip
				cancel()
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		due := clock.CeilMS(time.Now().Add(2 * time.Hour)).UnixMilli()
		errs, err := fs.AddMany(ctx, []store.Group{{Topic: topic, P: p, Ahead: true,
			Msgs: []store.NewMessage{{ID: id, Record: newRecord(time.UnixMilli(due), 0)}}}})
		if err != nil || errs[0][0] != nil {
			t.Fatalf("add: %v, %v", err, errs)
		}
		if sent != 3 {
			t.Fatalf("%d commands, want HSETNX, ZADD NX, then ZADD", sent)
		}
		f, err := c.store.Get(context.Background(), store.TopicPartition{Topic: topic, P: p}, id)
		if err != nil {
			t.Fatal(err)
		}
		if f.State != store.StateScheduled || f.Score != due {
			t.Errorf("after a cancel between round trips: %v at %d, want scheduled at %d (stale entry at %d)", f.State, f.Score, due, stale)
		}
	})
}

// An index entry that names a message its owner is running (an enqueue of
// its id cut short between its round trips) is claimed and dropped: the
// claim skips an id in flight, and the message runs once.
func TestClaimSkipsRunningMessage(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic, id := "claim-running", "m"
		p := partition.For(id, 2)
		started, release := make(chan struct{}), make(chan struct{})
		rec := newRecorder()
		rec.fail = func(d *Delivery) error {
			if d.ID == id && rec.count(id) == 1 {
				close(started)
				<-release
			}
			return nil
		}
		o := crashConsumerOptions(topic)
		o.Timeout = 30 * time.Second // the handler blocks; its deadline is not what is tested
		runConsumer(t, c, o, rec.handle)
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock) // before the consumer's shutdown, should the test stop early
		if _, err := c.Send(ctx, Message{Topic: topic, ID: id}); err != nil {
			t.Fatal(err)
		}
		<-started
		addEntry(t, addr, topic, p, id, time.Now())
		waitFor(t, 5*time.Second, "the second entry claimed", func() bool {
			st, err := c.Inspector().Stats(ctx, topic)
			return err == nil && st.Scheduled == 0 && st.InFlight == 1
		})
		unblock()
		waitFor(t, 5*time.Second, "the message acked", func() bool {
			_, err := c.Get(ctx, topic, id)
			return errors.Is(err, ErrNotFound)
		})
		if n := rec.count(id); n != 1 {
			t.Errorf("delivered %d times, want once", n)
		}
		if st, err := c.Inspector().Stats(ctx, topic); err != nil || st.Scheduled != 0 || st.InFlight != 0 {
			t.Errorf("stats after the ack: %+v, %v; want nothing left", st, err)
		}
	})
}

// Replace rewrites a scheduled message (due, body, max attempts,
// attempts reset), Reject refuses, and each reply says what it did.
func TestReplaceScheduled(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 4})
		topic := "replace"
		res, err := c.Send(ctx, Message{Topic: topic, ID: "r", Body: []byte("one"), Delay: time.Hour, OnDuplicate: Replace})
		if err != nil || res.Outcome != OutcomeCreated {
			t.Fatalf("first send: %+v, %v", res, err)
		}
		res, err = c.Send(ctx, Message{Topic: topic, ID: "r", Body: []byte("x"), Delay: time.Minute})
		if !errors.Is(err, ErrDuplicate) || res.Outcome != OutcomeRejected {
			t.Fatalf("reject: %+v, %v", res, err)
		}
		at := time.Now().Add(300 * time.Millisecond)
		res, err = c.Send(ctx, Message{Topic: topic, ID: "r", Body: []byte("two"), At: at, OnDuplicate: Replace, MaxAttempts: 3})
		if err != nil || res.Outcome != OutcomeReplaced || !res.Due.Equal(at.Truncate(time.Millisecond).Add(time.Millisecond)) && !res.Due.Equal(at.Truncate(time.Millisecond)) {
			t.Fatalf("replace: %+v, %v (at %v)", res, err, at)
		}
		in, err := c.Get(ctx, topic, "r")
		if err != nil || string(in.Body) != "two" || in.MaxAttempts != 3 || !in.Due.Equal(res.Due) {
			t.Fatalf("after replace: %+v, %v", in, err)
		}
		rec := newRecorder()
		runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
		waitFor(t, 10*time.Second, "replaced message delivered", func() bool { return rec.count("r") == 1 })
		rec.mu.Lock()
		d := rec.seen["r"][0]
		rec.mu.Unlock()
		if string(d.Body) != "two" || time.Now().Before(res.Due) {
			t.Errorf("delivered %q at due %v", d.Body, d.Due)
		}
	})
}

// Debounce pushes a message back with each event, never past MaxWait
// after the first event of its window, and delivers the latest body.
func TestDebounceWindow(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	topic := "debounce"
	rec := newRecorder()
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "warm"}); err != nil {
		t.Fatal(err)
	}
	runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
	waitFor(t, 10*time.Second, "warm delivered", func() bool { return rec.count("warm") == 1 })
	const delay, maxWait = 400 * time.Millisecond, 1200 * time.Millisecond
	first := time.Now()
	var last time.Time
	var lastDue time.Time
	// An event every 100 ms for 2 s: the window closes at first + 1.2 s.
	for i := 0; time.Since(first) < 2*time.Second; i++ {
		now := time.Now()
		res, err := c.Send(ctx, Message{Topic: topic, ID: "d", Body: fmt.Appendf(nil, "%d", i), Delay: delay, OnDuplicate: Debounce, MaxWait: maxWait})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && res.Outcome != OutcomeDebounced && res.Outcome != OutcomeCreated {
			t.Fatalf("event %d: %+v", i, res)
		}
		last, lastDue = now, res.Due
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "every window delivered", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		ds := rec.seen["d"]
		return len(ds) > 0 && ds[len(ds)-1].Due.Equal(lastDue)
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ds, ats := rec.seen["d"], rec.at["d"]
	t.Logf("%d events over %v, delay %v, max wait %v: %d deliveries", 20, last.Sub(first).Round(time.Millisecond), delay, maxWait, len(ds))
	if len(ds) < 2 || len(ds) > 3 {
		t.Errorf("%d deliveries of 2 s of events with a max wait of 1.2 s, want 2 or 3", len(ds))
	}
	if ats[0].Sub(first) < maxWait-50*time.Millisecond || ats[0].Sub(first) > maxWait+300*time.Millisecond {
		t.Errorf("first delivery %v after the first event, want about the max wait %v", ats[0].Sub(first), maxWait)
	}
	if got := ds[len(ds)-1].Body; len(got) == 0 || ats[len(ats)-1].Before(last.Add(delay)) && ats[len(ats)-1].Before(ds[len(ds)-1].Due) {
		t.Errorf("last delivery %q at %v", got, ats[len(ats)-1])
	}
}

// A message replaced while its delivery runs is not touched: the new one
// is delivered after the running one ends, never beside it; a replaced
// dead message lives again.
func TestReplaceInFlightAndDead(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	topic := "inflight"
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	var mu sync.Mutex
	var bodies []string
	running, most := 0, 0
	h := func(ctx context.Context, d *Delivery) error {
		mu.Lock()
		running++
		most = max(most, running)
		bodies = append(bodies, string(d.Body))
		mu.Unlock()
		if string(d.Body) == "one" {
			started <- struct{}{}
			<-release
		}
		if string(d.Body) == "die" {
			mu.Lock()
			running--
			mu.Unlock()
			return errors.New("boom")
		}
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}
	k := runConsumer(t, c, ConsumerOptions{Topic: topic, Concurrency: 4}, h)
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "x", Body: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	<-started
	res, err := c.Send(ctx, Message{Topic: topic, ID: "x", Body: []byte("two"), OnDuplicate: Replace})
	if err != nil || res.Outcome != OutcomeReplaced {
		t.Fatalf("replace in flight: %+v, %v", res, err)
	}
	time.Sleep(300 * time.Millisecond) // a poll would claim it again now, were it allowed
	close(release)
	waitFor(t, 10*time.Second, "the new event delivered after the running one", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) == 2
	})
	mu.Lock()
	if bodies[0] != "one" || bodies[1] != "two" || most != 1 {
		t.Errorf("deliveries %q, at most %d at once; want one then two, never both", bodies, most)
	}
	mu.Unlock()
	if k.Stats().Superseded != 1 {
		t.Errorf("superseded %d, want 1", k.Stats().Superseded)
	}

	// Dead, then replaced: delivered again with the new body.
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "y", Body: []byte("die"), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "y dead", func() bool {
		in, err := c.Get(ctx, topic, "y")
		return err == nil && in.State == StateDead
	})
	if res, err := c.Send(ctx, Message{Topic: topic, ID: "y", Body: []byte("alive"), OnDuplicate: Replace}); err != nil || res.Outcome != OutcomeReplaced {
		t.Fatalf("replace dead: %+v, %v", res, err)
	}
	waitFor(t, 10*time.Second, "the revived message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return bodies[len(bodies)-1] == "alive"
	})
	dead, err := c.Inspector().ListDead(ctx, topic, 10)
	if err != nil || len(dead) != 0 {
		t.Errorf("dead after the revival: %v, %v", dead, err)
	}
}

// Many producers sending the same ids at once: one message per id, each
// reply a decision, the last body of each id delivered.
func TestPutConcurrentProducers(t *testing.T) {
	ctx := context.Background()
	addr := testAddr(t)
	c := newClient(t, addr, Options{Partitions: 4})
	topic := "racing"
	const producers, sends, ids = 6, 150, 10
	var wg sync.WaitGroup
	created := make([]int, ids)
	var mu sync.Mutex
	for pi := range producers {
		pc := newClient(t, addr, Options{Partitions: 4})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range sends {
				id := i % ids
				res, err := pc.Send(ctx, Message{Topic: topic, ID: fmt.Sprint("id", id), Body: fmt.Appendf(nil, "%d-%d", pi, i),
					Delay: time.Hour, OnDuplicate: Debounce, MaxWait: 2 * time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Outcome == OutcomeCreated {
					mu.Lock()
					created[id]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for id, n := range created {
		if n != 1 {
			t.Errorf("id%d created %d times", id, n)
		}
	}
	ts, err := c.Inspector().Stats(ctx, topic)
	if err != nil || ts.Scheduled != ids {
		t.Fatalf("scheduled %v, %v; want %d", ts, err, ids)
	}
}

// During a change of the partition count, a Replace finds the message in
// its old partition, where it still lives, and replaces it there: one
// message per id, delivered once with the new body when the change ends.
func TestReplaceDuringChange(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	topic := "replace-change"
	const N = 40
	for i := range N {
		if _, err := c.Send(ctx, Message{Topic: topic, ID: fmt.Sprint("c", i), Body: []byte("old"), Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// No consumer runs: nothing moves, every message stays where it was.
	if _, err := c.Admin().SetPartitions(ctx, topic, 8, PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range N {
		id := fmt.Sprint("c", i)
		res, err := c.Send(ctx, Message{Topic: topic, ID: id, Body: []byte("new"), OnDuplicate: Replace})
		if err != nil || res.Outcome != OutcomeReplaced {
			t.Fatalf("%s: %+v, %v; want replaced", id, res, err)
		}
		if partition.For(id, 8) != partition.For(id, 2) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no id changes partition: the test shows nothing")
	}
	rec := newRecorder()
	runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
	waitFor(t, 20*time.Second, "every message delivered", func() bool { return rec.total() >= N })
	time.Sleep(300 * time.Millisecond) // a second delivery would show by now
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range N {
		ds := rec.seen[fmt.Sprint("c", i)]
		if len(ds) != 1 || string(ds[0].Body) != "new" {
			t.Errorf("c%d: %d deliveries; want one, of \"new\"", i, len(ds))
		}
	}
}

// A delivery that fails after its message was replaced is not retried:
// the newer event replaced it, and is delivered once, at its first
// attempt.
func TestReplacedWhileFailing(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	topic := "replace-fail"
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []string
	var attempts []int
	h := func(ctx context.Context, d *Delivery) error {
		mu.Lock()
		got, attempts = append(got, string(d.Body)), append(attempts, d.Attempt)
		mu.Unlock()
		if string(d.Body) == "old" {
			close(started)
			<-release
			return errors.New("downstream failed")
		}
		return nil
	}
	runConsumer(t, c, ConsumerOptions{Topic: topic, Backoff: []time.Duration{100 * time.Millisecond}}, h)
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "f", Body: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	<-started
	if res, err := c.Send(ctx, Message{Topic: topic, ID: "f", Body: []byte("new"), OnDuplicate: Replace}); err != nil || res.Outcome != OutcomeReplaced {
		t.Fatalf("replace: %+v, %v", res, err)
	}
	close(release)
	waitFor(t, 10*time.Second, "the newer event delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	time.Sleep(500 * time.Millisecond) // a retry of the old one would come after its 100 ms backoff
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[1] != "new" || attempts[1] != 1 {
		t.Errorf("deliveries %q, attempts %v; want old then new, new at attempt 1, no retry", got, attempts)
	}
	if _, err := c.Get(ctx, topic, "f"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the newer event's ack: %v, want gone", err)
	}
}

// SendAsync's callback says what the write did, as Send does.
func TestSendAsyncOutcome(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	got := make(chan SendResult, 1)
	for _, tc := range []struct {
		policy OnDuplicate
		want   Outcome
	}{{Debounce, OutcomeCreated}, {Debounce, OutcomeDebounced}, {Reject, OutcomeRejected}} {
		m := Message{Topic: "async", ID: "a", Delay: time.Hour, OnDuplicate: tc.policy}
		if err := c.SendAsync(ctx, m, func(r SendResult) { got <- r }); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.Outcome != tc.want || r.Due.IsZero() || (tc.want == OutcomeRejected) != errors.Is(r.Err, ErrDuplicate) {
			t.Errorf("%s: %+v, want %s", tc.policy, r, tc.want)
		}
	}
}
