package delayq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/lease"
)

func TestRetryAndDead(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic := "retry"
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "flaky", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "doomed", Body: []byte("y"), MaxAttempts: 2}); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		rec.fail = func(d *Delivery) error {
			if d.ID == "doomed" || d.Attempt < 3 {
				return fmt.Errorf("fail attempt %d", d.Attempt)
			}
			return nil
		}
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: time.Second,
			Backoff: []time.Duration{200 * time.Millisecond}}, rec.handle)
		waitFor(t, 10*time.Second, "flaky acked and doomed dead", func() bool {
			s := k.Stats()
			return s.Acked >= 1 && s.Dead >= 1
		})
		if n := rec.count("flaky"); n != 3 {
			t.Errorf("flaky delivered %d times, want 3", n)
		}
		rec.mu.Lock()
		gap := rec.at["flaky"][1].Sub(rec.at["flaky"][0])
		rec.mu.Unlock()
		if gap < 200*time.Millisecond {
			t.Errorf("retry after %v, before the 200ms backoff", gap)
		}
		dead, err := c.Inspector().ListDead(ctx, topic, 10)
		if err != nil || len(dead) != 1 || dead[0].ID != "doomed" || dead[0].Attempts != 2 || dead[0].LastError != "fail attempt 2" {
			t.Fatalf("dead = %+v, %v", dead, err)
		}
		n, err := c.Admin().RequeueDead(ctx, topic)
		if err != nil || n != 1 {
			t.Fatalf("requeue dead = %d, %v", n, err)
		}
		waitFor(t, 10*time.Second, "doomed dead again", func() bool { return k.Stats().Dead >= 2 })
		n, err = c.Admin().PurgeDead(ctx, topic)
		if err != nil || n != 1 {
			t.Fatalf("purge dead = %d, %v", n, err)
		}
		if _, err := c.Get(ctx, topic, "doomed"); !errors.Is(err, ErrNotFound) {
			t.Errorf("purged message found: %v", err)
		}
	})
}

// The consumer options of the takeover tests: the defaults users get
// (lease 10s, handler timeout 30s, so a visibility deadline 33 s after
// due), with short polls.
func takeoverOptions(topic, id string) ConsumerOptions {
	return ConsumerOptions{Topic: topic, ID: id, PollInterval: 100 * time.Millisecond}
}

// lostOwner enqueues n messages due at once and n due in 1 s to
// partition 0 of a one-partition topic, and claims them all under a new
// token, with the visibility deadlines a consumer with the default
// handler timeout gives them, as an owner that then dies does. When
// pastDeadline is set the deadlines have passed already. It returns the
// ids with their due times (unix ms) and the token.
func lostOwner(t *testing.T, c *Client, topic string, n int, pastDeadline bool) (map[string]int64, int64) {
	t.Helper()
	ctx := context.Background()
	var msgs []Message
	for i := range n {
		msgs = append(msgs,
			Message{Topic: topic, ID: fmt.Sprintf("due-%d", i), Body: []byte("due")},
			Message{Topic: topic, ID: fmt.Sprintf("ahead-%d", i), Body: []byte("ahead"), Delay: time.Second})
	}
	mustBatch(t, c, msgs)
	tok := takeFence(t, c.store, topic, 0)
	cl, err := c.store.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: 0}, tok, time.Now().Add(1500*time.Millisecond).UnixMilli(), 4*n)
	if err != nil || len(cl) != 2*n {
		t.Fatalf("claim: %d claimed, %v; want %d", len(cl), err, 2*n)
	}
	due := map[string]int64{}
	var ids []string
	var deadlines []int64
	for _, m := range cl {
		due[m.ID] = m.Due
		ids = append(ids, m.ID)
		dl := m.Due + (DefaultTimeout + visibilityMargin(DefaultTimeout)).Milliseconds()
		if pastDeadline {
			dl = time.Now().Add(-time.Millisecond).UnixMilli()
		}
		deadlines = append(deadlines, dl)
	}
	recs, err := c.store.Begin(ctx, store.TopicPartition{Topic: topic, P: 0}, ids, deadlines)
	if err != nil {
		t.Fatal(err)
	}
	// The deliveries started there: those due, and with pastDeadline
	// (handlers that overran) every one.
	var started []string
	var startedRecs []*store.Record
	for i, id := range ids {
		if pastDeadline || strings.HasPrefix(id, "due-") {
			started, startedRecs = append(started, id), append(startedRecs, recs[i])
		}
	}
	if got, err := c.store.StartMany(ctx, store.TopicPartition{Topic: topic, P: 0}, tok, started, startedRecs); err != nil || slices.ContainsFunc(got, func(v int64) bool { return v != store.StartOK }) {
		t.Fatalf("start: %v %v", got, err)
	}
	return due, tok
}

