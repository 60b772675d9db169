package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
)

// The scenarios through a real Codis 3.2 cluster (codis-server is Redis
// 3.2.11): StartCodis skips them with one line when no Codis binaries
// can be had (a fresh clone without ../shared), and fails them when
// $DELAYQ_CODIS_REQUIRED is 1, as in CI.

// checkCodis fails t when a codis-proxy of c counted a command outside
// the portable set, or answered one with an error other than EVALSHA's
// NOSCRIPT (which the client answers by sending the script): the proxy's
// own refusals ("command 'X' is not allowed") are such errors. Without
// faults, it also fails t on any request the proxy failed. proxies lists
// the proxies still running. It returns the failed requests.
func checkCodis(t *testing.T, c *testenv.Codis, proxies []int, faults bool) (fails int64) {
	t.Helper()
	for _, i := range proxies {
		ops, err := c.ProxyOps(i)
		if err != nil {
			t.Errorf("codis-proxy %d stats: %v", i, err)
			continue
		}
		for _, op := range ops {
			fails += op.Fails
			switch {
			case !portable.Named(op.OpStr):
				t.Errorf("codis-proxy %d received %d %s, a command outside the portable set", i, op.Calls, op.OpStr)
			case faults:
			case op.Fails > 0:
				t.Errorf("codis-proxy %d failed %d of %d %s without a fault", i, op.Fails, op.Calls, op.OpStr)
			case op.RedisErrType > 0 && op.OpStr != "EVALSHA":
				t.Errorf("codis-proxy %d answered %d of %d %s with an error", i, op.RedisErrType, op.Calls, op.OpStr)
			}
		}
	}
	return fails
}

// TestCodisEndToEnd is the acceptance scenario of TestProxyEndToEnd
// through Codis: 2 groups behind one codis-proxy.
func TestCodisEndToEnd(t *testing.T) {
	c := testenv.StartCodis(t, testenv.CodisOptions{Groups: 2})
	endToEnd(t, c.Proxies[0], "e2e.codis")
	checkCodis(t, c, []int{0}, false)
}

// TestCodisCommands runs "delayq doctor" through a codis-proxy with its
// backends (codis-server, Redis 3.2.11): every command shape delayq sends
// runs there and answers as it must. Then the scripts the other Codis
// scenarios do not reach run there too: a debounce and a replace, limits,
// a pause, a schedule, an export and its import.
func TestCodisCommands(t *testing.T) {
	c := testenv.StartCodis(t, testenv.CodisOptions{Groups: 2})
	addr := c.Proxies[0]
	backends := strings.Join([]string{c.Groups[0][0], c.Groups[1][0]}, ",")
	r := cli(t, "", "doctor", "--addr", addr, "--backends", backends)
	if r.code != 0 {
		t.Fatalf("doctor through Codis: %s", r)
	}
	if !strings.Contains(r.stdout, "redis 3.2.11") {
		t.Errorf("doctor did not read the backends' version: %s", r.stdout)
	}
	commandsScenario(t, "through Codis", "codis.commands", "--addr", addr)
	checkCodis(t, c, []int{0}, false)
}

// commandsScenario runs, with the connection flags conn, the scripts the
// fleet scenarios do not reach: a debounce and a replace, limits, a
// pause, a schedule, an export and its import into topic.copy, which
// topic list then names. where says where, in errors.
func commandsScenario(t *testing.T, where, topic string, conn ...string) {
	t.Helper()
	on := func(args ...string) result {
		t.Helper()
		n := 1 // the command word, and the subcommand of schedule
		if args[0] == "schedule" {
			n = 2
		}
		return mustCLI(t, "", append(append(append(args[:n:n], conn...), "--topic", topic), args[n:]...)...)
	}
	on("send", "--id", "d", "--body", "1", "--delay", "1h", "--on-duplicate", "debounce", "--max-wait", "2h")
	if r := on("send", "--id", "d", "--body", "2", "--delay", "3h", "--on-duplicate", "debounce", "--max-wait", "2h"); !strings.Contains(r.stdout, "d debounced, due") {
		t.Errorf("a debounce %s printed %q", where, r.stdout)
	}
	if r := on("send", "--id", "d", "--body", "3", "--delay", "1h", "--on-duplicate", "replace"); !strings.Contains(r.stdout, "d replaced, due") {
		t.Errorf("a replace %s printed %q", where, r.stdout)
	}
	if r := on("get", "--id", "d"); !strings.Contains(r.stdout, `"body": "3"`) {
		t.Errorf("get after the replace %s: %s", where, r.stdout)
	}
	on("limits", "--rate", "100/s", "--concurrency", "4")
	if r := on("limits"); !strings.Contains(r.stdout, "100/s") {
		t.Errorf("limits %s: %s", where, r.stdout)
	}
	on("pause", "--for", "1m")
	on("resume")
	on("schedule", "add", "--name", "tick", "--spec", "@every 1h")
	if r := on("schedule", "list"); !strings.Contains(r.stdout, "tick") {
		t.Errorf("schedule list %s: %s", where, r.stdout)
	}
	exp := on("export")
	if !strings.Contains(exp.stdout, `"id":"d"`) {
		t.Fatalf("export %s: %s", where, exp.stdout)
	}
	imp := mustCLI(t, exp.stdout, append(append([]string{"import"}, conn...), "--topic", topic+".copy")...)
	if r := mustCLI(t, "", append(append([]string{"get"}, conn...), "--topic", topic+".copy", "--id", "d")...); !strings.Contains(r.stdout, `"body": "3"`) {
		t.Errorf("get of the imported message %s: %s (import: %s)", where, r.stdout, imp.stderr)
	}
	if r := mustCLI(t, "", append([]string{"topic", "list"}, conn...)...); !strings.Contains(r.stdout, topic+".copy") {
		t.Errorf("topic list %s: %s", where, r.stdout)
	}
	on("schedule", "delete", "--name", "tick")
}

