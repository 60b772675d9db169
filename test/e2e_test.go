package test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// Acceptance figures of the issue.
const (
	e2eMessages   = 3000
	e2eMaxDelayMS = 4000
	e2eMaxP99     = 1100 * time.Millisecond
	// clockSlack absorbs the millisecond rounding of due times.
	clockSlack = 2 * time.Millisecond
)

// TestProxyEndToEnd is the acceptance test: through Twemproxy with three
// backends and no hash_tag, 3000 messages due within 0-4 s, sent by
// "send --stdin" and consumed by two "sub" processes at once, are all
// delivered exactly once, never early, with p99 lateness under 1.1 s and
// intact bodies; deleted messages are never delivered, a duplicate id is
// refused, a rescheduled message arrives at its new time, and nutcracker
// sees no unsupported command.
func TestProxyEndToEnd(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3})
	endToEnd(t, env.Proxy, "e2e.accept")
	// The proxy saw nothing it does not support.
	if probs := env.ProxyLogProblems(); len(probs) > 0 {
		t.Errorf("nutcracker logged %d problems, first: %v", len(probs), probs[:min(5, len(probs))])
	}
	checkClientErr(t, env)
}

// endToEnd runs the acceptance scenario of TestProxyEndToEnd through the
// proxy at addr.
func endToEnd(t *testing.T, addr, topic string) {
	l := newLedger()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))

	// Two consumers first, so that every message has somewhere to go.
	subArgs := []string{"--addr", addr, "--topic", topic, "--concurrency", "32", "--lease", "2s"}
	subs := []*sub{startSub(t, l, 0, subArgs...), startSub(t, l, 1, subArgs...)}
	// A consumer has no "ready" line: the two are settled once all 16
	// partitions are owned, 8 by each (fair share). Messages sent during a
	// hand-over are measured by other tests (faults); this one measures the
	// steady state. Until a sub creates the topic, stats fails.
	settleStart := time.Now()
	if !poll(20*time.Second, func() bool {
		for _, s := range subs {
			if s.exited() {
				return true
			}
		}
		ts, _ := tryStats(t, addr, topic)
		owned, who := ts.owners()
		balanced := owned == 16 && len(who) == 2
		for _, n := range who {
			balanced = balanced && n == 8
		}
		return balanced
	}) {
		t.Logf("partitions not shared by both subs after 20s; going on")
	}
	for _, s := range subs {
		if s.exited() {
			t.Fatalf("sub %d exited early: exit %d\nstderr: %s", s.idx, s.exitCode(), s.stderr)
		}
	}
	_, who := stats(t, addr, topic).owners()
	t.Logf("partition owners before sending, %v after start: %v", time.Since(settleStart).Round(time.Millisecond), who)

	// The bulk: 3000 JSON lines with unique ids, varied bodies, delays 0-4 s.
	type line struct {
		ID         string  `json:"id"`
		Body       *string `json:"body,omitempty"`
		BodyBase64 *string `json:"body_base64,omitempty"`
		DelayMS    int64   `json:"delay_ms"`
	}
	var in bytes.Buffer
	ids := make([]string, e2eMessages)
	bodies := make([][]byte, e2eMessages)
	delays := make([]time.Duration, e2eMessages)
	for i := range e2eMessages {
		id := fmt.Sprintf("bulk-%04d-%08x", i, rng.Uint32())
		if i%250 == 7 {
			id = fmt.Sprintf("bulk-%04d-ид-ü-日本", i) // non-ASCII ids too
		}
		body := randomBody(rng, i)
		ln := line{ID: id, DelayMS: rng.Int64N(e2eMaxDelayMS + 1)}
		if i%97 == 5 { // not UTF-8: sent and printed as base64
			b := make([]byte, 64+rng.IntN(512))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			b[0] = 0xff // certainly invalid UTF-8
			body = b
			s := base64.StdEncoding.EncodeToString(b)
			ln.BodyBase64 = &s
		} else {
			s := string(body)
			ln.Body = &s
		}
		js, err := json.Marshal(ln)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(js)
		in.WriteByte('\n')
		ids[i], bodies[i], delays[i] = id, body, time.Duration(ln.DelayMS)*time.Millisecond
	}
	sendStart := time.Now()
	for i := range ids {
		l.expect(ids[i], bodies[i], sendStart.Add(delays[i]-clockSlack))
	}
	r := cli(t, in.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	sendEnd := time.Now()
	if r.code != 0 {
		t.Fatalf("bulk send failed: %s", r)
	}
	if got := lines(r.stdout); len(got) != e2eMessages || got[0] != ids[0] || got[len(got)-1] != ids[len(ids)-1] {
		t.Fatalf("send --stdin printed %d ids (first %q), want %d in input order", len(got), got[:min(1, len(got))], e2eMessages)
	}
	t.Logf("sent %d messages through the proxy in %v", e2eMessages, sendEnd.Sub(sendStart).Round(time.Millisecond))
	bulkDue := make(map[string][2]time.Time, e2eMessages) // id -> [earliest, latest] due
	for i, id := range ids {
		bulkDue[id] = [2]time.Time{sendStart.Add(delays[i] - clockSlack), sendEnd.Add(delays[i] + clockSlack)}
	}

	// Deleted messages are never delivered: 20 due in 3 s, 10 deleted.
	var delIn strings.Builder
	var delIDs []string
	for i := range 20 {
		id := fmt.Sprintf("del-%02d", i)
		delIDs = append(delIDs, id)
		fmt.Fprintf(&delIn, `{"id":%q,"body":"delete me %d","delay_ms":3000}`+"\n", id, i)
	}
	delStart := time.Now()
	for i, id := range delIDs {
		l.expect(id, fmt.Appendf(nil, "delete me %d", i), delStart.Add(3*time.Second-clockSlack))
	}
	mustCLI(t, delIn.String(), "send", "--stdin", "--addr", addr, "--topic", topic)
	var delWG sync.WaitGroup
	delRes := make([]result, 10)
	for i := range 10 { // at once, to stay well ahead of the due time
		delWG.Add(1)
		go func() {
			defer delWG.Done()
			delRes[i] = cli(t, "", "delete", "--addr", addr, "--topic", topic, "--id", delIDs[2*i])
		}()
	}
	delWG.Wait()
	for i, r := range delRes {
		if r.code != 0 || strings.TrimSpace(r.stdout) != "deleted "+delIDs[2*i] {
			t.Errorf("delete: %s", r)
		}
		l.markDeleted(delIDs[2*i])
	}
	if took := time.Since(delStart); took > 2*time.Second {
		t.Errorf("deleting took %v: too close to the 3 s due time for the check to mean anything", took)
	}

	// A duplicate id is refused while the first is queued (once it is
	// acked the id is free again, so it is due later), and the first
	// message is delivered once, with its own body.
	dupStart := time.Now()
	l.expect("dup-X", []byte("first"), dupStart.Add(2*time.Second-clockSlack))
	r = cli(t, "", "send", "--addr", addr, "--topic", topic, "--id", "dup-X", "--body", "first", "--delay", "2s")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "dup-X" {
		t.Errorf("first send of dup-X: %s", r)
	}
	r = cli(t, "", "send", "--addr", addr, "--topic", topic, "--id", "dup-X", "--body", "second", "--delay", "1s")
	wantExit(t, r, 1, "duplicate")

	// A rescheduled message arrives at its new time.
	l.expect("resched-R", []byte("moved"), time.Now().Add(2*time.Second-clockSlack))
	mustCLI(t, "", "send", "--addr", addr, "--topic", topic, "--id", "resched-R", "--body", "moved", "--delay", "2s")
	reschedAt := time.Now()
	r = mustCLI(t, "", "reschedule", "--addr", addr, "--topic", topic, "--id", "resched-R", "--delay", "4s")
	newDue := mustTime(t, strings.TrimSpace(r.stdout))
	if newDue.Before(reschedAt.Add(4*time.Second - clockSlack)) {
		t.Errorf("reschedule printed %v, before %v + 4s", newDue, reschedAt)
	}
	l.setEarliest("resched-R", reschedAt.Add(4*time.Second-clockSlack))

	// Wait for every expected delivery, and until the deleted messages are
	// well past due (so that their absence means something).
	waitFor(t, 40*time.Second, func() bool {
		if len(l.missing()) == 0 {
			return true
		}
		for _, s := range subs {
			if s.exited() {
				return true // reported below
			}
		}
		return false
	}, "all deliveries; %d missing", len(l.missing()))
	for _, s := range subs {
		if s.exited() {
			t.Fatalf("sub %d exited before the end: exit %d\nstderr: %s", s.idx, s.exitCode(), s.stderr)
		}
	}
	quietUntil := delStart.Add(3*time.Second + 1500*time.Millisecond)
	waitFor(t, 10*time.Second, func() bool { return time.Now().After(quietUntil) }, "deleted messages to be 1.5s past due")

	for _, s := range subs {
		if code := s.stop(t, 30*time.Second); code != 0 {
			t.Errorf("sub %d: exit %d after SIGTERM, want 0\nstderr: %s", s.idx, code, clip(s.stderr.String()))
		}
	}

	// The checks.
	l.mu.Lock()
	errs := append([]string(nil), l.errs...)
	l.mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	all := l.snapshot()
	perSub := map[int]int{}
	var lateness []time.Duration
	for _, d := range all {
		perSub[d.sub]++
		if d.Topic != topic {
			t.Errorf("delivery of %q has topic %q", d.ID, d.Topic)
		}
	}
	for id, s := range l.sent {
		ds := l.deliveries(id)
		if s.deleted {
			if len(ds) > 0 {
				t.Errorf("deleted message %q was delivered %d times (first by sub %d at %s)", id, len(ds), ds[0].sub, ds[0].DeliveredAt)
			}
			continue
		}
		if len(ds) != 1 {
			var where []string
			for _, d := range ds {
				where = append(where, fmt.Sprintf("sub %d attempt %d token %d at %s", d.sub, d.Attempt, d.Token, d.DeliveredAt))
			}
			t.Errorf("message %q delivered %d times, want 1: %v", id, len(ds), where)
			if len(ds) == 0 {
				continue
			}
		}
		d := ds[0]
		if !bytes.Equal(d.body, s.body) {
			t.Errorf("message %q: body changed: got %d bytes %q, want %d bytes %q", id, len(d.body), clip(string(d.body)), len(s.body), clip(string(s.body)))
		}
		if d.Attempt != 1 {
			t.Errorf("message %q: attempt %d, want 1", id, d.Attempt)
		}
		if d.at.Before(d.due) {
			t.Errorf("message %q delivered early: at %s, due %s", id, d.DeliveredAt, d.Due)
		}
		if d.due.Before(s.earliest) || d.at.Before(s.earliest) {
			t.Errorf("message %q: due %s, delivered %s, but it may not be due before %s", id, d.Due, d.DeliveredAt, s.earliest.UTC().Format(time.RFC3339Nano))
		}
		if b, ok := bulkDue[id]; ok {
			if d.due.After(b[1]) {
				t.Errorf("message %q: due %s, later than send end + delay %s", id, d.Due, b[1].UTC().Format(time.RFC3339Nano))
			}
			lateness = append(lateness, d.at.Sub(d.due))
		}
	}
	if d := l.deliveries("resched-R"); len(d) > 0 && d[0].due.Sub(newDue).Abs() > clockSlack {
		t.Errorf("rescheduled message delivered with due %s, want %s", d[0].Due, newDue.UTC().Format(time.RFC3339Nano))
	}
	sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
	p50, p99, pmax := percentile(lateness, 50), percentile(lateness, 99), percentile(lateness, 100)
	t.Logf("lateness over %d bulk deliveries: p50=%v p99=%v max=%v", len(lateness), p50, p99, pmax)
	if testing.Verbose() || p99 >= e2eMaxP99 {
		// The latest deliveries, to tell a slow partition from a slow sub.
		late := l.snapshot()
		sort.Slice(late, func(i, j int) bool { return late[i].at.Sub(late[i].due) > late[j].at.Sub(late[j].due) })
		for _, d := range late[:min(8, len(late))] {
			t.Logf("  late %v: %s partition %d sub %d token %d due send+%v", d.at.Sub(d.due).Round(time.Millisecond),
				d.ID, d.Partition, d.sub, d.Token, d.due.Sub(sendStart).Round(time.Millisecond))
		}
	}
	if p99 >= e2eMaxP99 {
		t.Errorf("p99 lateness %v, want < %v", p99, e2eMaxP99)
	}
	t.Logf("deliveries per sub: sub0=%d sub1=%d", perSub[0], perSub[1])
}