// handedOverBy makes giver a live member of topic and marks partition 0
// as handed over by it under tok, as a consumer whose share fell to none
// does with deliveries still running. Its id must rank after the
// taker's (see lease.Share) for the taker's share to be the partition.
func handedOverBy(t *testing.T, c *Client, topic string, tok int64, giver string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if _, _, err := c.store.Heartbeat(ctx, lease.Beat{Topic: topic, ID: giver, NowMS: now.UnixMilli(), ExpiresMS: now.Add(time.Minute).UnixMilli(), GCMS: time.Hour.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	if err := c.store.HandOver(ctx, store.TopicPartition{Topic: topic, P: 0}, tok, []string{giver}); err != nil {
		t.Fatal(err)
	}
}

// checkRedelivered checks that each id of due was delivered exactly once,
// as attempt, with its own due time and not before it.
func checkRedelivered(t *testing.T, rec *recorder, due map[string]int64, attempt int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id, d := range due {
		ds := rec.seen[id]
		if len(ds) != 1 {
			t.Errorf("%s delivered %d times, want once", id, len(ds))
			continue
		}
		if ds[0].Attempt != attempt {
			t.Errorf("%s delivered as attempt %d, want %d", id, ds[0].Attempt, attempt)
		}
		if got := ds[0].Due.UnixMilli(); got != d {
			t.Errorf("%s delivered with due %d, want its own due %d", id, got, d)
		}
		if at := rec.at[id][0]; at.Before(time.UnixMilli(d)) {
			t.Errorf("%s delivered at %v, before its due time", id, at)
		}
	}
}

// A new owner returns the messages a lost owner claimed (due, or claimed
// ahead) at once, keeping their due time and attempt count, however long
// their visibility deadline.
func TestTakeoverReturnsLostOwnersMessages(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "takeover"
		due, _ := lostOwner(t, c, topic, 10, false)
		rec := newRecorder()
		k := runConsumer(t, c, takeoverOptions(topic, "taker"), rec.handle)
		// Well within the 33 s visibility deadline.
		waitFor(t, 10*time.Second, "every message of the lost owner delivered", func() bool {
			return rec.total() >= len(due) && k.Stats().Acked >= int64(len(due))
		})
		checkRedelivered(t, rec, due, 1)
		if got := k.Stats().Recovered; got != int64(len(due)) {
			t.Errorf("Recovered = %d, want %d", got, len(due))
		}
	})
}

// After a graceful handover the new owner leaves the giver's in-flight
// messages alone while the giver is a member, and returns them at once
// when it is gone.
func TestTakeoverWatchesGivers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "givers"
		due, tok := lostOwner(t, c, topic, 5, false)
		handedOverBy(t, c, topic, tok, "x-giver")
		rec := newRecorder()
		k := runConsumer(t, c, takeoverOptions(topic, "taker"), rec.handle)
		// A witness due now: once it is delivered, the new owner has
		// polled, and checked the giver, at least once.
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "witness"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the witness delivered", func() bool { return rec.count("witness") == 1 })
		rec.mu.Lock()
		for id := range due {
			if len(rec.seen[id]) > 0 {
				t.Errorf("%s delivered by the new owner while its giver lives", id)
			}
		}
		rec.mu.Unlock()
		if err := c.store.Leave(ctx, topic, "x-giver"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the giver's messages delivered once it left", func() bool {
			return rec.total() >= len(due)+1 && k.Stats().Acked >= int64(len(due)+1)
		})
		checkRedelivered(t, rec, due, 1)
	})
}

