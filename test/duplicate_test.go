package test

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// event is one send of an id by a producer process, which stored it
// between at (the line written to the producer) and done (its reply
// read): each producer gets its next line after its reply.
type event struct {
	id       string
	at, done time.Time
	body     string
}

// TestDebounceFleet and TestReplaceFleet: through Twemproxy, 4 "delayq
// send --stdin" processes send 20,000 events for 200 ids over 10 s
// (random ids, random gaps), each due 2 s after it, with --on-duplicate
// debounce --max-wait 6s (or replace), to 2 "delayq sub" processes.
func TestDebounceFleet(t *testing.T) { policyFleet(t, "debounce") }
func TestReplaceFleet(t *testing.T)  { policyFleet(t, "replace") }

func policyFleet(t *testing.T, policy string) {
	t.Parallel()
	const (
		producers, events, ids = 4, 20000, 200
		span, delay, maxWait   = 10 * time.Second, 2 * time.Second, 6 * time.Second
		slack                  = 100 * time.Millisecond // an event's line reaches Redis within it
	)
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e."+policy
	mustCLI(t, `{"id":"first","body":"b"}`+"\n", "send", "--stdin", "--addr", addr, "--topic", topic)
	l := newLedger()
	subs := startSubs(t, l, 2, addr, topic, "--concurrency", "32", "--ends")

	var mu sync.Mutex
	var sent []event
	var wg sync.WaitGroup
	start := time.Now()
	for pi := range producers {
		args := []string{"send", "--stdin", "--batch", "1", "--addr", addr, "--topic", topic, "--on-duplicate", policy}
		if policy == "debounce" {
			args = append(args, "--max-wait", maxWait.String())
		}
		cmd := newCmd(t.Context(), args...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &testenv.Buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		outcomes := map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(pi), 7))
			replies := bufio.NewScanner(stdout)
			for seq := range events / producers {
				// Random gaps around span / (events / producers).
				next := start.Add(time.Duration(float64(seq) * float64(span) / float64(events/producers) * (0.5 + rng.Float64())))
				time.Sleep(time.Until(next))
				id := fmt.Sprintf("k-%03d", rng.IntN(ids))
				now := time.Now()
				body := fmt.Sprintf("%d-%d-%d", pi, seq, now.UnixNano())
				if _, err := fmt.Fprintf(stdin, `{"id":%q,"body":%q,"delay_ms":%d}`+"\n", id, body, delay.Milliseconds()); err != nil {
					t.Errorf("producer %d: %v\nstderr: %s", pi, err, stderr)
					return
				}
				if !replies.Scan() {
					t.Errorf("producer %d: no reply to event %d\nstderr: %s", pi, seq, stderr)
					return
				}
				done := time.Now()
				switch f := strings.Fields(replies.Text()); {
				case len(f) == 1:
					outcomes["created"]++
				case len(f) > 1:
					outcomes[strings.TrimSuffix(f[1], ",")]++
				}
				mu.Lock()
				sent = append(sent, event{id, now, done, body})
				mu.Unlock()
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("producer %d: %v\nstderr: %s", pi, err, stderr)
			}
			t.Logf("producer %d: %v", pi, outcomes)
		}()
	}
	wg.Wait()
	sendSpan := time.Since(start)
	mu.Lock()
	byID := map[string][]event{}
	for _, e := range sent {
		byID[e.id] = append(byID[e.id], e)
	}
	mu.Unlock()
	for _, es := range byID {
		sort.Slice(es, func(i, j int) bool { return es[i].at.Before(es[j].at) })
	}
	// The last event of an id: the last stored is one whose reply came
	// after the write of the last written.
	lastOf := func(id string) string { es := byID[id]; return es[len(es)-1].body }
	doneOf := map[string]time.Time{}
	for _, es := range byID {
		for _, e := range es {
			doneOf[e.body] = e.done
		}
	}
	eventAt := func(body []byte) (time.Time, bool) {
		f := strings.Split(string(body), "-")
		if len(f) != 3 {
			return time.Time{}, false
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		return time.Unix(0, ns), err == nil
	}
	// Every id's last event is delivered (every other event is then
	// delivered or superseded by it); two producers' events a few ms
	// apart may reach the server in either order.
	missing := func() []string {
		latest := map[string]time.Time{} // the latest reply of an event delivered
		for _, d := range l.snapshot() {
			if done := doneOf[string(d.body)]; done.After(latest[d.ID]) {
				latest[d.ID] = done
			}
		}
		var out []string
		for id, es := range byID {
			if latest[id].Before(es[len(es)-1].at) {
				out = append(out, id)
			}
		}
		return out
	}
	if !waitUntil(60*time.Second, func() bool { return len(missing()) == 0 }) {
		m := missing()
		id := m[0]
		r := cli(t, "", "get", "--addr", addr, "--topic", topic, "--id", id)
		t.Fatalf("the last event of %d ids not delivered, among them %s (last event %s; deliveries %v):\n%s%s",
			len(m), id, lastOf(id), deliveriesOf(l, id), r.stdout, r.stderr)
	}
	time.Sleep(time.Second) // a delivery more would show by now
	for _, s := range subs {
		if code := s.stop(t, 20*time.Second); code != 0 {
			t.Errorf("sub %d exited %d\nstderr: %s", s.idx, code, s.stderr)
		}
	}

	deliveries := map[string][]delivery{}
	for _, d := range l.snapshot() {
		if d.ID != "first" {
			deliveries[d.ID] = append(deliveries[d.ID], d)
		}
	}
	// The end of a delivery: the first end line of its process, id and
	// attempt after its start.
	ends := map[string][]time.Time{}
	l.mu.Lock()
	for _, e := range l.ends {
		k := fmt.Sprintf("%d %s %d", e.sub, e.Ended, e.Attempt)
		ends[k] = append(ends[k], e.at)
	}
	l.mu.Unlock()
	endOf := func(d delivery) (time.Time, bool) {
		for _, at := range ends[fmt.Sprintf("%d %s %d", d.sub, d.ID, d.Attempt)] {
			if !at.Before(d.at) {
				return at, true
			}
		}
		return time.Time{}, false
	}
	total, worst, early, overlap, tooMany, quietGaps := 0, 0, 0, 0, 0, 0
	for id, es := range byID {
		ds := deliveries[id]
		sort.Slice(ds, func(i, j int) bool { return ds[i].at.Before(ds[j].at) })
		total += len(ds)
		worst = max(worst, len(ds))
		// At most ceil(span / max wait) + 1 deliveries, when every window
		// closes by its max wait; a quiet gap of an id (no event for the
		// delay: the producers fall behind their 10 s on a loaded
		// machine) closes one early, and counts one more.
		spanID, quiet := es[len(es)-1].at.Sub(es[0].at), 0
		for i := 1; i < len(es); i++ {
			if es[i].done.Sub(es[i-1].at) >= delay-slack {
				quiet++
			}
		}
		quietGaps += quiet
		if limit := int(math.Ceil(spanID.Seconds()/maxWait.Seconds())) + 1 + quiet; len(ds) > limit {
			tooMany++
			t.Errorf("%s: %d deliveries of events over %v with %d quiet gaps, want at most %d", id, len(ds), spanID, quiet, limit)
		}
		prev := time.Time{}
		for i, d := range ds {
			at, ok := eventAt(d.body)
			if !ok {
				t.Errorf("%s: delivered body %q is no event", id, d.body)
				continue
			}
			// No delivery earlier than min(its event + delay, the first
			// event of its window + max wait).
			bound := at.Add(delay)
			if policy == "debounce" {
				// The window opened with the first event after the
				// previous delivery started (the handler prints a little
				// after the start: events that close to it may be in
				// either window, and count in the new one).
				for _, e := range es {
					if e.done.After(prev.Add(-slack)) {
						if w := e.at.Add(maxWait); w.Before(bound) {
							bound = w
						}
						break
					}
				}
			}
			if d.at.Before(bound.Add(-slack)) {
				early++
				t.Errorf("%s: delivery %d at %v, before %v (its event at %v)", id, i, d.at.Format(time.RFC3339Nano), bound.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
			}
			// Never two deliveries of one id at once.
			if i > 0 {
				end, ok := endOf(ds[i-1])
				if ok && end.After(d.at) {
					overlap++
					t.Errorf("%s: delivery %d started at %v while the one before ran until %v", id, i, d.at, end)
				}
			}
			prev = d.at
		}
		if last := ds[len(ds)-1]; doneOf[string(last.body)].Before(es[len(es)-1].at) {
			t.Errorf("%s: last delivery carries %q, not its last event %q", id, last.body, lastOf(id))
		}
	}
	testenv.Figure(t, "scenario=%s producers=%d events=%d ids=%d sent_in_s=%.1f quiet_gaps=%d delay_s=2 max_wait_s=6 deliveries=%d max_per_id=%d early=%d overlapping=%d too_many=%d lost=0",
		policy, producers, len(sent), len(byID), sendSpan.Seconds(), quietGaps, total, worst, early, overlap, tooMany)
}

// waitUntil polls cond every 10 ms until it holds (true) or timeout
// passes (false).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// deliveriesOf lists the bodies delivered for id, in order.
func deliveriesOf(l *ledger, id string) []string {
	var out []string
	for _, d := range l.deliveries(id) {
		out = append(out, string(d.body))
	}
	return out
}

// TestDebounceProducerKilled: a "delayq send --stdin --batch 50
// --on-duplicate debounce" killed -9 in the middle of its batches leaves
// every id it acknowledged delivered, and none twice at once; a record it
// wrote without its index entry is found by the reconciler.
func TestDebounceProducerKilled(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.debounce-kill"
	mustCLI(t, `{"id":"first","body":"b"}`+"\n", "send", "--stdin", "--addr", addr, "--topic", topic)
	const lines, ids = 20000, 100
	var in strings.Builder
	for i := range lines {
		fmt.Fprintf(&in, `{"id":"k-%03d","body":"%d","delay_ms":500}`+"\n", i%ids, i)
	}
	cmd := newCmd(t.Context(), "send", "--stdin", "--batch", "50", "--addr", addr, "--topic", topic, "--on-duplicate", "debounce", "--max-wait", "3s")
	cmd.Stdin = strings.NewReader(in.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	replies := bufio.NewScanner(stdout)
	for replies.Scan() && len(acked) < ids && replies.Text() != "" {
		acked[strings.Fields(replies.Text())[0]] = true
	}
	n := 0
	for replies.Scan() && n < 2000 {
		n++ // well into its batches
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < ids {
		t.Fatalf("the producer acknowledged %d ids before it was killed, want all %d", len(acked), ids)
	}
	l := newLedger()
	subs := startSubs(t, l, 2, addr, topic, "--concurrency", "16", "--ends")
	waitFor(t, 60*time.Second, func() bool {
		for id := range acked {
			if len(l.deliveries(id)) == 0 {
				return false
			}
		}
		st := stats(t, addr, topic)
		return st.Scheduled == 0 && st.InFlight == 0
	}, "every id acknowledged delivered, nothing left")
	time.Sleep(500 * time.Millisecond)
	for _, s := range subs {
		if code := s.stop(t, 20*time.Second); code != 0 {
			t.Errorf("sub %d exited %d\nstderr: %s", s.idx, code, s.stderr)
		}
	}
	most := 0
	for id := range acked {
		most = max(most, len(l.deliveries(id)))
	}
	if most > 1 {
		t.Errorf("an id delivered %d times after its producer died: its events were all sent before the consumers started", most)
	}
	testenv.Figure(t, "scenario=debounce-producer-kill9 lines=%d ids=%d acknowledged_ids=%d lost=0 max_deliveries_per_id=%d", lines, ids, len(acked), most)
}