// codisFleet starts 2 subs of topic on 16 partitions through addr with
// the defaults and extra flags, and waits until they share the partitions.
func codisFleet(t *testing.T, l *ledger, addr, topic, prefix string, parts int, extra ...string) []*sub {
	t.Helper()
	c := faultClient(t, addr, parts)
	var subs []*sub
	for i := range 2 {
		args := handoverSubArgs(addr, topic, parts, fmt.Sprint(prefix, "-", i), append([]string{"--concurrency", "32", "--work", "20ms"}, extra...)...)
		subs = append(subs, startSub(t, l, i, args...))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "a fair share", func(o ownership) bool {
		return o.ownedFairlyBy(parts, prefix+"-0", prefix+"-1")
	})
	return subs
}

// codisRun is a scenario through Codis: 2 subs of topic on parts
// partitions, with the defaults and extra flags, through the first proxy
// (every proxy with allProxies); n messages falling due evenly over spread from a
// second after the start; and fault, run faultAt after that start.
type codisRun struct {
	opts            testenv.CodisOptions
	allProxies      bool
	topic, prefix   string
	parts, n        int
	spread, faultAt time.Duration
	extra           []string
	fault           func(t *testing.T, cl *testenv.Codis, addr string, c *delayq.Client)
}

// run starts the cluster and the fleet, sends the messages, runs the
// fault, waits until every message was delivered and the subs stopped,
// and returns the cluster and the ledger's report.
func (r codisRun) run(t *testing.T) (*testenv.Codis, ledgerReport) {
	t.Helper()
	cl := testenv.StartCodis(t, r.opts)
	addr := cl.Proxies[0]
	if r.allProxies {
		addr = strings.Join(cl.Proxies, ",")
	}
	l := newLedger()
	c := faultClient(t, addr, r.parts)
	subs := codisFleet(t, l, addr, r.topic, r.prefix, r.parts, r.extra...)
	start := time.Now().Add(time.Second)
	sendSpread(t, l, addr, r.topic, 0, r.prefix, r.n, start, r.spread)
	time.Sleep(time.Until(start.Add(r.faultAt)))
	r.fault(t, cl, addr, c)
	waitDrained(t, c, r.topic, l, subs)
	stopAllSubs(t, subs)
	return cl, checkFaultLedger(t, l, r.topic)
}

// TestCodisSlotMigration moves half of the slots (0-511) from group 1 to
// group 2 while 3000 messages fall due over 15 s to 2 subs with the
// defaults: nothing lost, early or delivered twice.
func TestCodisSlotMigration(t *testing.T) {
	t.Parallel()
	var took time.Duration
	cl, rep := codisRun{
		opts: testenv.CodisOptions{Groups: 2}, topic: "e2e.codis.migrate", prefix: "cm",
		parts: 16, n: 3000, spread: 15 * time.Second, faultAt: 3 * time.Second,
		fault: func(t *testing.T, cl *testenv.Codis, _ string, _ *delayq.Client) {
			began := time.Now()
			cl.MigrateSlots(t, 0, 511, 2)
			// The dashboard moves a slot at a time, each through its
			// states with every proxy: about 55 s for these 512 beside
			// the other parallel scenarios, more on a busier machine.
			testenv.WaitFor(t, 3*time.Minute, "slots 0-511 in group 2", func() bool {
				serving, pending, err := cl.SlotsOf(2)
				return err == nil && serving == 1024 && pending == 0
			})
			took = time.Since(began)
		},
	}.run(t)
	if rep.duplicates > 0 {
		t.Errorf("%d duplicates during a slot migration", rep.duplicates)
	}
	checkCodis(t, cl, []int{0}, false)
	testenv.Figure(t, "scenario=codis-slot-migration slots=512 migration_ms=%d messages=%d lost=%d duplicates=%d max_late_ms=%d",
		took.Milliseconds(), rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds())
}