// A message whose visibility deadline passed (its handler overran at a
// giver that is still alive) is redelivered at its own due time, with
// the overrun counted as an attempt.
func TestExpiredKeepsOwnDue(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "expired"
		due, tok := lostOwner(t, c, topic, 3, true)
		handedOverBy(t, c, topic, tok, "x-giver")
		rec := newRecorder()
		k := runConsumer(t, c, takeoverOptions(topic, "taker"), rec.handle)
		waitFor(t, 10*time.Second, "the overrun messages redelivered", func() bool {
			return rec.total() >= len(due) && k.Stats().Acked >= int64(len(due))
		})
		checkRedelivered(t, rec, due, 2)
		if got := k.Stats().Redelivered; got != int64(len(due)) {
			t.Errorf("Redelivered = %d, want %d", got, len(due))
		}
	})
}

// A record that cannot be decoded, met by a claim or by the reconciler,
// goes to the dead set with the decode error, its bytes kept as body,
// counted and logged once.
func TestCorruptRecordGoesDead(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	var logs testenv.Buffer
	c := newClient(t, env.Proxy, Options{Partitions: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	topic := "corrupt"
	if _, err := c.ensureTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	mk, sk := keys.Records(DefaultNamespace, topic, 0), keys.Scheduled(DefaultNamespace, topic, 0)
	raw := map[string]string{"indexed": "\x09not a record", "unindexed": "\x01"}
	for _, cmd := range [][]string{
		{"HSET", mk, "indexed", raw["indexed"]},
		{"ZADD", sk, fmt.Sprint(time.Now().UnixMilli()), "indexed"},
		{"HSET", mk, "unindexed", raw["unindexed"]}, // in no index: the reconciler's
	} {
		if r, err := testenv.Do(env.Proxy, cmd...); err != nil || strings.HasPrefix(r, "-") {
			t.Fatalf("%v: %q, %v", cmd, r, err)
		}
	}
	// A message due in an hour whose index entry says now (a stale one),
	// claimed with the indexed corrupt record: it goes back to scheduled
	// at its own due, in the same write that moves the record to dead.
	laterDue := clock.CeilMS(time.Now().Add(time.Hour)).UnixMilli()
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "later", At: time.UnixMilli(laterDue)}); err != nil {
		t.Fatal(err)
	}
	addEntry(t, env.Proxy, topic, 0, "later", time.Now())
	rec := newRecorder()
	o := takeoverOptions(topic, "k")
	o.ReconcileInterval = 50 * time.Millisecond
	k := runConsumer(t, c, o, rec.handle)
	waitFor(t, 20*time.Second, "both corrupt records dead", func() bool {
		d, err := c.Inspector().ListDead(ctx, topic, 10)
		return err == nil && len(d) == 2
	})
	waitFor(t, 5*time.Second, "the stale entry's message back at its due", func() bool {
		score, err := testenv.Do(env.Proxy, "ZSCORE", sk, "later")
		return err == nil && score == fmt.Sprint("$", laterDue) && k.Stats().Stale == 1
	})
	dead, err := c.Inspector().ListDead(ctx, topic, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		if !strings.Contains(d.LastError, "undecodable record") {
			t.Errorf("%s: last error %q, want the decode error", d.ID, d.LastError)
		}
		if string(d.Body) != raw[d.ID] {
			t.Errorf("%s: body %q, want the stored bytes %q", d.ID, d.Body, raw[d.ID])
		}
	}
	if n := rec.total(); n != 0 {
		t.Errorf("%d deliveries of corrupt records or of a message due in an hour", n)
	}
	if got := k.Stats().Corrupt; got != 2 {
		t.Errorf("Corrupt = %d, want 2", got)
	}
	if n := strings.Count(logs.String(), "undecodable record moved to the dead set"); n != 2 {
		t.Errorf("%d log lines about undecodable records, want 2 (one each)", n)
	}
}

