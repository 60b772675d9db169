package test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// Bounds of the loss of one proxy of two, asserted with the defaults.
const (
	// proxyDownLate bounds the lateness of a message due while a proxy
	// is down: the read timeout (3 s) of a command cut off, plus a poll
	// it then waits for, less the claim-ahead that already held it.
	proxyDownLate = 3 * time.Second
)

// TestProxyFailover: two nutcracker processes in front of the same
// backends; two subs and the producer are given both. 3000 messages fall
// due over 15 s; the first proxy is killed -9 at 5 s and started again at
// 10 s. Nothing is lost or early, duplicates only as I5 allows (counted),
// messages due while the proxy was down start within 3 s of their due,
// the others within today's bound; each sub logs the outage once, not
// once per command. A command given a dead proxy first, and the live one
// second, works from its start.
func TestProxyFailover(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3, Proxies: 2})
	addrs := strings.Join(env.Proxies, ",")
	topic := "e2e.proxies"
	l := newLedger()
	c := faultClient(t, addrs, 16)
	subs := startSharing(t, l, c, addrs, topic, "px-0", "px-1")
	start := time.Now().Add(time.Second)
	sendSpread(t, l, addrs, topic, 0, "px", 3000, start, 15*time.Second)

	time.Sleep(time.Until(start.Add(5 * time.Second)))
	down := time.Now()
	env.StopProxyN(t, 0)
	time.Sleep(time.Until(start.Add(10 * time.Second)))
	env.StartProxyN(t, 0)
	back := time.Now()

	waitDrained(t, c, topic, l, subs)
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	var rest []time.Duration
	worstDown := time.Duration(0)
	for _, d := range l.snapshot() {
		if d.Attempt != 1 {
			continue
		}
		late := d.at.Sub(d.due)
		if !d.due.Before(down) && d.due.Before(back) {
			worstDown = max(worstDown, late)
			continue
		}
		rest = append(rest, late)
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i] < rest[j] })
	p99 := percentile(rest, 99)
	if worstDown > proxyDownLate {
		t.Errorf("a message due while a proxy was down started %v late, want within %v", worstDown, proxyDownLate)
	}
	if p99 >= e2eMaxP99 {
		t.Errorf("p99 lateness of the messages due while both proxies ran: %v, want under %v", p99, e2eMaxP99)
	}
	for _, s := range subs {
		if n := strings.Count(s.stderr.String(), `msg="proxy down: skipping it"`); n < 1 || n > 2 {
			t.Errorf("sub %d logged the proxy down %d times, want once for the outage (twice if it flapped)", s.idx, n)
		}
	}
	testenv.Figure(t, "scenario=proxy-failover messages=%d lost=%d duplicates=%d down_late_max_ms=%d rest_p99_ms=%.1f redelivered=%d recovered=%d leases_lost=%d",
		rep.messages, rep.lost, rep.duplicates, worstDown.Milliseconds(), float64(p99.Microseconds())/1000,
		subCounter(subs, "redelivered"), subCounter(subs, "recovered"), subCounter(subs, "leases_lost"))

	// A dead proxy listed first: the command works from its start.
	dead := "127.0.0.1:1"
	if r := cli(t, "", "stats", "--addr", dead+","+env.Proxies[1], "--topic", topic); r.code != 0 || !strings.Contains(r.stdout, "partitions 16") {
		t.Errorf("stats with a dead proxy listed first: %s", r)
	}
}

// TestFaultBackendDownDefaults: with the defaults (lease 10 s), one of
// three backends (appendonly, fsync always) is killed -9 and started again
// 2 s later from its AOF while two subs deliver 1000 messages due over
// 10 s. Nothing is lost, early or delivered twice; messages due during
// the outage start within 3 s of their due; each sub logs the outage in
// one warning, not one per command or partition.
func TestFaultBackendDownDefaults(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 3, AppendOnly: true})
	addr, topic := env.Proxy, "e2e.backend.down"
	l := newLedger()
	c := faultClient(t, addr, 16)
	subs := startSharing(t, l, c, addr, topic, "bd-0", "bd-1")
	start := time.Now().Add(time.Second)
	sendSpread(t, l, addr, topic, 0, "bd", 1000, start, 10*time.Second)
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	down := time.Now()
	env.StopBackend(t, 1)
	time.Sleep(2 * time.Second)
	env.StartBackend(t, 1)
	back := time.Now()
	waitDrained(t, c, topic, l, subs)
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	if rep.duplicates > 0 {
		t.Errorf("%d duplicates after an outage shorter than the lease", rep.duplicates)
	}
	worst := time.Duration(0)
	for _, d := range l.snapshot() {
		if d.Attempt == 1 && !d.due.Before(down) && d.due.Before(back) {
			worst = max(worst, d.at.Sub(d.due))
		}
	}
	if worst > proxyDownLate {
		t.Errorf("a message due during the outage started %v late, want within %v", worst, proxyDownLate)
	}
	warnings := 0
	for _, s := range subs {
		var lines []string
		for _, ln := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(ln, "level=WARN") || strings.Contains(ln, "level=ERROR") {
				lines = append(lines, ln)
			}
		}
		warnings += len(lines)
		if len(lines) > 1 {
			t.Errorf("sub %d logged the outage in %d warnings, want one:\n%s", s.idx, len(lines), strings.Join(lines, "\n"))
		}
	}
	testenv.Figure(t, "scenario=backend-down-2s-defaults messages=%d lost=%d duplicates=%d down_late_max_ms=%d warnings=%d",
		rep.messages, rep.lost, rep.duplicates, worst.Milliseconds(), warnings)
}

