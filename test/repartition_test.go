package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// Bounds of a change of the partition count, asserted below with the
// defaults (lease 10 s, handler timeout 30 s) and stated in docs/partitions.md.
const (
	repartP99 = 100 * time.Millisecond
	repartMax = time.Second
	// repartEnd bounds one change: the settle time (30 s), the last
	// sweep, and the messages due within the move horizon (30 s) that
	// are delivered where they are.
	repartEnd = 90 * time.Second
)

// TestRepartitionLive grows a live topic from 4 to 16 partitions with two
// "sub" processes running and eight more joining, then shrinks it to 8,
// through Twemproxy with the defaults, while 6000 messages fall due over
// 20 s and 1000 more wait an hour. Every message due is delivered once,
// never early, p99 lateness within 100 ms and max within 1 s of its due;
// lookups, deletes, reschedules and duplicate checks made during the
// changes do what they said; afterwards the messages waiting are in their
// partition of 8, and the ten subs each own 0 or 1 of the 8 partitions.
func TestRepartitionLive(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.repart"
	ctx := context.Background()
	c := faultClient(t, addr, 4)
	l := newLedger()
	// 1000 messages an hour ahead, in the topic of 4 (created here).
	farIDs, far := enqueueFar(t, c, topic, 1000)

	subArgs := func(i int) []string {
		return []string{"--addr", addr, "--topic", topic, "--id", fmt.Sprintf("rp-%d", i), "--concurrency", "32", "--log-level", "info"}
	}
	subs := []*sub{startSub(t, l, 0, subArgs(0)...), startSub(t, l, 1, subArgs(1)...)}
	waitOwners(t, c, topic, time.Now(), faultSettle, "2 subs owning 2 partitions each", func(o ownership) bool {
		return o.ownedExactlyBy(4, 2, 2, "rp-0", "rp-1")
	})
	start := time.Now().Add(3 * time.Second)
	soon := sendSpread(t, l, addr, topic, 0, "soon", 6000, start, 20*time.Second)

	// Grow, with eight more subs joining one by one.
	grow := time.Now()
	mustCLI(t, "", "partitions", "--addr", addr, "--topic", topic, "--set", "16")
	for i := 2; i < 10; i++ {
		subs = append(subs, startSub(t, l, i, subArgs(i)...))
		time.Sleep(500 * time.Millisecond) // one by one
	}
	deleted, rescheduled := map[string]bool{}, map[string]time.Time{}
	duringChange(t, c, l, topic, farIDs, soon, 0, deleted, rescheduled)
	growTook := waitPartitions(t, c, topic, 16, grow)
	for _, s := range subs {
		if s.exited() {
			t.Fatalf("sub %d exited: exit %d\nstderr: %s", s.idx, s.exitCode(), clip(s.stderr.String()))
		}
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("rp-%d", i))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "10 subs owning 1 or 2 of 16 partitions each", func(o ownership) bool {
		return o.ownedExactlyBy(16, 1, 2, ids...)
	})

	shrink := time.Now()
	r := mustCLI(t, "", "partitions", "--addr", addr, "--topic", topic, "--set", "8")
	t.Logf("partitions --set 8: %s", r.stdout)
	duringChange(t, c, l, topic, farIDs, soon, 1, deleted, rescheduled)
	shrinkTook := waitPartitions(t, c, topic, 8, shrink)
	waitOwners(t, c, topic, time.Now(), faultSettle, "8 partitions owned by 8 of the 10 subs", func(o ownership) bool {
		if o.owned != 8 || len(o.owner) != 8 {
			return false
		}
		for _, n := range o.by {
			if n != 1 {
				return false
			}
		}
		return true
	})

	waitFor(t, faultDrain, func() bool { return len(l.missing()) == 0 }, "every message due delivered")
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	if rep.duplicates > 0 {
		for id, ds := range rep.dups {
			t.Errorf("%s delivered %d times without a fault: %s", id, len(ds), describe(ds))
			break
		}
		t.Errorf("%d duplicates", rep.duplicates)
	}
	p99, worst := l.firstLateness()
	if p99 > repartP99 || worst > repartMax {
		t.Errorf("lateness p99 %v, max %v; want within %v and %v", p99, worst, repartP99, repartMax)
	}
	for _, id := range farIDs {
		in, err := c.Get(ctx, topic, id)
		switch {
		case deleted[id]:
			if !errors.Is(err, delayq.ErrNotFound) {
				t.Errorf("%s, deleted during a change: %+v, %v", id, in, err)
			}
		case err != nil:
			t.Errorf("%s after the changes: %v", id, err)
		case in.Partition != partition.For(id, 8):
			t.Errorf("%s in partition %d, want %d of 8", id, in.Partition, partition.For(id, 8))
		case !rescheduled[id].IsZero() && !in.Due.Equal(rescheduled[id]):
			t.Errorf("%s due %v, rescheduled to %v", id, in.Due, rescheduled[id])
		case rescheduled[id].IsZero() && in.Due.Before(far.Truncate(time.Millisecond)):
			t.Errorf("%s due %v, want %v", id, in.Due, far)
		}
	}
	moved := subCounter(subs, "moved")
	testenv.Figure(t, "scenario=repartition grow_4_16_s=%.1f shrink_16_8_s=%.1f moved=%d moved_per_s=%.0f messages=%d lost=%d duplicates=%d lateness_ms p99=%.1f max=%.1f",
		growTook.Seconds(), shrinkTook.Seconds(), moved, float64(moved)/(growTook+shrinkTook).Seconds(),
		rep.messages, rep.lost, rep.duplicates, float64(p99.Microseconds())/1000, float64(worst.Microseconds())/1000)
	if moved == 0 {
		t.Error("the subs counted no message moved")
	}
}