// A consumer stopped while a handler runs hands its partition over at
// once, and still writes that handler's ack when it ends, however long
// after the stop (here past 5 s, which once was the budget of all the
// writes after a stop).
func TestStopAcksLongHandler(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 1})
	topic := "longack"
	const work = 6 * time.Second
	started := make(chan struct{}, 1)
	k, err := c.NewConsumer(takeoverOptions(topic, "giver"), func(ctx context.Context, d *Delivery) error {
		started <- struct{}{}
		select {
		case <-time.After(work):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "long"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery did not start")
	}
	stopped := time.Now()
	go k.Shutdown(ctx)
	waitFor(t, work/2, "the partition released while the handler runs", func() bool {
		st, err := c.Inspector().Stats(ctx, topic)
		return err == nil && st.Partitions[0].Owner == ""
	})
	t.Logf("partition released %v after the stop", time.Since(stopped).Round(time.Millisecond))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * work):
		t.Fatal("Run did not return")
	}
	if _, err := c.Get(ctx, topic, "long"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the handler ended: Get = %v, want ErrNotFound (acked)", err)
	}
	st, err := c.Inspector().Stats(ctx, topic)
	if err != nil || st.InFlight != 0 || st.Scheduled != 0 {
		t.Errorf("stats %+v, %v; want nothing scheduled or in flight", st, err)
	}
}

// I3: once a newer owner raised the fence, claims under the older token
// are refused by storage, and the older token cannot lower the fence.
func TestFenceRefusesSupersededToken(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "fence"
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "f"}); err != nil {
			t.Fatal(err)
		}
		st := c.store
		old, _ := st.NextToken(ctx, topic, 0, time.Now().UnixMilli())
		newer, _ := st.NextToken(ctx, topic, 0, time.Now().UnixMilli())
		if err := st.RaiseFence(ctx, store.TopicPartition{Topic: topic, P: 0}, old); err != nil {
			t.Fatal(err)
		}
		if err := st.RaiseFence(ctx, store.TopicPartition{Topic: topic, P: 0}, newer); err != nil {
			t.Fatal(err)
		}
		var fe *store.FencedError
		got, err := st.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: 0}, old, time.Now().UnixMilli(), 10)
		if !errors.As(err, &fe) || fe.Newest != newer || len(got) != 0 {
			t.Fatalf("claim under the superseded token: %v, %v; want FencedError at %d", got, err, newer)
		}
		if err := st.RaiseFence(ctx, store.TopicPartition{Topic: topic, P: 0}, old); !errors.As(err, &fe) {
			t.Fatalf("raising the fence back to the old token: %v, want FencedError", err)
		}
		got, err = st.ClaimIndexOnly(ctx, store.TopicPartition{Topic: topic, P: 0}, newer, time.Now().UnixMilli(), 10)
		if err != nil || len(got) != 1 || got[0].ID != "f" {
			t.Fatalf("claim under the newest token: %v, %v", got, err)
		}
		s, err := c.Inspector().Stats(ctx, topic)
		if err != nil || s.Partitions[0].Token != newer || s.Scheduled != 0 {
			t.Fatalf("stats: %+v, %v", s, err)
		}
	})
}

