package test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// The log lines of an outage (README, "Proxy outages"), as the CLI's
// default level (warn) shows them.
const (
	outageStartMsg = `msg="outage: no address answers; waiting for one"`
	outageEndMsg   = `msg="outage over"`
)

// outageEndRE reads the figures of the outage's summary line.
var outageEndRE = regexp.MustCompile(`msg="outage over" .*lasted=([0-9.]+[a-zµ]+) .*leases_lost=(\d+) partitions_retaken=(\d+)`)

// countLines returns how many lines of s contain sub.
func countLines(s, sub string) int {
	n := 0
	for _, ln := range strings.Split(s, "\n") {
		if strings.Contains(ln, sub) {
			n++
		}
	}
	return n
}

// sendOne sends one message due now through addr and returns its id.
func sendOne(t *testing.T, l *ledger, addr, topic, body string) string {
	t.Helper()
	r := mustCLI(t, "", "send", "--addr", addr, "--topic", topic, "--body", body)
	id := strings.TrimSpace(r.stdout)
	l.expect(id, []byte(body), time.Now().Add(-time.Second))
	return id
}

// TestOutageLogs: every proxy of a running sub (default log level, lease
// 2 s) is killed for 4 s, longer than the lease. Its stderr shows the
// outage in one line when it starts and one summary when it ends, with
// its length, the leases lost and the partitions retaken; no lease or
// partition loss of its own, and no line that names its component twice.
// The sub then delivers a message sent after the outage.
func TestOutageLogs(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, Proxies: 2})
	addrs := strings.Join(env.Proxies, ",")
	topic := "e2e.outage.logs"
	const parts = 4
	l := newLedger()
	s := startSub(t, l, 0, "--addr", addrs, "--topic", topic, "--partitions", strconv.Itoa(parts), "--lease", "2s", "--id", "out-0")
	c := faultClient(t, addrs, parts)
	waitOwners(t, c, topic, time.Now(), faultSettle, "the sub owning every partition", func(o ownership) bool {
		return o.ownedExactlyBy(parts, parts, parts, "out-0")
	})

	env.StopProxyN(t, 0)
	env.StopProxyN(t, 1)
	down := time.Now()
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), outageStartMsg) },
		"the outage's first line\nstderr: %s", s.stderr)
	time.Sleep(time.Until(down.Add(4 * time.Second)))
	env.StartProxyN(t, 0)
	env.StartProxyN(t, 1)
	back := time.Now()
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(s.stderr.String(), outageEndMsg) },
		"the outage's summary\nstderr: %s", s.stderr)

	id := sendOne(t, l, addrs, topic, "after the outage")
	waitFor(t, 20*time.Second, func() bool { return len(l.deliveries(id)) > 0 }, "the delivery of a message sent after the outage")
	if code := s.stop(t, 30*time.Second); code != 0 {
		t.Errorf("sub exited %d\nstderr: %s", code, s.stderr)
	}

	stderr := s.stderr.String()
	if n := countLines(stderr, outageStartMsg); n != 1 {
		t.Errorf("%d lines say the outage started, want 1\nstderr: %s", n, stderr)
	}
	if n := countLines(stderr, outageEndMsg); n != 1 {
		t.Errorf("%d lines say the outage ended, want 1\nstderr: %s", n, stderr)
	}
	for _, lost := range []string{`msg="lease lost`, `msg="partition lost"`, `msg="lease extension refused"`, `msg="release partition"`} {
		if n := countLines(stderr, lost); n > 0 {
			t.Errorf("%d lines %s during a known outage, want them folded into its summary\nstderr: %s", n, lost, stderr)
		}
	}
	for _, ln := range strings.Split(stderr, "\n") {
		if strings.Count(ln, "component=") > 1 {
			t.Errorf("a line names its component twice: %s", ln)
		}
	}
	m := outageEndRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no lasted=, leases_lost= and partitions_retaken= in the summary\nstderr: %s", stderr)
	}
	lasted, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("lasted=%s: %v", m[1], err)
	}
	if want := back.Sub(down); lasted < want-2*time.Second || lasted > want+time.Second {
		t.Errorf("the summary says the outage lasted %v; the proxies were down %v", lasted, want)
	}
	lost, _ := strconv.Atoi(m[2])
	retaken, _ := strconv.Atoi(m[3])
	if lost != parts || retaken != parts {
		t.Errorf("summary: %d leases lost and %d partitions retaken, want %d and %d (an outage of 4 s, leases of 2 s)\n%s",
			lost, retaken, parts, parts, m[0])
	}
	testenv.Figure(t, "scenario=outage-logs-4s lasted_ms=%d leases_lost=%d partitions_retaken=%d", lasted.Milliseconds(), lost, retaken)
}