// duringChange looks up, enqueues again, deletes and reschedules messages
// while a change runs (from 2.5 s on, when its moves run), and records
// what it did: some of those an hour ahead, and some of the 6000 not yet
// due (a delete is recorded in l; a reschedule later moves the earliest
// delivery).
func duringChange(t *testing.T, c *delayq.Client, l *ledger, topic string, farIDs, soon []string, round int, deleted map[string]bool, rescheduled map[string]time.Time) {
	t.Helper()
	ctx := context.Background()
	time.Sleep(2500 * time.Millisecond) // the moves start 2 s after the change
	for i := round; i < len(farIDs); i += 23 {
		id := farIDs[i]
		if deleted[id] {
			continue
		}
		if in, err := c.Get(ctx, topic, id); err != nil || in.State != delayq.StateScheduled {
			t.Errorf("get %s during a change: %+v, %v", id, in, err)
		}
		if _, err := c.Send(ctx, delayq.Message{Topic: topic, ID: id}); !errors.Is(err, delayq.ErrDuplicate) {
			t.Errorf("enqueue of %s again during a change: %v, want ErrDuplicate", id, err)
		}
	}
	for i := round + 3; i < len(farIDs); i += 29 {
		id := farIDs[i]
		if deleted[id] || !rescheduled[id].IsZero() {
			continue
		}
		if err := c.Delete(ctx, topic, id); err != nil {
			t.Errorf("delete %s during a change: %v", id, err)
		}
		deleted[id] = true
	}
	for i := round + 7; i < len(farIDs); i += 31 {
		id := farIDs[i]
		if deleted[id] {
			continue
		}
		at := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
		got, err := c.Reschedule(ctx, topic, id, at)
		if err != nil {
			t.Errorf("reschedule %s during a change: %v", id, err)
			continue
		}
		rescheduled[id] = got
	}
	if round > 0 {
		return
	}
	// Of the 6000, the last ones are due 10 s or more from now: delete
	// some, and push others 2 s later.
	for i := len(soon) - 1 - round; i >= len(soon)-400; i -= 20 {
		id := soon[i]
		if err := c.Delete(ctx, topic, id); err != nil {
			t.Errorf("delete %s during a change: %v", id, err)
			continue
		}
		l.markDeleted(id)
	}
	for i := len(soon) - 11 - round; i >= len(soon)-400; i -= 20 {
		id := soon[i]
		in, err := c.Get(ctx, topic, id)
		if err != nil {
			t.Errorf("get %s during a change: %v", id, err)
			continue
		}
		at := in.Due.Add(2 * time.Second)
		if _, err := c.Reschedule(ctx, topic, id, at); err != nil {
			t.Errorf("reschedule %s during a change: %v", id, err)
			continue
		}
		l.setEarliest(id, at)
	}
}