// checkClientErr fails t when nutcracker closed any client connection on
// an error (an unsupported command shape closes it without a log line).
func checkClientErr(t *testing.T, env *testenv.Env) {
	t.Helper()
	var st testenv.ProxyStats
	var err error
	// Counters are aggregated every 100ms: read after they settled.
	waitFor(t, 5*time.Second, func() bool {
		var again testenv.ProxyStats
		if st, err = env.ProxyStats(); err != nil {
			return false
		}
		time.Sleep(250 * time.Millisecond) // two aggregation periods
		again, err = env.ProxyStats()
		return err == nil && again == st
	}, "stable nutcracker stats (last error %v)", err)
	t.Logf("nutcracker: client_err=%d client_eof=%d forward_error=%d", st.ClientErr, st.ClientEOF, st.ForwardError)
	if st.ClientErr != 0 {
		t.Errorf("nutcracker closed %d client connections on an error", st.ClientErr)
	}
	if st.ForwardError != 0 {
		t.Errorf("nutcracker could not forward %d requests", st.ForwardError)
	}
}

// randomBody returns the body of bulk message i: mostly short ASCII, some
// non-ASCII UTF-8, every 100th 10 KiB, one empty.
func randomBody(rng *rand.Rand, i int) []byte {
	const ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 {}:\"\\/<>&'"
	utf := []string{"é", "ß", "Ж", "日本", "🚀", "€", "\u00a0", "ü", "中文", "𝄞"}
	switch {
	case i == 3:
		return []byte{}
	case i%100 == 1:
		b := make([]byte, 10<<10)
		for j := range b {
			b[j] = ascii[rng.IntN(len(ascii))]
		}
		return b
	case i%10 == 2:
		var sb strings.Builder
		for range 5 + rng.IntN(40) {
			if rng.IntN(2) == 0 {
				sb.WriteString(utf[rng.IntN(len(utf))])
			} else {
				sb.WriteByte(ascii[rng.IntN(len(ascii))])
			}
		}
		return []byte(sb.String())
	}
	b := make([]byte, 1+rng.IntN(200))
	for j := range b {
		b[j] = ascii[rng.IntN(len(ascii))]
	}
	return b
}