// TestProxiesBothDown: a sub given two proxies, with the defaults, sees
// both killed -9 for 5 s (shorter than the lease) while 600 messages fall
// due over 12 s: it logs the outage's start once, resumes by itself,
// and nothing is lost, early or delivered twice.
func TestProxiesBothDown(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2, Proxies: 2})
	addrs := strings.Join(env.Proxies, ",")
	topic := "e2e.proxies.down"
	l := newLedger()
	c := faultClient(t, addrs, 16)
	s := startSharing(t, l, c, addrs, topic, "pd-0")[0]
	start := time.Now().Add(time.Second)
	sendSpread(t, l, addrs, topic, 0, "pd", 600, start, 12*time.Second)
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	env.StopProxyN(t, 0)
	env.StopProxyN(t, 1)
	time.Sleep(5 * time.Second)
	env.StartProxyN(t, 0)
	env.StartProxyN(t, 1)
	waitDrained(t, c, topic, l, []*sub{s})
	stopAllSubs(t, []*sub{s})
	rep := checkFaultLedger(t, l, topic)
	if rep.duplicates > 0 {
		t.Errorf("%d duplicates after an outage shorter than the lease", rep.duplicates)
	}
	if n := strings.Count(s.stderr.String(), outageStartMsg); n != 1 {
		t.Errorf("the outage of both proxies logged %d times, want once", n)
	}
	testenv.Figure(t, "scenario=proxies-both-down-5s messages=%d lost=%d duplicates=%d max_late_ms=%d",
		rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds())
}

// startSharing starts a sub with the defaults (but --concurrency 32) for
// each of ids, through addr, and waits until they share the topic's 16
// partitions fairly.
func startSharing(t *testing.T, l *ledger, c *delayq.Client, addr, topic string, ids ...string) []*sub {
	t.Helper()
	var subs []*sub
	for i, id := range ids {
		subs = append(subs, startSub(t, l, i, "--addr", addr, "--topic", topic, "--id", id, "--concurrency", "32", "--log-level", "info"))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, fmt.Sprintf("%d subs sharing 16 partitions", len(ids)), func(o ownership) bool {
		return o.ownedFairlyBy(16, ids...)
	})
	return subs
}

// TestOutageLongerThanLease: two "delayq sub" processes with a lease of
// 2 s (shorter than the outage, as a user who wants fast takeover sets
// it), through Twemproxy, whose proxy is killed -9 for 5 s while 1000
// messages fall due over 12 s. Deliveries that finished during the
// outage keep their acks and write them after it, so their messages are
// not run again by the next owners: duplicates at most 0.5%.
func TestOutageLongerThanLease(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "e2e.outage.lease"
	l := newLedger()
	c := faultClient(t, addr, 16)
	var subs []*sub
	for i := range 2 {
		subs = append(subs, startSub(t, l, i, handoverSubArgs(addr, topic, 16, fmt.Sprint("ol-", i), "--lease", "2s", "--concurrency", "32", "--work", "50ms")...))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "a fair share", func(o ownership) bool {
		return o.ownedFairlyBy(16, "ol-0", "ol-1")
	})
	const n = 1000
	start := time.Now().Add(time.Second)
	sendSpread(t, l, addr, topic, 0, "ol", n, start, 12*time.Second)
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	env.StopProxy(t)
	time.Sleep(5 * time.Second)
	env.StartProxy(t)
	waitDrained(t, c, topic, l, subs)
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	if max := n / 200; rep.duplicates > max {
		t.Errorf("%d duplicates of %d messages after an outage longer than the lease, want at most %d (0.5%%)", rep.duplicates, n, max)
	}
	testenv.Figure(t, "scenario=outage-proxy-5s-lease-2s messages=%d lost=%d duplicates=%d max_late_ms=%d",
		rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds())
}