// waitPartitions waits until topic has n partitions and no change runs,
// printing the progress "partitions --json" reports, and returns how long
// it took from since.
func waitPartitions(t *testing.T, c *delayq.Client, topic string, n int, since time.Time) time.Duration {
	t.Helper()
	var last *delayq.PartitionsInfo
	ok := poll(repartEnd, func() bool {
		info, err := c.Inspector().Partitions(context.Background(), topic)
		if err != nil {
			return false
		}
		last = info
		return info.Count == n && info.Next == 0
	})
	js, _ := json.Marshal(last)
	if !ok {
		t.Fatalf("the change to %d partitions did not end within %v: %s", n, repartEnd, js)
	}
	took := time.Since(since)
	t.Logf("changed to %d partitions in %v", n, took.Round(time.Millisecond))
	return took
}

// TestRepartitionFaults: a change from 4 to 16 partitions through
// Twemproxy with the defaults, while its moves run: the "partitions --set
// 16 --wait" command is killed -9 and run again (harmless), a --set of
// another count is refused, and one of three subs is killed -9. The change
// still ends; no message is lost or early; only messages the killed sub
// was running may come twice; every message waiting an hour is in its
// partition of 16, once.
func TestRepartitionFaults(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.repart.faults"
	ctx := context.Background()
	c := faultClient(t, addr, 4)
	l := newLedger()
	farIDs, _ := enqueueFar(t, c, topic, 2000)
	var subs []*sub
	var ids []string
	for i := range 3 {
		ids = append(ids, fmt.Sprintf("rpf-%d", i))
		subs = append(subs, startSub(t, l, i, "--addr", addr, "--topic", topic, "--id", ids[i], "--concurrency", "32", "--log-level", "info"))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "3 subs sharing 4 partitions", func(o ownership) bool {
		return o.ownedFairlyBy(4, ids...)
	})
	sendSpread(t, l, addr, topic, 0, "soon", 2000, time.Now().Add(2*time.Second), 20*time.Second)

	start := time.Now()
	set := newCmd(ctx, "partitions", "--addr", addr, "--topic", topic, "--set", "16", "--wait")
	if err := set.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := set.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = set.Wait()
	if r := mustCLI(t, "", "partitions", "--addr", addr, "--topic", topic, "--set", "16"); !strings.Contains(r.stdout, "changing to 16") {
		t.Errorf("--set 16 again: %s", r)
	}
	wantExit(t, cli(t, "", "partitions", "--addr", addr, "--topic", topic, "--set", "8"), 1, "changing from 4 to 16")

	// Kill -9 a sub while the moves run.
	time.Sleep(2500 * time.Millisecond)
	if err := subs[2].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = subs[2].wait(t, 10*time.Second)
	took := waitPartitions(t, c, topic, 16, start)
	waitFor(t, faultDrain, func() bool { return len(l.missing()) == 0 }, "every message due delivered")
	stopAllSubs(t, subs[:2])
	rep := checkFaultLedger(t, l, topic)
	for id, ds := range rep.dups {
		if ds[0].sub != 2 {
			t.Errorf("%s repeated, first delivered by sub %d, which was not killed: %s", id, ds[0].sub, describe(ds))
		}
	}
	for _, id := range farIDs {
		in, err := c.Get(ctx, topic, id)
		if err != nil {
			t.Errorf("%s after the change: %v", id, err)
			continue
		}
		if in.Partition != partition.For(id, 16) || in.State != delayq.StateScheduled {
			t.Errorf("%s in partition %d (%s), want %d scheduled", id, in.Partition, in.State, partition.For(id, 16))
		}
	}
	ts := stats(t, addr, topic)
	if ts.Count != 16 || ts.Scheduled != int64(len(farIDs)) || ts.InFlight != 0 {
		t.Errorf("after the change: %d partitions, %d scheduled, %d in flight; want 16, %d, 0", ts.Count, ts.Scheduled, ts.InFlight, len(farIDs))
	}
	testenv.Figure(t, "scenario=repartition-kill grow_4_16_s=%.1f moved=%d messages=%d lost=%d duplicates=%d max_late_ms=%d",
		took.Seconds(), subCounter(subs, "moved"), rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds())
}

