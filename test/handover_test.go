package test

// Ownership changes at production settings: "delayq sub" processes through
// nutcracker with the default lease (10 s) and handler timeout (30 s).
// Adding and removing consumers must not stall messages: every delivery
// starts close to its message's own due time, exactly once. Each scenario
// logs its figures as FIGURE lines, like the fault suite.
//
// Lateness is d.at - due: d.at is the sub's delivered_at (the moment the
// handler started, read from the host's wall clock by the sub, on the same
// machine as the test), and due is the time the test sent (the ledger's
// earliest), not the due the sub printed. The time the test read the line
// (d.seen) is reported too, as seen_max_ms.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/testenv"
)

// Bounds of the hand-over scenarios.
const (
	scaleMaxP99    = 100 * time.Millisecond // p99 lateness through scale-out and scale-in
	scaleMaxLate   = 250 * time.Millisecond // max lateness through scale-out and scale-in
	handoverMaxGap = 250 * time.Millisecond // from the giver's release to the taker's ownership
	longMaxLate    = 500 * time.Millisecond // max lateness with 5 s handlers
	longWork       = 5 * time.Second        // sub --work of TestHandoverLongHandlers
)

// handoverSubArgs returns the flags of a sub of the hand-over scenarios:
// default lease, handler timeout and poll interval.
func handoverSubArgs(addr, topic string, parts int, id string, extra ...string) []string {
	return append(append([]string{
		"--addr", addr, "--topic", topic,
		"--id", id, "--log-level", "debug",
	}, partitionsFlag(parts)...), extra...)
}

// latenessReport is the lateness of every delivery from its message's own
// due as sent.
type latenessReport struct {
	sorted  []time.Duration // d.at - sent due, ascending
	worst   delivery        // the latest delivery
	seenMax time.Duration   // max of d.seen - sent due
	perSub  map[int]int     // deliveries per sub
}

func (r latenessReport) String() string {
	var subs []int
	for s := range r.perSub {
		subs = append(subs, s)
	}
	sort.Ints(subs)
	var per []string
	for _, s := range subs {
		per = append(per, fmt.Sprintf("sub%d:%d", s, r.perSub[s]))
	}
	return fmt.Sprintf("late_p50_ms=%d late_p99_ms=%d late_max_ms=%d seen_max_ms=%d per_sub=%s",
		percentile(r.sorted, 50).Milliseconds(), percentile(r.sorted, 99).Milliseconds(),
		percentile(r.sorted, 100).Milliseconds(), r.seenMax.Milliseconds(), strings.Join(per, ","))
}

