package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// The uniqueness window scenario ("make test has a fleet scenario:
// producers re-send acked ids within and after the window, and
// deliveries are counted"), through Twemproxy and through Codis.
const (
	uniqueIDs     = 200 // ids sent in each of the three rounds
	uniqueParts   = 4   // partitions of the topic
	uniqueSingles = 20  // of them, the last ids go by one "delayq send" process each
	// The windows: even ids carry their own (unique_for, --unique-for),
	// odd ids get the topic's default (unique-for --set). They differ,
	// so that the window a refusal reports tells which one applied.
	uniqueOwnWindow   = 12 * time.Second
	uniqueTopicWindow = 16 * time.Second
	uniqueDueIn       = time.Second            // each round's messages are due this long after it starts
	uniqueFreedLead   = 300 * time.Millisecond // "delayq get" of an id from this long before its window ends
	uniqueFreedPoll   = 100 * time.Millisecond // and again this long after each get that found it
	uniqueGetWorkers  = 8                      // "delayq get" processes at once while the windows end
	uniqueSweep       = 50 * time.Millisecond  // between two sweeps of the library's Get over the ids
)

// uniqueStdinBatches are the --batch of the "delayq send --stdin"
// producers, one process each: one message per call, a few, and all of
// its lines in one call.
var uniqueStdinBatches = []int{1, 7, 45, 500}

// TestUniqueFleet: through Twemproxy with 2 backends (and through Codis
// with 2 groups, when Codis can be had), 2 "delayq sub" processes
// consume a topic of 4 partitions with the default lease. 4 "delayq send
// --stdin" processes and 20 "delayq send" processes send 200 ids, half
// with a window of their own (12 s), half with the topic's default (16 s,
// "delayq unique-for --set"). Once every id's delivery is acked (done),
// the producers send every id again: all refused as delivered, with the
// window that applies, and nothing delivered. Once "delayq get" no
// longer finds an id (never before its ack + window on the test's
// clock), they send every id once more: all accepted and delivered, so
// each id is delivered exactly twice, never before its due.
func TestUniqueFleet(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	t.Run("twemproxy", func(t *testing.T) {
		t.Parallel()
		env := testenv.Start(t, testenv.Options{Backends: 2})
		rep := uniqueFleet(t, env.Proxy, "e2e.unique")
		if probs := env.ProxyLogProblems(); len(probs) > 0 {
			t.Errorf("nutcracker logged %d problems, first: %v", len(probs), probs[:min(5, len(probs))])
		}
		checkClientErr(t, env)
		rep.figure(t, "unique-fleet-twemproxy")
	})
	t.Run("codis", func(t *testing.T) {
		t.Parallel()
		c := testenv.StartCodis(t, testenv.CodisOptions{Groups: 2})
		rep := uniqueFleet(t, c.Proxies[0], "e2e.unique.codis")
		checkCodis(t, c, []int{0}, false)
		rep.figure(t, "unique-fleet-codis")
	})
}

// uniqueReport is what uniqueFleet counted.
type uniqueReport struct {
	ids, refused, acceptedAfter, deliveries, lost, extra, early int
	getRuns                                                     int           // "delayq get" runs while the windows ended
	margin                                                      time.Duration // the least time left in a window when round 2's send of it returned
	freedLate                                                   time.Duration // the latest "not found" after the window's end as reported
	took                                                        time.Duration
}

// figure logs the report, only when every check passed.
func (r uniqueReport) figure(t *testing.T, scenario string) {
	t.Helper()
	if t.Failed() {
		return
	}
	testenv.Figure(t, "scenario=%s ids=%d partitions=%d consumers=2 own_window_ms=%d topic_window_ms=%d refused_within=%d window_left_min_ms=%d accepted_after=%d deliveries=%d lost=%d duplicates=%d early=%d get_runs=%d freed_after_until_max_ms=%d took_s=%.1f",
		scenario, r.ids, uniqueParts, uniqueOwnWindow.Milliseconds(), uniqueTopicWindow.Milliseconds(), r.refused, r.margin.Milliseconds(), r.acceptedAfter,
		r.deliveries, r.lost, r.extra, r.early, r.getRuns, r.freedLate.Milliseconds(), r.took.Seconds())
}

// uniqueID is the id of message i, and uniqueWindow the window it gets.
func uniqueID(i int) string { return fmt.Sprintf("u-%03d", i) }

