package test

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// startSubs starts n "delayq sub" processes with args and waits until
// they share the topic's 16 partitions.
func startSubs(t *testing.T, l *ledger, n int, addr, topic string, args ...string) []*sub {
	t.Helper()
	args = append([]string{"--addr", addr, "--topic", topic}, args...)
	var subs []*sub
	for i := range n {
		subs = append(subs, startSub(t, l, i, args...))
	}
	waitFor(t, 30*time.Second, func() bool {
		ts, _ := tryStats(t, addr, topic)
		owned, who := ts.owners()
		for _, s := range subs {
			if s.exited() {
				return true
			}
		}
		return owned == 16 && len(who) == n
	}, "the subs share the partitions")
	for _, s := range subs {
		if s.exited() {
			t.Fatalf("sub %d exited: %d\nstderr: %s", s.idx, s.exitCode(), s.stderr)
		}
	}
	return subs
}

// sendDueNow sends n messages due at once, ids prefix-00000..., and
// records them in l.
func sendDueNow(t *testing.T, l *ledger, addr, topic, prefix string, n int) time.Time {
	t.Helper()
	var in strings.Builder
	at := time.Now()
	for i := range n {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		fmt.Fprintf(&in, `{"id":%q,"body":"b"}`+"\n", id)
		l.expect(id, []byte("b"), at.Add(-clockSlack))
	}
	mustCLI(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	return at
}

// startsWithin counts the deliveries of l that started within [from, to).
func startsWithin(l *ledger, from, to time.Time) int {
	n := 0
	for _, d := range l.snapshot() {
		if !d.at.Before(from) && d.at.Before(to) {
			n++
		}
	}
	return n
}

// checkOnceNotEarly checks that every message of l was delivered exactly
// once, none before its due.
func checkOnceNotEarly(t *testing.T, l *ledger) {
	t.Helper()
	due := l.dues()
	for id := range due {
		ds := l.deliveries(id)
		if len(ds) != 1 {
			t.Errorf("%s delivered %d times", id, len(ds))
			continue
		}
		if ds[0].at.Before(due[id]) {
			t.Errorf("%s delivered at %v, before its due %v", id, ds[0].at, due[id])
		}
	}
}

// TestRateLimitFleet: through Twemproxy, 4 "delayq sub" processes (32
// handlers of 20 ms each) of a topic limited to 200 starts a second
// start 200 a second between them (±5% over the middle 20 s) of 6000
// messages all due at once; raised to 400 a second, the new rate holds
// within 2 s; each message is delivered once, none early.
func TestRateLimitFleet(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.rate"
	l := newLedger()
	mustCLI(t, `{"id":"first","body":"b"}`+"\n", "send", "--stdin", "--addr", addr, "--topic", topic)
	l.expect("first", []byte("b"), time.Now().Add(-time.Minute))
	mustCLI(t, "", "limits", "--addr", addr, "--topic", topic, "--rate", "200/s")
	subs := startSubs(t, l, 4, addr, topic, "--concurrency", "32", "--work", "20ms")
	const N = 6000
	t0 := sendDueNow(t, l, addr, topic, "r", N-1)
	// 200/s from t0 + 1 s to t0 + 21 s; then 400/s.
	time.Sleep(time.Until(t0.Add(22 * time.Second)))
	mustCLI(t, "", "limits", "--addr", addr, "--topic", topic, "--rate", "400/s")
	raised := time.Now()
	waitFor(t, 60*time.Second, func() bool { return len(l.missing()) == 0 }, "every message delivered; %d missing", len(l.missing()))
	time.Sleep(500 * time.Millisecond) // a second delivery would show by now
	var last time.Time
	for _, d := range l.snapshot() {
		last = maxTime(last, d.at)
	}
	mid := float64(startsWithin(l, t0.Add(time.Second), t0.Add(21*time.Second))) / 20
	after := float64(startsWithin(l, raised.Add(2*time.Second), last)) / last.Sub(raised.Add(2*time.Second)).Seconds()
	t.Logf("rate limit 200/s, 4 subs, %d messages due at once: %.1f/s over the middle 20 s; raised to 400/s: %.1f/s from 2 s after over %v",
		N, mid, after, last.Sub(raised.Add(2*time.Second)).Round(time.Millisecond))
	if mid < 190 || mid > 210 {
		t.Errorf("limited to 200/s, the fleet started %.1f/s", mid)
	}
	if last.Sub(raised) < 3*time.Second {
		t.Fatalf("the backlog ran out %v after the rate was raised: too short to measure", last.Sub(raised))
	}
	if after < 380 || after > 420 {
		t.Errorf("raised to 400/s, the fleet started %.1f/s", after)
	}
	checkOnceNotEarly(t, l)
	if !t.Failed() {
		testenv.Figure(t, "scenario=rate-limit subs=4 messages=%d limit_per_s=200 started_per_s=%.1f (middle 20 s) raised_per_s=400 started_per_s=%.1f (from 2 s after) lost=0 duplicates=0 early=0", N, mid, after)
	}
	for _, s := range subs {
		if code := s.stop(t, 20*time.Second); code != 0 {
			t.Errorf("sub %d exited %d\nstderr: %s", s.idx, code, s.stderr)
		}
	}
}

// maxRunning returns the most handlers of l running at once within
// [from, to): each from its start to its end line, or to the kill of its
// process (killed[sub]) when it printed none.
func maxRunning(l *ledger, killed map[int]time.Time, from, to time.Time) int {
	type edge struct {
		at time.Time
		d  int
	}
	l.mu.Lock()
	ends := map[string]time.Time{}
	key := func(sub int, id string, attempt int) string { return fmt.Sprintf("%d %s %d", sub, id, attempt) }
	for _, e := range l.ends {
		ends[key(e.sub, e.Ended, e.Attempt)] = e.at
	}
	var edges []edge
	for _, d := range l.all {
		e, ok := ends[key(d.sub, d.ID, d.Attempt)]
		if !ok {
			if k, dead := killed[d.sub]; dead {
				e = k
			} else {
				e = to // still running
			}
		}
		if e.Before(from) || !d.at.Before(to) {
			continue
		}
		edges = append(edges, edge{d.at, 1}, edge{e, -1})
	}
	l.mu.Unlock()
	// At equal times, ends come first: a handler that ended as another
	// started did not run with it.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].d < edges[j].d
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return most
}

// TestConcurrencyCapFleet: through Twemproxy, 4 "delayq sub" processes
// (16 handlers of 200 ms each) of a topic capped at 10 deliveries at once
// never run more than 10 handlers at once, measured from each handler's
// own start and end, and run close to 10 / 0.2 s = 50 a second; after a
// kill -9 of a process holding slots, the cap is whole again (10 running)
// within a lease (10 s).
func TestConcurrencyCapFleet(t *testing.T) {
	// Not in parallel: it measures the fleet's start rate under the cap,
	// which the parallel scenarios' load on 2 cores would lower.
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.cap"
	l := newLedger()
	mustCLI(t, `{"id":"first","body":"b"}`+"\n", "send", "--stdin", "--addr", addr, "--topic", topic)
	l.expect("first", []byte("b"), time.Now().Add(-time.Minute))
	mustCLI(t, "", "limits", "--addr", addr, "--topic", topic, "--concurrency", "10")
	subs := startSubs(t, l, 4, addr, topic, "--concurrency", "16", "--work", "200ms", "--ends")
	const N = 1200
	t0 := sendDueNow(t, l, addr, topic, "c", N-1)
	time.Sleep(time.Until(t0.Add(6 * time.Second)))
	// Kill the process running the most handlers now.
	running := map[int]int{}
	l.mu.Lock()
	ended := map[string]bool{}
	for _, e := range l.ends {
		ended[fmt.Sprintf("%d %s %d", e.sub, e.Ended, e.Attempt)] = true
	}
	for _, d := range l.all {
		if !ended[fmt.Sprintf("%d %s %d", d.sub, d.ID, d.Attempt)] {
			running[d.sub]++
		}
	}
	l.mu.Unlock()
	victim := subs[0]
	for _, s := range subs {
		if running[s.idx] > running[victim.idx] {
			victim = s
		}
	}
	if running[victim.idx] == 0 {
		t.Fatal("no process runs a handler 6 s into the backlog")
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	killed := map[int]time.Time{victim.idx: killedAt}
	victim.wait(t, 10*time.Second)
	thr := float64(startsWithin(l, t0.Add(time.Second), t0.Add(6*time.Second))) / 5
	t.Logf("cap 10, 4 subs x 16 handlers of 200 ms: %.1f starts/s before the kill (%.0f%% of 50/s); killed sub %d running %d handlers",
		thr, 2*thr, victim.idx, running[victim.idx])
	if thr < 45 {
		t.Errorf("capped at 10 handlers of 200 ms, the fleet started %.1f/s, want close to 50/s", thr)
	}
	// The cap is whole again within a lease: 10 handlers run at once.
	waitFor(t, 15*time.Second, func() bool {
		return maxRunning(l, killed, killedAt.Add(300*time.Millisecond), time.Now()) >= 10
	}, "10 handlers running again after the kill")
	var whole time.Time
	for at := killedAt.Add(100 * time.Millisecond); at.Before(time.Now()); at = at.Add(100 * time.Millisecond) {
		if maxRunning(l, killed, at, at.Add(100*time.Millisecond)) >= 10 {
			whole = at
			break
		}
	}
	t.Logf("kill -9 of a process holding slots: 10 running again %v after", whole.Sub(killedAt).Round(100*time.Millisecond))
	if whole.Sub(killedAt) > 10*time.Second+time.Second {
		t.Errorf("the cap was whole again %v after the kill, want within a lease (10 s)", whole.Sub(killedAt))
	}
	waitFor(t, 90*time.Second, func() bool { return len(l.missing()) == 0 }, "every message delivered; %d missing", len(l.missing()))
	time.Sleep(500 * time.Millisecond)
	most := maxRunning(l, killed, t0.Add(-time.Minute), time.Now())
	if most > 10 {
		t.Errorf("%d handlers ran at once under a cap of 10", most)
	}
	// The messages the killed process was running are delivered again
	// (their handlers died with it); every other once; none early.
	due := l.dues()
	for id := range due {
		ds := l.deliveries(id)
		if len(ds) == 0 {
			t.Errorf("%s never delivered", id)
		}
		for _, d := range ds {
			if d.at.Before(due[id]) {
				t.Errorf("%s delivered at %v, before its due %v", id, d.at, due[id])
			}
		}
		if len(ds) > 1 && (ds[0].sub != victim.idx || len(ds) > 2) {
			t.Errorf("%s delivered %d times (first by sub %d, not the one killed)", id, len(ds), ds[0].sub)
		}
	}
	testenv.Figure(t, "scenario=concurrency-cap subs=4x16 cap=10 handler_ms=200 most_running=%d starts_per_s=%.1f (of 50) whole_after_kill9_s=%.1f lost=0",
		most, thr, whole.Sub(killedAt).Seconds())
	for _, s := range subs {
		if s != victim {
			if code := s.stop(t, 20*time.Second); code != 0 {
				t.Errorf("sub %d exited %d\nstderr: %s", s.idx, code, s.stderr)
			}
		}
	}
}

// TestRateRaisedFromHourly: a "delayq sub" held by a rate limit of 1/h
// follows "delayq limits --rate 1000/s" within a second, without a
// restart: the 20 messages the old rate held back are all delivered, none
// early, none twice.
func TestRateRaisedFromHourly(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.raise"
	l := newLedger()
	mustCLI(t, `{"id":"first","body":"b"}`+"\n", "send", "--stdin", "--addr", addr, "--topic", topic)
	l.expect("first", []byte("b"), time.Now().Add(-time.Minute))
	mustCLI(t, "", "limits", "--addr", addr, "--topic", topic, "--rate", "1/h")
	subs := startSubs(t, l, 1, addr, topic)
	// The burst of 1/h (one start) goes to the first message.
	waitFor(t, 10*time.Second, func() bool { return len(l.deliveries("first")) == 1 }, "the first message delivered")
	const N = 20
	t0 := sendDueNow(t, l, addr, topic, "h", N)
	time.Sleep(time.Second)
	if n := startsWithin(l, t0, time.Now()); n != 0 {
		t.Fatalf("%d of %d messages started within 1 s under 1/h after its burst was spent", n, N)
	}
	mustCLI(t, "", "limits", "--addr", addr, "--topic", topic, "--rate", "1000/s")
	raised := time.Now()
	waitFor(t, 10*time.Second, func() bool { return len(l.missing()) == 0 }, "every message delivered; %d missing", len(l.missing()))
	var last time.Time
	for _, d := range l.snapshot() {
		last = maxTime(last, d.at)
	}
	took := last.Sub(raised)
	t.Logf("rate 1/h raised to 1000/s: the %d messages it held back delivered within %v of the command's return", N, took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("raised from 1/h to 1000/s, the last held message started %v after, want within 1 s", took)
	}
	time.Sleep(300 * time.Millisecond) // a second delivery would show by now
	checkOnceNotEarly(t, l)
	for _, s := range subs {
		if code := s.stop(t, 20*time.Second); code != 0 {
			t.Errorf("sub %d exited %d\nstderr: %s", s.idx, code, s.stderr)
		}
	}
}