// ownLateness measures every delivery of l from its message's due as sent,
// and checks that each first attempt printed that due (rounded up to the
// millisecond, as send stores it).
func ownLateness(t *testing.T, l *ledger) latenessReport {
	t.Helper()
	due := l.dues()
	r := latenessReport{perSub: map[int]int{}}
	var worst time.Duration
	badDue := 0
	for _, d := range l.snapshot() {
		r.perSub[d.sub]++
		sentDue, ok := due[d.ID]
		if !ok {
			continue // checkFaultLedger reports it
		}
		late := d.at.Sub(sentDue)
		r.sorted = append(r.sorted, late)
		if late > worst || len(r.sorted) == 1 {
			worst, r.worst = late, d
		}
		r.seenMax = max(r.seenMax, d.seen.Sub(sentDue))
		if want := clock.CeilMS(sentDue); d.Attempt == 1 && !d.due.Equal(want) {
			if badDue++; badDue <= 10 {
				t.Errorf("message %q: sub %d printed due %s, want the due sent, %s", d.ID, d.sub, d.Due, want.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	if badDue > 10 {
		t.Errorf("%d first deliveries in all printed another due than the one sent", badDue)
	}
	sort.Slice(r.sorted, func(i, j int) bool { return r.sorted[i] < r.sorted[j] })
	return r
}

// wantNoDuplicates fails t for every id delivered more than once, and
// then saves the subs' logs (see saveLogs).
func wantNoDuplicates(t *testing.T, rep ledgerReport, subs []*sub) {
	t.Helper()
	n := 0
	for id, ds := range rep.dups {
		if n++; n <= 10 {
			t.Errorf("message %q delivered %d times, want once: %s", id, len(ds), describe(ds))
		}
	}
	if rep.duplicates > 0 {
		t.Errorf("%d duplicate deliveries of %d messages, want 0", rep.duplicates, len(rep.dups))
		saveLogs(t, subs)
	}
}

// saveLogs writes each sub's stderr to a file under $DELAYQ_ARTIFACTS (or
// the temp directory) and logs where, for a failure to be read whole.
func saveLogs(t *testing.T, subs []*sub) {
	t.Helper()
	dir := os.Getenv("DELAYQ_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "delayq-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("save logs: %v", err)
		return
	}
	for _, s := range subs {
		f := filepath.Join(dir, fmt.Sprintf("%s-sub%d.log", t.Name(), s.idx))
		if err := os.WriteFile(f, []byte(s.stderr.String()), 0o644); err != nil {
			t.Logf("save logs: %v", err)
			continue
		}
		t.Logf("sub %d log: %s", s.idx, f)
	}
}

// lateOutliers logs the latest deliveries, to tell a slow partition from a
// slow sub.
func lateOutliers(t *testing.T, l *ledger, from time.Time) {
	t.Helper()
	due := l.dues()
	all := l.snapshot()
	sort.Slice(all, func(i, j int) bool { return all[i].at.Sub(due[all[i].ID]) > all[j].at.Sub(due[all[j].ID]) })
	for _, d := range all[:min(8, len(all))] {
		t.Logf("  late %v: %s partition %d sub %d token %d attempt %d due start+%v",
			d.at.Sub(due[d.ID]).Round(time.Millisecond), d.ID, d.Partition, d.sub, d.Token, d.Attempt,
			due[d.ID].Sub(from).Round(time.Millisecond))
	}
}

// TestScaleOutIn: 3000 messages due evenly over 20 s on 32 partitions;
// sub 0 starts, sub 1 joins 4 s later, sub 2 4 s after that, and 4 s
// later sub 0 is stopped with SIGTERM. Every message is delivered once,
// never early, with lateness from its own due p99 <= 100 ms and max <=
// 250 ms, although the partitions change owner three times.
func TestScaleOutIn(t *testing.T) {
	const parts, msgs = 32, 3000
	const step = 4 * time.Second
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "handover.scale"
	c := faultClient(t, addr, parts)
	l := newLedger()

	from := time.Now().Add(2 * time.Second)
	sendSpread(t, l, addr, topic, parts, "scale", msgs, from, 20*time.Second)
	if late := time.Since(from); late > 0 {
		t.Fatalf("sending took until %v after the first due time: the lateness figures would measure the send", late)
	}
	ids := []string{"scale-0", "scale-1", "scale-2"}
	var subs []*sub
	var shares []string
	// share waits (without failing) until the live subs hold a fair share
	// of the partitions, at the latest until deadline, and returns the
	// time it took from since (-1: not before the deadline).
	share := func(since, deadline time.Time, live ...string) time.Duration {
		took := -time.Millisecond
		poll(time.Until(deadline), func() bool {
			o, err := readOwnership(c, topic)
			if err == nil && o.ownedFairlyBy(parts, live...) {
				took = time.Since(since)
				return true
			}
			return false
		})
		return took
	}

	start := time.Now()
	for i := range ids {
		at := start.Add(time.Duration(i) * step)
		time.Sleep(time.Until(at)) // the scenario's planned moment, not a synchronisation
		s := time.Now()
		subs = append(subs, startSub(t, l, i, handoverSubArgs(addr, topic, parts, ids[i], "--concurrency", "32")...))
		took := share(s, at.Add(step), ids[:i+1]...)
		shares = append(shares, fmt.Sprintf("start_%d_share_ms=%d", i, took.Milliseconds()))
	}
	time.Sleep(time.Until(start.Add(3 * step))) // the scale-in's planned moment
	term := time.Now()
	if code := subs[0].stop(t, 30*time.Second); code != 0 {
		t.Errorf("sub 0: exit %d after SIGTERM, want 0\nstderr: %s", code, clip(subs[0].stderr.String()))
	}
	exited := time.Since(term)
	took := share(term, from.Add(20*time.Second), ids[1:]...)
	shares = append(shares, fmt.Sprintf("sigterm_0_share_ms=%d sigterm_0_exit_ms=%d", took.Milliseconds(), exited.Milliseconds()))

	live := subs[1:]
	waitDrained(t, c, topic, l, live)
	stopAllSubs(t, live)

	rep := checkFaultLedger(t, l, topic) // 0 lost, 0 early, bodies
	wantNoDuplicates(t, rep, subs)
	lr := ownLateness(t, l)
	p99, pmax := percentile(lr.sorted, 99), percentile(lr.sorted, 100)
	if p99 > scaleMaxP99 {
		t.Errorf("p99 lateness from the own due %v, want <= %v", p99, scaleMaxP99)
	}
	if pmax > scaleMaxLate {
		t.Errorf("max lateness from the own due %v (%s by sub %d, attempt %d), want <= %v",
			pmax, lr.worst.ID, lr.worst.sub, lr.worst.Attempt, scaleMaxLate)
	}
	if testing.Verbose() || pmax > scaleMaxLate {
		lateOutliers(t, l, from)
	}
	for i := range subs {
		if lr.perSub[i] == 0 {
			t.Errorf("sub %d delivered nothing: the scenario did not hand partitions to it", i)
		}
	}
	testenv.Figure(t, "scenario=scale-out-in %s duplicates=%d lost=%d messages=%d deliveries=%d %s",
		lr, rep.duplicates, rep.lost, rep.messages, rep.deliveries, strings.Join(shares, " "))
	checkClientErrAfterFaults(t, env)
}

// handoverGap is what watchHandover saw of one partition.
type handoverGap struct {
	partition int
	released  time.Time // the last read showing the giver as owner (or the watch's start)
	taken     time.Time // the first read showing the taker as owner
}

func (g handoverGap) gap() time.Duration { return g.taken.Sub(g.released) }

// watchHandover reads the ownership of topic every 20 ms from since until
// done holds (at most timeout; then it fails t, not fatally), and returns,
// for each partition the taker did not own at the first read and owned at
// a later one, when the giver was last seen as its owner and when the
// taker was first seen. A partition that never showed the giver was
// released at the latest at since. Each read is stamped with the moment it
// was sent.
func watchHandover(t *testing.T, c *delayq.Client, topic string, parts int, giver, taker string, since time.Time, timeout time.Duration, done func(ownership) bool) (gaps []handoverGap, took time.Duration) {
	t.Helper()
	released := make([]time.Time, parts)
	taken := make([]time.Time, parts)
	for p := range released {
		released[p] = since
	}
	already := make([]bool, parts) // the taker's at the first read
	reads, errs := 0, 0
	ok := poll(timeout, func() bool {
		at := time.Now()
		o, err := readOwnership(c, topic)
		if err != nil {
			errs++
			return false
		}
		reads++
		for p, owner := range o.owner {
			if p >= parts || !taken[p].IsZero() || already[p] {
				continue
			}
			switch owner {
			case giver:
				released[p] = at
			case taker:
				if reads == 1 {
					already[p] = true
				} else {
					taken[p] = at
				}
			}
		}
		if done(o) {
			took = time.Since(since)
			return true
		}
		return false
	})
	if !ok {
		took = time.Since(since)
		t.Errorf("hand-over from %s to %s not done after %v (%d reads, %d errors)", giver, taker, timeout, reads, errs)
	}
	for p := range parts {
		if !taken[p].IsZero() {
			gaps = append(gaps, handoverGap{partition: p, released: released[p], taken: taken[p]})
		}
	}
	return gaps, took
}

// checkGaps fails t for each partition whose hand-over gap exceeds
// handoverMaxGap, and returns the largest.
func checkGaps(t *testing.T, what string, gaps []handoverGap) time.Duration {
	t.Helper()
	var worst time.Duration
	for _, g := range gaps {
		worst = max(worst, g.gap())
		if g.gap() > handoverMaxGap {
			t.Errorf("%s: partition %d taken %v after the giver last held it, want within %v",
				what, g.partition, g.gap().Round(time.Millisecond), handoverMaxGap)
		}
	}
	return worst
}

// TestHandoverLongHandlers: handlers take 5 s (sub --work 5s). Sub 0 owns
// all 16 partitions and runs handlers when sub 1 starts; the partitions
// sub 0 gives up are owned by sub 1 within 250 ms of the release, whatever
// the handlers still running at sub 0. Then sub 0 is stopped with SIGTERM
// while its handlers run; its partitions again go to sub 1 within 250 ms
// each. Handlers running at the giver finish and ack there: no message is
// delivered twice, none is lost or early, and lateness from the own due
// stays under 500 ms.
func TestHandoverLongHandlers(t *testing.T) {
	// 150 messages over 15 s: 10 a second, 50 handlers running at once,
	// within one sub's concurrency of 64.
	const parts, msgs = 16, 150
	const span = 15 * time.Second
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "handover.long"
	c := faultClient(t, addr, parts)
	l := newLedger()
	extra := []string{"--concurrency", "64", "--work", longWork.String()}
	ids := []string{"long-0", "long-1"}

	from := time.Now().Add(2 * time.Second)
	sendSpread(t, l, addr, topic, parts, "long", msgs, from, span)
	if late := time.Since(from); late > 0 {
		t.Fatalf("sending took until %v after the first due time: the lateness figures would measure the send", late)
	}
	subs := []*sub{startSub(t, l, 0, handoverSubArgs(addr, topic, parts, ids[0], extra...)...)}
	waitOwners(t, c, topic, time.Now(), faultSettle, "sub 0 owning every partition", func(o ownership) bool {
		return o.ownedExactlyBy(parts, parts, parts, ids[0])
	})
	// Handlers running at sub 0: 10 deliveries started (1 s of messages),
	// none of them can have finished its 5 s of work.
	waitFor(t, 10*time.Second, func() bool { return l.count() >= 10 }, "sub 0 to start 10 deliveries")

	// Scale-out: sub 0 gives up half its partitions to sub 1.
	out := time.Now()
	subs = append(subs, startSub(t, l, 1, handoverSubArgs(addr, topic, parts, ids[1], extra...)...))
	half := parts / 2
	outGaps, outTook := watchHandover(t, c, topic, parts, ids[0], ids[1], out, 3*delayq.DefaultLease, func(o ownership) bool {
		return o.ownedExactlyBy(parts, half, half, ids...)
	})
	outWorst := checkGaps(t, "scale-out", outGaps)
	if len(outGaps) == 0 {
		t.Errorf("scale-out: no partition went from sub 0 to sub 1")
	}
	runningAt := func(s int, at time.Time) int { // deliveries by sub s still in their --work at at
		n := 0
		for _, d := range l.snapshot() {
			if d.sub == s && !d.at.After(at) && d.at.Add(longWork).After(at) {
				n++
			}
		}
		return n
	}
	outRunning := runningAt(0, out)

	// Scale-in: SIGTERM sub 0 while its handlers run; sub 1 takes all.
	time.Sleep(time.Until(from.Add(span / 2))) // the scale-in's planned moment (no-op if already past)
	term := time.Now()
	termRunning := runningAt(0, term)
	exitAt := make(chan time.Time, 1)
	go func() { <-subs[0].done; exitAt <- time.Now() }()
	if err := subs[0].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	inGaps, inTook := watchHandover(t, c, topic, parts, ids[0], ids[1], term, 3*delayq.DefaultLease, func(o ownership) bool {
		return o.ownedExactlyBy(parts, parts, parts, ids[1])
	})
	inWorst := checkGaps(t, "sigterm", inGaps)
	if code := subs[0].wait(t, 30*time.Second); code != 0 {
		t.Errorf("sub 0: exit %d after SIGTERM, want 0\nstderr: %s", code, clip(subs[0].stderr.String()))
	}
	exited := (<-exitAt).Sub(term)
	if outRunning == 0 || termRunning == 0 {
		t.Errorf("sub 0 ran %d handlers when sub 1 started and %d at SIGTERM: the scenario did not hand over under running handlers",
			outRunning, termRunning)
	}

	live := subs[1:]
	waitDrained(t, c, topic, l, live)
	stopAllSubs(t, live)

	rep := checkFaultLedger(t, l, topic) // 0 lost, 0 early, bodies
	wantNoDuplicates(t, rep, subs)
	lr := ownLateness(t, l)
	if pmax := percentile(lr.sorted, 100); pmax > longMaxLate {
		t.Errorf("max lateness from the own due %v (%s by sub %d, attempt %d), want <= %v",
			pmax, lr.worst.ID, lr.worst.sub, lr.worst.Attempt, longMaxLate)
		lateOutliers(t, l, from)
	}
	testenv.Figure(t, "scenario=long-handlers-scale-out gap_max_ms=%d moved=%d share_ms=%d running_at_giver=%d",
		outWorst.Milliseconds(), len(outGaps), outTook.Milliseconds(), outRunning)
	testenv.Figure(t, "scenario=long-handlers-sigterm gap_max_ms=%d moved=%d all_taken_ms=%d running_at_giver=%d exit_ms=%d",
		inWorst.Milliseconds(), len(inGaps), inTook.Milliseconds(), termRunning, exited.Milliseconds())
	testenv.Figure(t, "scenario=long-handlers %s duplicates=%d lost=%d messages=%d deliveries=%d",
		lr, rep.duplicates, rep.lost, rep.messages, rep.deliveries)
	checkClientErrAfterFaults(t, env)
}

// TestCrashAtDefaults: kill -9 of one of 3 consumers with the defaults
// users get (lease 10 s, handler timeout 30 s, poll 1 s), handlers taking
// 2 s so that some run at the kill (64 at once: capacity is not what is
// measured). Every message the killed consumer
// held (claimed ahead, queued or running) starts again within 2 leases +
// 1 poll interval + 1 s of the kill, from its own due if later; nothing is
// lost or early, and the only repeats are of deliveries the killed
// consumer started before the kill.
func TestCrashAtDefaults(t *testing.T) {
	// Its bound is lease expiries, not the machine: the held starts come
	// about a lease after the kill, 12 s within it. It runs beside the
	// other parallel tests.
	t.Parallel()
	const parts, n, msgs = 16, 3, 600
	const span = 25 * time.Second
	bound := 2*delayq.DefaultLease + delayq.DefaultPollInterval + time.Second
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "crash.defaults"
	c := faultClient(t, addr, parts)
	l := newLedger()
	from := time.Now().Add(2 * time.Second)
	sendSpread(t, l, addr, topic, parts, "dflt", msgs, from, span)
	var subs []*sub
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("dflt-%d", i))
		subs = append(subs, startSub(t, l, i, handoverSubArgs(addr, topic, parts, ids[i], "--work", "2s", "--concurrency", "64")...))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "a fair share", func(o ownership) bool {
		return o.ownedFairlyBy(parts, ids...)
	})
	time.Sleep(time.Until(from.Add(5 * time.Second))) // the fault's moment
	victim := subs[1]
	kill := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The victim may start a delivery between the two: only one it
	// started after the signal was sent cannot be its.
	killed := time.Now()
	handover := waitOwners(t, c, topic, kill, 3*delayq.DefaultLease, "the survivors owning every partition", func(o ownership) bool {
		return o.ownedFairlyBy(parts, ids[0], ids[2])
	})
	victim.wait(t, 10*time.Second)
	live := []*sub{subs[0], subs[2]}
	waitDrained(t, c, topic, l, live)
	stopAllSubs(t, live)

	rep := checkFaultLedger(t, l, topic)
	held := checkHeldStart(t, l, victim.idx, kill, bound)
	for id, ds := range rep.dups {
		if ds[0].sub != victim.idx || ds[0].at.After(killed) {
			t.Errorf("message %q delivered %d times, and not after a delivery the killed sub started: %s", id, len(ds), describe(ds))
		}
	}
	recovered := subCounter(live, "recovered")
	if rep.duplicates > 0 && recovered == 0 {
		t.Errorf("%d duplicates, but the survivors counted no recovered message", rep.duplicates)
	}
	testenv.Figure(t, "scenario=kill9-defaults handover_ms=%d held_start_max_ms=%d bound_ms=%d duplicates=%d recovered=%d lost=%d messages=%d",
		handover.Milliseconds(), held.Milliseconds(), bound.Milliseconds(), rep.duplicates, recovered, rep.lost, rep.messages)
	checkClientErrAfterFaults(t, env)
}