func uniqueWindow(i int) time.Duration {
	if i%2 == 0 {
		return uniqueOwnWindow
	}
	return uniqueTopicWindow
}

// uniqueBody is the body of id i in a round.
func uniqueBody(round string, i int) string { return round + " " + uniqueID(i) }

// uniqueOutcome is what a producer reported of one send of an id.
type uniqueOutcome struct {
	accepted bool
	line     string // its stdout line (accepted) or its error (refused)
	// finished and until, read from a refusal as delivered ("was
	// delivered at F; its id is taken until U").
	finished, until time.Time
	asDone          bool // the refusal reads so
	start, end      time.Time
}

// finishedRE reads a refusal of a send as delivered (store.FinishedError).
var finishedRE = regexp.MustCompile(`"([^"]+)" in topic (\S+) was delivered at (\S+); its id is taken until (\S+)$`)

// stdinRejectionRE reads a line "delayq send --stdin" writes on stderr
// for a line it rejected.
var stdinRejectionRE = regexp.MustCompile(`^line (\d+): id "([^"]*)": (.*)$`)

// runDelayq runs delayq with args to completion, as cli does, but
// returns what went wrong instead of failing a test: it runs on
// goroutines of its own.
func runDelayq(stdin string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := newCmd(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("delayq %s did not finish within %v\n%s", strings.Join(args, " "), cliTimeout, r)
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		return r, fmt.Errorf("run delayq %s: %v", strings.Join(args, " "), err)
	}
	return r, nil
}

// uniqueRun is one run of the scenario.
type uniqueRun struct {
	t     *testing.T
	addr  string
	topic string
	l     *ledger
}