// TestCodisPartitionChange grows a topic from 4 to 8 partitions through
// Codis while 2000 messages fall due over 10 s to 2 subs.
func TestCodisPartitionChange(t *testing.T) {
	t.Parallel()
	var took time.Duration
	cl, rep := codisRun{
		opts: testenv.CodisOptions{Groups: 2}, topic: "e2e.codis.repart", prefix: "cp",
		parts: 4, n: 2000, spread: 10 * time.Second, faultAt: 3 * time.Second,
		fault: func(t *testing.T, _ *testenv.Codis, addr string, c *delayq.Client) {
			began := time.Now()
			mustCLI(t, "", "partitions", "--addr", addr, "--topic", "e2e.codis.repart", "--set", "8")
			took = waitPartitions(t, c, "e2e.codis.repart", 8, began)
		},
	}.run(t)
	if rep.duplicates > 0 {
		t.Errorf("%d duplicates during a partition change", rep.duplicates)
	}
	checkCodis(t, cl, []int{0}, false)
	testenv.Figure(t, "scenario=codis-partitions-4-to-8 change_ms=%d messages=%d lost=%d duplicates=%d max_late_ms=%d",
		took.Milliseconds(), rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds())
}

// TestCodisFailover kills group 1's master with SIGKILL and promotes its
// replica 2 s later, while 4000 messages fall due over 20 s to 2 subs:
// with the default lease (longer than the outage) and with a lease of
// 2 s (shorter, as a user who wants a fast takeover sets it). Nothing is
// lost or early; duplicates: none with the defaults, at most 0.5% with
// the short lease, whose owners lose their leases during the outage
// (the acks they could not write are kept and written after it).
func TestCodisFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, lease string
		maxDup      int
	}{
		{"lease-default", "", 0},
		{"lease-2s", "2s", 4000 / 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var extra []string
			if tc.lease != "" {
				extra = []string{"--lease", tc.lease}
			}
			const n = 4000
			cl, rep := codisRun{
				opts: testenv.CodisOptions{Groups: 2, Replicas: true}, topic: "e2e.codis.failover", prefix: "cf",
				parts: 16, n: n, spread: 20 * time.Second, faultAt: 5 * time.Second, extra: extra,
				fault: func(t *testing.T, cl *testenv.Codis, _ string, _ *delayq.Client) {
					cl.Kill(t, cl.Groups[0][0])
					time.Sleep(2 * time.Second)
					cl.Promote(t, 1, cl.Groups[0][1])
				},
			}.run(t)
			if rep.duplicates > tc.maxDup {
				for id, ds := range rep.dups {
					t.Logf("duplicate %s: %s", id, describe(ds))
					break
				}
				t.Errorf("%d duplicates of %d messages after a group failover, want at most %d", rep.duplicates, n, tc.maxDup)
			}
			fails := checkCodis(t, cl, []int{0}, true)
			testenv.Figure(t, "scenario=codis-failover-%s messages=%d lost=%d duplicates=%d max_late_ms=%d proxy_fails=%d",
				tc.name, rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds(), fails)
		})
	}
}

// TestCodisProxyLoss runs 2 subs against both of 2 codis-proxies and
// kills one with SIGKILL while 2000 messages fall due over 10 s: the
// clients go on through the other, nothing lost or delivered twice.
func TestCodisProxyLoss(t *testing.T) {
	t.Parallel()
	cl, rep := codisRun{
		opts: testenv.CodisOptions{Groups: 2, Proxies: 2}, allProxies: true, topic: "e2e.codis.proxyloss", prefix: "cx",
		parts: 16, n: 2000, spread: 10 * time.Second, faultAt: 3 * time.Second,
		fault: func(t *testing.T, cl *testenv.Codis, _ string, _ *delayq.Client) {
			cl.Kill(t, cl.Proxies[0])
		},
	}.run(t)
	if rep.duplicates > 0 {
		t.Errorf("%d duplicates after the loss of one of two proxies", rep.duplicates)
	}
	checkCodis(t, cl, []int{1}, false)
	testenv.Figure(t, "scenario=codis-proxy-loss proxies=2 messages=%d lost=%d duplicates=%d max_late_ms=%d",
		rep.messages, rep.lost, rep.duplicates, rep.maxLate.Milliseconds())
}
