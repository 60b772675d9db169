package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/wire"
)

// pausedUntil reads the end a "delayq pause" printed ("T: paused until X").
func pausedUntil(t *testing.T, r result) time.Time {
	t.Helper()
	_, s, ok := strings.Cut(strings.TrimSpace(r.stdout), " paused until ")
	if !ok {
		t.Fatalf("pause printed %q, want \"T: paused until TIME\"", r.stdout)
	}
	return mustTime(t, s)
}

// TestPauseFleet: through Twemproxy, with two "delayq sub" processes, a
// topic paused for 5 s while 1000 messages fall due starts none of them
// during the pause and delivers each once after it, none before its due;
// a pause --until ends by itself; stats and partitions print the pause.
func TestPauseFleet(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.pause"
	l := newLedger()
	subArgs := []string{"--addr", addr, "--topic", topic, "--concurrency", "32"}
	subs := []*sub{startSub(t, l, 0, subArgs...), startSub(t, l, 1, subArgs...)}
	waitFor(t, 20*time.Second, func() bool {
		ts, _ := tryStats(t, addr, topic)
		owned, who := ts.owners()
		return owned == 16 && len(who) == 2 || subs[0].exited() || subs[1].exited()
	}, "both subs share the partitions")
	for _, s := range subs {
		if s.exited() {
			t.Fatalf("sub %d exited: %d\nstderr: %s", s.idx, s.exitCode(), s.stderr)
		}
	}

	// The subs follow a pause within a second: the messages are sent a
	// second after it began, all due within the next 3 s.
	pauseStart := time.Now()
	end := pausedUntil(t, mustCLI(t, "", "pause", "--addr", addr, "--topic", topic, "--for", "5s"))
	if d := end.Sub(pauseStart); d < 5*time.Second || d > 5*time.Second+time.Second {
		t.Fatalf("pause --for 5s ends %v after it was asked", d)
	}
	if r := mustCLI(t, "", "stats", "--addr", addr, "--topic", topic); !strings.Contains(r.stdout, "paused until "+wire.Time(end)) {
		t.Errorf("stats of a paused topic does not print the pause's end %s:\n%s", wire.Time(end), r.stdout)
	}
	if r := mustCLI(t, "", "partitions", "--addr", addr, "--topic", topic); !strings.Contains(r.stdout, "paused until "+wire.Time(end)) {
		t.Errorf("partitions of a paused topic does not print the pause's end:\n%s", r.stdout)
	}
	time.Sleep(time.Until(pauseStart.Add(time.Second)))
	const N = 1000
	var in strings.Builder
	sendStart := time.Now()
	for i := range N {
		id, delay := fmt.Sprintf("p-%04d", i), time.Duration(i%31)*100*time.Millisecond
		fmt.Fprintf(&in, `{"id":%q,"body":"b%d","delay_ms":%d}`+"\n", id, i, delay.Milliseconds())
		l.expect(id, fmt.Appendf(nil, "b%d", i), sendStart.Add(delay-clockSlack))
	}
	mustCLI(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	t.Logf("sent %d messages due within 3 s, %v into the pause", N, time.Since(pauseStart).Round(time.Millisecond))
	waitFor(t, 30*time.Second, func() bool { return len(l.missing()) == 0 }, "every message delivered; %d missing", len(l.missing()))
	time.Sleep(500 * time.Millisecond) // a second delivery would show by now
	checkPaused(t, l, end)
	var last time.Time
	during, dups := 0, 0
	for _, d := range l.snapshot() {
		last = maxTime(last, d.at)
		if d.at.Before(end) {
			during++
		}
	}
	for id := range l.dues() {
		dups += max(0, len(l.deliveries(id))-1)
	}
	testenv.Figure(t, "scenario=pause-5s subs=2 messages=%d started_during_pause=%d lost=%d duplicates=%d last_after_end_ms=%d",
		N, during, len(l.missing()), dups, last.Sub(end).Milliseconds())

	// A pause --until ends by itself.
	until := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	if got := pausedUntil(t, mustCLI(t, "", "pause", "--addr", addr, "--topic", topic, "--until", until.Format(time.RFC3339Nano))); !got.Equal(until) {
		t.Fatalf("pause --until %v printed %v", until, got)
	}
	time.Sleep(time.Second)
	l2 := l.count()
	in.Reset()
	for i := range 100 {
		id := fmt.Sprintf("u-%03d", i)
		fmt.Fprintf(&in, `{"id":%q,"body":"u"}`+"\n", id)
		l.expect(id, []byte("u"), time.Now())
	}
	mustCLI(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	if time.Now().After(until) {
		t.Fatalf("sending 100 messages took past the pause's end %v: the test means nothing", until)
	}
	waitFor(t, 10*time.Second, func() bool { return len(l.missing()) == 0 }, "the messages sent during the pause --until delivered; %d missing", len(l.missing()))
	late := time.Duration(0)
	for _, d := range l.snapshot()[l2:] {
		if d.at.Before(until) {
			t.Errorf("%s started at %v, before the pause's end %v", d.ID, d.at, until)
		}
		late = max(late, d.at.Sub(until))
	}
	t.Logf("pause --until: delivered at most %v after its end", late.Round(time.Millisecond))
	if late > 2*time.Second {
		t.Errorf("pause --until: a delivery %v after its end", late)
	}
	if r := mustCLI(t, "", "resume", "--addr", addr, "--topic", topic); strings.TrimSpace(r.stdout) != topic+": resumed" {
		t.Errorf("resume printed %q", r.stdout)
	}
	r := cli(t, "", "pause", "--addr", addr, "--topic", "e2e.ghost")
	wantExit(t, r, 1, `topic "e2e.ghost" does not exist`)
	for _, s := range subs {
		if code := s.stop(t, 20*time.Second); code != 0 {
			t.Errorf("sub %d exited %d\nstderr: %s", s.idx, code, s.stderr)
		}
	}
}

// checkPaused checks the deliveries of l: each message once, none before
// its due, none before the pause's end.
func checkPaused(t *testing.T, l *ledger, end time.Time) {
	t.Helper()
	checkOnceNotEarly(t, l)
	for id := range l.dues() {
		ds := l.deliveries(id)
		if len(ds) != 1 {
			continue // reported above
		}
		if ds[0].at.Before(end) {
			t.Errorf("%s started at %v, during the pause (ends %v)", id, ds[0].at, end)
		}
		if ds[0].Attempt != 1 {
			t.Errorf("%s: attempt %d, want 1", id, ds[0].Attempt)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