// send sends every id once, due at at, bodies of round: ids below
// uniqueIDs-uniqueSingles by the "send --stdin" producers (id i by
// producer i % 4), the others by one "delayq send" process each, all at
// once. It returns what the producers reported of each id; it fails t
// on any output it cannot account for.
func (u *uniqueRun) send(round string, at time.Time) map[string]*uniqueOutcome {
	t := u.t
	t.Helper()
	type run struct {
		res        result
		err        error
		ids        []string // in line order
		single     bool     // one "delayq send", not "send --stdin"
		start, end time.Time
	}
	var runs []*run
	var wg sync.WaitGroup
	launch := func(r *run, stdin string, args ...string) {
		runs = append(runs, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.start = time.Now()
			r.res, r.err = runDelayq(stdin, args...)
			r.end = time.Now()
		}()
	}
	due := at.UTC().Format(time.RFC3339Nano)
	for k, batch := range uniqueStdinBatches {
		var in strings.Builder
		r := &run{}
		for i := k; i < uniqueIDs-uniqueSingles; i += len(uniqueStdinBatches) {
			line := struct {
				ID        string `json:"id"`
				Body      string `json:"body"`
				At        string `json:"at"`
				UniqueFor string `json:"unique_for,omitempty"`
			}{ID: uniqueID(i), Body: uniqueBody(round, i), At: due}
			if uniqueWindow(i) == uniqueOwnWindow {
				line.UniqueFor = uniqueOwnWindow.String()
			}
			js, err := json.Marshal(line)
			if err != nil {
				t.Fatal(err)
			}
			in.Write(js)
			in.WriteByte('\n')
			r.ids = append(r.ids, line.ID)
		}
		launch(r, in.String(), "send", "--stdin", "--addr", u.addr, "--topic", u.topic, "--batch", fmt.Sprint(batch))
	}
	for i := uniqueIDs - uniqueSingles; i < uniqueIDs; i++ {
		args := []string{"send", "--addr", u.addr, "--topic", u.topic, "--id", uniqueID(i), "--body", uniqueBody(round, i), "--at", due}
		if uniqueWindow(i) == uniqueOwnWindow {
			args = append(args, "--unique-for", uniqueOwnWindow.String())
		}
		launch(&run{ids: []string{uniqueID(i)}, single: true}, "", args...)
	}
	wg.Wait()

	out := map[string]*uniqueOutcome{}
	record := func(r *run, id string, o *uniqueOutcome) {
		if out[id] != nil {
			t.Errorf("%s: two outcomes of %s: %q and %q", round, id, out[id].line, o.line)
			return
		}
		o.start, o.end = r.start, r.end
		out[id] = o
	}
	refusal := func(id, text string) *uniqueOutcome {
		o := &uniqueOutcome{line: text}
		m := finishedRE.FindStringSubmatch(text)
		if m == nil || m[1] != id || m[2] != u.topic {
			return o
		}
		var err1, err2 error
		o.finished, err1 = time.Parse(time.RFC3339Nano, m[3])
		o.until, err2 = time.Parse(time.RFC3339Nano, m[4])
		o.asDone = err1 == nil && err2 == nil
		return o
	}
	for _, r := range runs {
		if r.err != nil {
			t.Errorf("%s: %v", round, r.err)
			continue
		}
		if r.single {
			id := r.ids[0]
			switch {
			case r.res.code == 0 && strings.TrimSpace(r.res.stdout) == id:
				record(r, id, &uniqueOutcome{accepted: true, line: strings.TrimSpace(r.res.stdout)})
			case r.res.code == 1 && r.res.stdout == "":
				record(r, id, refusal(id, strings.TrimSpace(r.res.stderr)))
			default:
				t.Errorf("%s: send of %s: %s", round, id, r.res)
			}
			continue
		}
		accepted, refused := 0, 0
		for _, ln := range lines(r.res.stdout) {
			f := strings.Fields(ln)
			if len(f) != 1 || !sliceHas(r.ids, f[0]) {
				t.Errorf("%s: send --stdin printed %q, want an id it was sent, created", round, ln)
				continue
			}
			accepted++
			record(r, f[0], &uniqueOutcome{accepted: true, line: ln})
		}
		for _, ln := range lines(r.res.stderr) {
			m := stdinRejectionRE.FindStringSubmatch(ln)
			if m == nil {
				continue // the summary, checked below
			}
			if !sliceHas(r.ids, m[2]) {
				t.Errorf("%s: send --stdin rejected an id it was not sent: %q", round, ln)
				continue
			}
			refused++
			record(r, m[2], refusal(m[2], m[3]))
		}
		switch {
		case accepted+refused != len(r.ids):
			t.Errorf("%s: send --stdin of %d lines reported %d accepted and %d refused\n%s", round, len(r.ids), accepted, refused, r.res)
		case refused == 0 && r.res.code != 0:
			t.Errorf("%s: send --stdin accepted every line but exited %d\n%s", round, r.res.code, r.res)
		case refused > 0 && (r.res.code != 1 || !strings.Contains(r.res.stderr, fmt.Sprintf("%d of %d messages rejected", refused, len(r.ids)))):
			t.Errorf("%s: send --stdin refused %d of %d lines: want exit 1 and a summary that says so\n%s", round, refused, len(r.ids), r.res)
		}
	}
	for i := range uniqueIDs {
		if out[uniqueID(i)] == nil {
			t.Errorf("%s: no producer reported what became of %s", round, uniqueID(i))
		}
	}
	return out
}