// enqueueFar enqueues n messages due in an hour (ids far-NNNN, the id as
// body) and returns their ids and due time.
func enqueueFar(t *testing.T, c *delayq.Client, topic string, n int) ([]string, time.Time) {
	t.Helper()
	far := time.Now().Add(time.Hour)
	ids := make([]string, n)
	msgs := make([]delayq.Message, n)
	for i := range n {
		ids[i] = fmt.Sprintf("far-%04d", i)
		msgs[i] = delayq.Message{Topic: topic, ID: ids[i], At: far, Body: []byte(ids[i])}
	}
	res, err := c.SendBatch(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return ids, far
}

// TestRepartitionNoConsumerCancel: with no consumer on the topic (a
// maintenance window), "partitions --set 8 --wait" says at once that none
// runs, what ends the change and how to cancel it, and exits 1 with the
// change started. "--cancel" turns it into its reverse; once a sub runs,
// "--wait" interrupted by SIGINT says the change goes on, and the change
// ends at the old count with every message, those written during it
// included, in its partition of 4, once.
func TestRepartitionNoConsumerCancel(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.repart.cancel"
	ctx := context.Background()
	c := faultClient(t, addr, 4)
	farIDs, _ := enqueueFar(t, c, topic, 500)

	start := time.Now()
	r := cli(t, "", "partitions", "--addr", addr, "--topic", topic, "--set", "8", "--wait")
	wantExit(t, r, 1, "no consumer runs on topic "+topic, "delayq sub --topic "+topic, "delayq partitions --topic "+topic+" --cancel")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("--set 8 --wait with no consumer took %v, want an answer at once", took)
	}
	if !strings.Contains(r.stdout, "changing to 8") {
		t.Errorf("--set 8 --wait printed %q, want the change's progress", r.stdout)
	}
	time.Sleep(1100 * time.Millisecond) // the client reads the layout again: new messages go to 8 partitions
	var during []string
	var msgs []delayq.Message
	far := time.Now().Add(time.Hour)
	for i := range 200 {
		id := fmt.Sprintf("during-%03d", i)
		during = append(during, id)
		msgs = append(msgs, delayq.Message{Topic: topic, ID: id, At: far})
	}
	if res, err := c.SendBatch(ctx, msgs); err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	r = mustCLI(t, "", "partitions", "--addr", addr, "--topic", topic, "--cancel")
	if !strings.Contains(r.stdout, "change to 8 partitions cancelled, moving back to 4") {
		t.Errorf("--cancel printed %q", r.stdout)
	}
	ids := append(farIDs, during...)
	for _, id := range ids {
		if _, err := c.Get(ctx, topic, id); err != nil {
			t.Errorf("%s with the change cancelled: %v", id, err)
		}
	}

	l := newLedger()
	s := startSub(t, l, 0, "--addr", addr, "--topic", topic, "--id", "rpc-0")
	waitOwners(t, c, topic, time.Now(), faultSettle, "the sub owning the 8 partitions", func(o ownership) bool {
		return o.ownedFairlyBy(8, "rpc-0")
	})
	wait := newCmd(ctx, "partitions", "--addr", addr, "--topic", topic, "--wait")
	var out, errb bytes.Buffer
	wait.Stdout, wait.Stderr = &out, &errb
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := wait.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := wait.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 ||
		!strings.Contains(errb.String(), "goes on without this command") || strings.Contains(errb.String(), "--cancel") {
		// A cancelled change cannot be cancelled again: no --cancel hint.
		t.Errorf("--wait interrupted: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	waitPartitions(t, c, topic, 4, start)
	for _, id := range ids {
		in, err := c.Get(ctx, topic, id)
		if err != nil {
			t.Errorf("%s after the cancel: %v", id, err)
			continue
		}
		if in.Partition != partition.For(id, 4) || in.State != delayq.StateScheduled {
			t.Errorf("%s in partition %d (%s), want %d scheduled", id, in.Partition, in.State, partition.For(id, 4))
		}
	}
	ts := stats(t, addr, topic)
	if ts.Count != 4 || ts.Scheduled != int64(len(ids)) {
		t.Errorf("after the cancel: %d partitions, %d scheduled; want 4, %d", ts.Count, ts.Scheduled, len(ids))
	}
	stopAllSubs(t, []*sub{s})
}