// TestWritesAfterStart: a Delete or Reschedule that comes after a
// delivery started says so (ErrRunning). The delete removes the message
// all the same: the failed delivery is not retried. The reschedule
// changes nothing: the delivery's ack removes the message. One that
// comes while the message is claimed ahead and held wins: the held copy
// never starts.
func TestWritesAfterStart(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 2})
		topic := "after-start"
		started := make(chan string, 4)
		release := make(chan struct{})
		rec := newRecorder()
		rec.fail = func(d *Delivery) error {
			if d.ID == "held" {
				return nil
			}
			started <- d.ID
			<-release
			return errors.New("boom")
		}
		k := runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 200 * time.Millisecond, Lease: 2 * time.Second,
			Backoff: []time.Duration{50 * time.Millisecond}}, rec.handle)
		for _, id := range []string{"del", "res"} {
			if _, err := c.Send(ctx, Message{Topic: topic, ID: id, Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the deliveries did not start")
			}
		}
		if err := c.Delete(ctx, topic, "del"); !errors.Is(err, ErrRunning) {
			t.Errorf("delete of a running delivery: %v, want ErrRunning", err)
		}
		if _, err := c.Get(ctx, topic, "del"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get after a delete of a running delivery: %v, want ErrNotFound", err)
		}
		if _, err := c.Reschedule(ctx, topic, "res", time.Now().Add(time.Hour)); !errors.Is(err, ErrRunning) {
			t.Errorf("reschedule of a running delivery: %v, want ErrRunning", err)
		}
		// A message claimed ahead (due within 1.5 poll intervals) and
		// deleted while held never starts.
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "held", Body: []byte("x"), Delay: 250 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "held claimed ahead", func() bool {
			in, err := c.Get(ctx, topic, "held")
			return err == nil && in.State == StateInFlight
		})
		if err := c.Delete(ctx, topic, "held"); err != nil {
			t.Errorf("delete of a held message: %v, want nil", err)
		}
		close(release)
		// "res" fails and is retried (50 ms) by its own record: its
		// second delivery starts, then fails again; "del" is gone.
		waitFor(t, 10*time.Second, "res delivered again", func() bool { return rec.count("res") >= 2 })
		waitFor(t, 10*time.Second, "the failed delete's delivery settled", func() bool { return k.Stats().Tombstones >= 2 })
		if n := rec.count("del"); n != 1 {
			t.Errorf("del delivered %d times, want once (deleted while it ran: not retried)", n)
		}
		if n := rec.count("held"); n != 0 {
			t.Errorf("held delivered %d times after its delete", n)
		}
		if _, err := c.Get(ctx, topic, "del"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get del after its delivery failed: %v, want ErrNotFound", err)
		}
	})
}

// An index entry due after its record (a write that moved the message
// earlier, its record first, met by a claim before its entry moved)
// delivers the message at its record's due, the earlier one, not the
// entry's.
func TestEntryLaterThanRecord(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "entry-later"
		due := clock.CeilMS(time.Now())
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "x", At: due}); err != nil {
			t.Fatal(err)
		}
		// Within the claim's reach, but far after the record's due.
		entry := time.UnixMilli(addEntry(t, addr, topic, 0, "x", due.Add(4*time.Second)))
		rec := newRecorder()
		o := takeoverOptions(topic, "k")
		o.PollInterval = 5 * time.Second
		runConsumer(t, c, o, rec.handle)
		waitFor(t, 10*time.Second, "x delivered", func() bool { return rec.count("x") == 1 })
		rec.mu.Lock()
		d, at := rec.seen["x"][0], rec.at["x"][0]
		rec.mu.Unlock()
		if !d.Due.Equal(due) {
			t.Errorf("delivered with due %v, want its record's %v (entry %v)", d.Due, due, entry)
		}
		if !at.Before(entry.Add(-time.Second)) {
			t.Errorf("started at %v, %v after its record's due; want before its entry's due %v", at, at.Sub(due), entry)
		}
	})
}

// A handler that outlives the handler timeout has its context ended
// there, never before, and the attempt fails as timed out; its message
// goes dead with that error.
func TestHandlerTimeout(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		c := newClient(t, addr, Options{Partitions: 1})
		topic := "handler-timeout"
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "x"}); err != nil {
			t.Fatal(err)
		}
		const timeout = 300 * time.Millisecond
		ran := make(chan time.Duration, 1)
		o := takeoverOptions(topic, "k")
		o.Timeout, o.MaxAttempts = timeout, 1
		runConsumer(t, c, o, func(ctx context.Context, d *Delivery) error {
			start := time.Now()
			<-ctx.Done()
			ran <- time.Since(start)
			return ctx.Err()
		})
		var took time.Duration
		select {
		case took = <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's context did not end")
		}
		if took < timeout {
			t.Errorf("the handler's context ended %v after its start, before the timeout %v", took, timeout)
		}
		t.Logf("the handler's context ended %v after its start (timeout %v)", took, timeout)
		var d []*Info
		waitFor(t, 10*time.Second, "x dead", func() bool {
			var err error
			d, err = c.Inspector().ListDead(ctx, topic, 10)
			return err == nil && len(d) == 1
		})
		if want := "handler timed out after 300ms"; !strings.Contains(d[0].LastError, want) {
			t.Errorf("last error %q, want it to say %q", d[0].LastError, want)
		}
	})
}