// sliceHas says whether ss holds s.
func sliceHas(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// uniqueFleet runs the scenario through the proxy at addr and returns its
// counts. It fails t where the product does not do what it says.
func uniqueFleet(t *testing.T, addr, topic string) uniqueReport {
	t.Helper()
	began := time.Now()
	ctx := t.Context()
	l := newLedger()
	u := &uniqueRun{t: t, addr: addr, topic: topic, l: l}
	c := faultClient(t, addr, uniqueParts)

	// Two consumers, which create the topic on 4 partitions, sharing them.
	var subs []*sub
	var owners []string
	for i := range 2 {
		id := fmt.Sprintf("uq-%d", i)
		owners = append(owners, id)
		subs = append(subs, startSub(t, l, i, "--addr", addr, "--topic", topic, "--id", id,
			"--partitions", fmt.Sprint(uniqueParts), "--concurrency", "32", "--ends"))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "a fair share", func(o ownership) bool {
		return o.ownedFairlyBy(uniqueParts, owners...)
	})
	alive := func() {
		t.Helper()
		for _, s := range subs {
			if s.exited() {
				t.Fatalf("sub %d exited: exit %d\nstderr: %s", s.idx, s.exitCode(), clip(s.stderr.String()))
			}
		}
	}
	// The topic's default window, for the odd ids (which set none).
	want := topic + ": " + uniqueTopicWindow.String()
	if r := mustCLI(t, "", "unique-for", "--addr", addr, "--topic", topic, "--set", uniqueTopicWindow.String()); strings.TrimSpace(r.stdout) != want {
		t.Errorf("unique-for --set printed %q, want %q", r.stdout, want)
	}
	if r := mustCLI(t, "", "unique-for", "--addr", addr, "--topic", topic); strings.TrimSpace(r.stdout) != want {
		t.Errorf("unique-for printed %q, want %q", r.stdout, want)
	}
	if got, err := c.Inspector().UniqueFor(ctx, topic); err != nil || got != uniqueTopicWindow {
		t.Fatalf("the topic's window after unique-for --set %v: %v, %v", uniqueTopicWindow, got, err)
	}

	// Round 1: every id is new.
	at1 := time.Now().Add(uniqueDueIn)
	for id, o := range u.send("round 1", at1) {
		if !o.accepted {
			t.Errorf("round 1: %s refused: %s", id, o.line)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Each id delivered, its handler ended (the sub's end line), and
	// acked: the library's Get reports it done. Every sweep looks at
	// every id not seen done yet: one stopped at the first id still
	// running could come back to a later one after its window ended,
	// when acks spread over more than a window.
	acked := map[string]*delayq.Info{}
	var lastGetErr error
	if !poll(30*time.Second, func() bool {
		alive()
		ends := u.endsByID()
		all := true
		for i := range uniqueIDs {
			id := uniqueID(i)
			if acked[id] != nil {
				continue
			}
			if len(ends[id]) == 0 {
				all = false
				continue
			}
			in, err := c.Get(ctx, topic, id)
			if err != nil || in.State != delayq.StateDone {
				lastGetErr = fmt.Errorf("%s: %+v, %v", id, in, err)
				all = false
				continue
			}
			acked[id] = in
		}
		return all
	}) {
		t.Fatalf("after 30 s, %d of %d ids delivered, %d acked (last get: %v); missing %v", len(u.deliveredIDs()), uniqueIDs, len(acked), lastGetErr, u.notDelivered())
	}
	ended := map[string]time.Time{} // when each id's handler returned, on this machine's clock
	for id, es := range u.endsByID() {
		if len(es) != 1 {
			t.Errorf("%s: %d handler ends after round 1, want 1", id, len(es))
			continue
		}
		ended[id] = es[0].at
	}
	for id, in := range acked {
		i := idIndex(id)
		switch {
		case in.UniqueUntil.Sub(in.Finished) != uniqueWindow(i):
			t.Errorf("%s: done %v to %v, a window of %v, want %v", id, in.Finished, in.UniqueUntil, in.UniqueUntil.Sub(in.Finished), uniqueWindow(i))
		case in.Finished.Before(ended[id].Truncate(time.Millisecond)):
			t.Errorf("%s: acked at %v, before its handler ended at %v", id, in.Finished, ended[id])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("round 1: %d ids sent, delivered and acked %v after their due", uniqueIDs, time.Since(at1).Round(time.Millisecond))

	// Round 2, within the windows: every send refused as delivered, with
	// the window that applies; nothing is delivered again.
	at2 := time.Now().Add(uniqueDueIn)
	refused := 0
	margin := time.Hour
	for id, o := range u.send("round 2", at2) {
		in := acked[id]
		margin = min(margin, in.UniqueUntil.Sub(o.end))
		switch {
		case o.accepted && o.start.Before(in.UniqueUntil):
			t.Errorf("round 2: %s accepted (%q), sent at %v, within its window (acked %v, until %v)", id, o.line, o.start, in.Finished, in.UniqueUntil)
		case o.accepted:
			t.Errorf("round 2: %s accepted, sent at %v: the test came after its window ended at %v (acked %v): too slow a machine?", id, o.start, in.UniqueUntil, in.Finished)
		case !o.asDone:
			t.Errorf("round 2: %s refused, but not as delivered: %q", id, o.line)
		case !o.finished.Equal(in.Finished) || !o.until.Equal(in.UniqueUntil):
			t.Errorf("round 2: %s refused as delivered at %v, taken until %v; Get said %v and %v", id, o.finished, o.until, in.Finished, in.UniqueUntil)
		default:
			refused++
		}
	}
	if refused != uniqueIDs {
		t.Errorf("round 2: %d of %d sends within the window refused as delivered, want all", refused, uniqueIDs)
	}
	// "delayq get" says so too, for a sample (the windows are running):
	// of the ids with a second of their window left at least, on a slow
	// machine where the first windows may end by now.
	sampled := 0
	for i := 0; i < uniqueIDs; i += 10 {
		id := uniqueID(i)
		if time.Until(acked[id].UniqueUntil) < time.Second {
			continue
		}
		sampled++
		r := mustCLI(t, "", "get", "--addr", addr, "--topic", topic, "--id", id)
		g := decodeUniqueGet(t, r.stdout)
		if g.State != "done" || g.Finished != formatMS(acked[id].Finished) || g.UniqueUntil != formatMS(acked[id].UniqueUntil) || g.ID != id || g.Topic != topic {
			t.Errorf("get of %s within its window: %s, want state done, finished %s, unique_until %s", id, r.stdout, formatMS(acked[id].Finished), formatMS(acked[id].UniqueUntil))
		}
	}
	if sampled < uniqueIDs/20 {
		t.Errorf("get within the windows: %d of %d sampled ids had a second of their window left: too slow a machine for windows of %v and %v?", sampled, uniqueIDs/10, uniqueOwnWindow, uniqueTopicWindow)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("round 2: %d of %d sends refused as delivered, the least time left in a window %v; %d ids got", refused, uniqueIDs, margin.Round(time.Millisecond), sampled)

	// The windows end: "delayq get" of each id, from shortly before its
	// end until it is not found, and the library's Get of every id every
	// uniqueSweep meanwhile. Neither may find an id gone before its ack
	// (after its handler's end) + its window, on this machine's clock.
	var swept map[string]*freedAt
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		swept = u.sweepFreed(ctx, c, acked)
	}()
	freed := u.pollFreed(acked)
	<-sweepDone
	var freedLate time.Duration
	freedEarly := time.Hour
	getRuns, doneNearEnd := 0, 0 // doneNearEnd: ids the library found done in the last 200 ms of their window
	check := func(how string, id string, i int, f *freedAt) {
		t.Helper()
		if f.err != nil {
			t.Errorf("%s: %s: %v", id, how, f.err)
			return
		}
		// The store keeps the ack's time in ms, truncated: the window may
		// end up to a millisecond before the ack + window (clockSlack).
		if earliest := ended[id].Add(uniqueWindow(i) - clockSlack); f.end.Before(earliest) {
			t.Errorf("%s: %s: not found at %v (asked at %v), before its handler's end %v + its window %v (last found done when asked at %v)",
				id, how, f.end.Format(time.RFC3339Nano), f.start.Format(time.RFC3339Nano), ended[id].Format(time.RFC3339Nano), uniqueWindow(i),
				f.lastDone.Format(time.RFC3339Nano))
		}
	}
	for i := range uniqueIDs {
		id := uniqueID(i)
		f, g := freed[id], swept[id]
		getRuns += f.polls
		check(`"delayq get"`, id, i, f)
		check("the library's Get", id, i, g)
		if f.err == nil {
			freedLate = max(freedLate, f.end.Sub(acked[id].UniqueUntil))
			freedEarly = min(freedEarly, f.end.Sub(acked[id].UniqueUntil))
		}
		if g.err == nil && g.lastDone.After(ended[id].Add(uniqueWindow(i)-200*time.Millisecond)) {
			doneNearEnd++
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := l.count(); n != uniqueIDs {
		t.Fatalf("%d deliveries before round 3, want %d: a refused send was delivered", n, uniqueIDs)
	}
	t.Logf("windows: every id not found by \"delayq get\" %v to %v after its end (%d gets), nor by the library's Get (%d ids found done in the last 200 ms before their handler's end + window), none before",
		freedEarly.Round(time.Millisecond), freedLate.Round(time.Millisecond), getRuns, doneNearEnd)

	// Round 3, after the windows: every id accepted and delivered again.
	at3 := time.Now().Add(uniqueDueIn)
	sent3 := time.Now()
	acceptedAfter := 0
	var refused3 []string
	for id, o := range u.send("round 3", at3) {
		if o.accepted {
			acceptedAfter++
			continue
		}
		refused3 = append(refused3, id)
		t.Errorf("round 3: %s refused at %s-%s, after \"delayq get\" no longer found it at %s: %s", id,
			o.start.Format("15:04:05.000"), o.end.Format("15:04:05.000"), freed[id].end.Format("15:04:05.000"), o.line)
	}
	if len(refused3) > 0 {
		sort.Strings(refused3)
		r := cli(t, "", "get", "--addr", addr, "--topic", topic, "--id", refused3[0])
		t.Errorf("round 3: %d of %d ids refused after their window; get of %s now: exit %d %s%s", len(refused3), uniqueIDs, refused3[0], r.code, r.stdout, r.stderr)
	}
	// Each id accepted delivered twice and acked again (done anew): no
	// delivery of it is pending.
	again := map[string]bool{}
	pending := func() (n int) {
		for i := range uniqueIDs {
			id := uniqueID(i)
			if again[id] || sliceHas(refused3, id) {
				continue
			}
			if len(l.deliveries(id)) < 2 {
				n++
				continue
			}
			in, err := c.Get(ctx, topic, id)
			if err != nil || in.State != delayq.StateDone || in.Finished.Before(sent3.Truncate(time.Millisecond)) {
				n++
				continue
			}
			again[id] = true
		}
		return n
	}
	if !poll(30*time.Second, func() bool { alive(); return pending() == 0 }) {
		t.Errorf("after 30 s, %d of the %d ids accepted in round 3 not delivered and acked again", pending(), acceptedAfter)
	}
	stopAllSubs(t, subs)

	// The ledger: every id delivered exactly twice, round 1's body then
	// round 3's, none before its due.
	rep := uniqueReport{ids: uniqueIDs, refused: refused, acceptedAfter: acceptedAfter, freedLate: freedLate, getRuns: getRuns, margin: margin}
	l.mu.Lock()
	for _, e := range l.errs {
		t.Error(e)
	}
	l.mu.Unlock()
	ats := map[string]time.Time{"round 1": at1, "round 3": at3}
	for _, d := range l.snapshot() {
		rep.deliveries++
		i := idIndex(d.ID)
		if i < 0 || d.Topic != topic {
			t.Errorf("delivery of unknown id %q of topic %q (sub %d)", d.ID, d.Topic, d.sub)
			continue
		}
		round := strings.TrimSuffix(string(d.body), " "+d.ID)
		at, ok := ats[round]
		if !ok || string(d.body) != uniqueBody(round, i) {
			t.Errorf("%s: delivered with body %q, want round 1's or round 3's", d.ID, d.body)
			continue
		}
		if d.at.Before(d.due) || d.due.Before(at) {
			rep.early++
			t.Errorf("%s: %s delivered early by sub %d: at %s, due %s, sent due %s",
				d.ID, round, d.sub, d.DeliveredAt, d.Due, at.UTC().Format(time.RFC3339Nano))
		}
	}
	for i := range uniqueIDs {
		id := uniqueID(i)
		ds := l.deliveries(id)
		sort.Slice(ds, func(a, b int) bool { return ds[a].at.Before(ds[b].at) })
		rep.lost += max(0, 2-len(ds))
		rep.extra += max(0, len(ds)-2)
		var bodies []string
		for _, d := range ds {
			bodies = append(bodies, string(d.body))
		}
		want := []string{uniqueBody("round 1", i), uniqueBody("round 3", i)}
		if sliceHas(refused3, id) && len(ds) == 1 {
			continue // its refusal is reported above; it counts as lost
		}
		if strings.Join(bodies, "|") != strings.Join(want, "|") {
			t.Errorf("%s: delivered %q, want %q: %s", id, bodies, want, describe(ds))
		}
	}
	if rep.lost > 0 || rep.extra > 0 {
		t.Errorf("%d deliveries of %d ids, 2 each wanted: %d missing, %d extra", rep.deliveries, uniqueIDs, rep.lost, rep.extra)
	}
	rep.took = time.Since(began)
	return rep
}

// idIndex is i of uniqueID(i), -1 for another id.
func idIndex(id string) int {
	var i int
	if n, err := fmt.Sscanf(id, "u-%03d", &i); n != 1 || err != nil || uniqueID(i) != id || i >= uniqueIDs {
		return -1
	}
	return i
}

// endsByID returns the handler ends the subs printed, by id.
func (u *uniqueRun) endsByID() map[string][]end {
	u.l.mu.Lock()
	defer u.l.mu.Unlock()
	out := map[string][]end{}
	for _, e := range u.l.ends {
		out[e.Ended] = append(out[e.Ended], e)
	}
	return out
}

// deliveredIDs returns the ids delivered so far.
func (u *uniqueRun) deliveredIDs() map[string]bool {
	out := map[string]bool{}
	for _, d := range u.l.snapshot() {
		out[d.ID] = true
	}
	return out
}

// notDelivered returns up to 5 ids not delivered yet.
func (u *uniqueRun) notDelivered() []string {
	got := u.deliveredIDs()
	var out []string
	for i := 0; i < uniqueIDs && len(out) < 5; i++ {
		if !got[uniqueID(i)] {
			out = append(out, uniqueID(i))
		}
	}
	return out
}

// uniqueGet is the part of "delayq get"'s JSON a done message has.
type uniqueGet struct {
	Topic       string `json:"topic"`
	ID          string `json:"id"`
	State       string `json:"state"`
	Finished    string `json:"finished"`
	UniqueUntil string `json:"unique_until"`
}

func decodeUniqueGet(t *testing.T, s string) uniqueGet {
	t.Helper()
	var g uniqueGet
	if err := json.Unmarshal([]byte(s), &g); err != nil {
		t.Fatalf("decode get: %v\n%s", err, s)
	}
	return g
}

// formatMS is t as the wire writes it: RFC 3339, UTC, milliseconds.
func formatMS(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// freedAt is when a get first did not find an id: it ran from start to
// end.
type freedAt struct {
	start, end time.Time
	lastDone   time.Time // when the last get that found it done began
	polls      int
	err        error
}

// pollFreed runs "delayq get" of every id of acked, uniqueGetWorkers at
// a time, from uniqueFreedLead before the end of its window as Get
// reported it, every uniqueFreedPoll until it is not found, and returns
// when that was. An id still found 10 s after its window is an error.
func (u *uniqueRun) pollFreed(acked map[string]*delayq.Info) map[string]*freedAt {
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return acked[ids[a]].UniqueUntil.Before(acked[ids[b]].UniqueUntil) })
	out := make(map[string]*freedAt, len(ids))
	for _, id := range ids {
		out[id] = &freedAt{}
	}
	next := make(chan string)
	var wg sync.WaitGroup
	for range uniqueGetWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				until := acked[id].UniqueUntil
				f := out[id]
				time.Sleep(time.Until(until.Add(-uniqueFreedLead)))
				for {
					f.polls++
					start := time.Now()
					r, err := runDelayq("", "get", "--addr", u.addr, "--topic", u.topic, "--id", id)
					end := time.Now()
					if err != nil {
						f.err = err
						break
					}
					if r.code == 1 && strings.Contains(r.stderr, "not found") {
						f.start, f.end = start, end
						break
					}
					var g uniqueGet
					if r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil || g.State != "done" {
						f.err = fmt.Errorf("get near the end of the window: want done or not found, got %s", r)
						break
					}
					f.lastDone = start
					if time.Since(until) > 10*time.Second {
						f.err = fmt.Errorf("still done at %v, 10 s after its window ended at %v", end, until)
						break
					}
					time.Sleep(uniqueFreedPoll)
				}
			}
		}()
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	return out
}

// sweepFreed calls the library's Get of every id of acked, every
// uniqueSweep, until it is not found, and returns for each id the start
// of the last call that found it done and the end of the first that did
// not find it. An id still found 10 s after its window is an error.
func (u *uniqueRun) sweepFreed(ctx context.Context, c *delayq.Client, acked map[string]*delayq.Info) map[string]*freedAt {
	out := make(map[string]*freedAt, len(acked))
	left := make([]string, 0, len(acked))
	for id := range acked {
		out[id] = &freedAt{}
		left = append(left, id)
	}
	for len(left) > 0 {
		sweep := time.Now()
		var still []string
		for _, id := range left {
			f := out[id]
			f.polls++
			start := time.Now()
			in, err := c.Get(ctx, u.topic, id)
			end := time.Now()
			switch {
			case errors.Is(err, delayq.ErrNotFound):
				f.start, f.end = start, end
				continue
			case err != nil:
				f.err = fmt.Errorf("get near the end of the window: %v", err)
				continue
			case in.State != delayq.StateDone:
				f.err = fmt.Errorf("get near the end of the window: state %s, want done or not found", in.State)
				continue
			case time.Since(acked[id].UniqueUntil) > 10*time.Second:
				f.err = fmt.Errorf("still done at %v, 10 s after its window ended at %v", end, acked[id].UniqueUntil)
				continue
			}
			f.lastDone = start
			still = append(still, id)
		}
		left = still
		time.Sleep(time.Until(sweep.Add(uniqueSweep)))
	}
	return out
}
