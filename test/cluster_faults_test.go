package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
)

// The fault scenarios of codis_test.go on a Redis Cluster, through the
// real binary with --cluster: a master killed -9 and its replica promoted
// by the cluster itself, and slots moved to another master under load.
// Each ends with the ledger check of the fault suite (checkFaultLedger:
// every id delivered, with its body, none before its due) and one FIGURE
// line.

// clusterTopicNS is the namespace of the scenarios' keys (the default).
const clusterTopicNS = "dq"

// clusterFaultClient returns a library client of the cluster whose seeds are
// seeds, for observing stats.
func clusterFaultClient(t *testing.T, seeds string, parts int) *delayq.Client {
	t.Helper()
	c, err := delayq.New(delayq.Options{
		Addr: seeds, Cluster: true, Partitions: parts,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// partitionSlot returns the hash slot of partition p of topic: every key
// of the partition carries the tag {topic:p}.
func partitionSlot(topic string, p int) int {
	return testenv.Slot(keys.Scheduled(clusterTopicNS, topic, p))
}

// clusterFleet starts 2 "sub --cluster" of topic on parts partitions with
// the defaults (lease, handler timeout, poll), as codisFleet does, and
// waits until they share the partitions.
func clusterFleet(t *testing.T, l *ledger, c *delayq.Client, seeds, topic, prefix string, parts int) []*sub {
	t.Helper()
	var subs []*sub
	for i := range 2 {
		args := handoverSubArgs(seeds, topic, parts, fmt.Sprint(prefix, "-", i), "--cluster", "--concurrency", "32", "--work", "20ms")
		subs = append(subs, startSub(t, l, i, args...))
	}
	waitOwners(t, c, topic, time.Now(), faultSettle, "a fair share", func(o ownership) bool {
		return o.ownedFairlyBy(parts, prefix+"-0", prefix+"-1")
	})
	return subs
}

// clusterSendSpread enqueues n messages due evenly from from over span
// (message i at from + span*i/n), as sendSpread does, with producers
// "send --cluster --stdin" processes run at once, each taking every
// producers-th message; it records them in l.
func clusterSendSpread(t *testing.T, l *ledger, seeds, topic string, parts int, prefix string, n, producers int, from time.Time, span time.Duration) {
	t.Helper()
	ins := make([]strings.Builder, producers)
	want := make([]int, producers)
	for i := range n {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		at := from.Add(span * time.Duration(i) / time.Duration(n))
		body := fmt.Sprintf("%s body %d", prefix, i)
		js, err := json.Marshal(map[string]string{"id": id, "body": body, "at": at.UTC().Format(time.RFC3339Nano)})
		if err != nil {
			t.Fatal(err)
		}
		ins[i%producers].Write(js)
		ins[i%producers].WriteByte('\n')
		want[i%producers]++
		l.expect(id, []byte(body), at) // due is the time rounded up to the ms: never before at
	}
	args := append([]string{"send", "--stdin", "--cluster", "--addr", seeds, "--topic", topic}, partitionsFlag(parts)...)
	results := make(chan result, producers)
	for i := range producers {
		in := ins[i].String()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
			defer cancel()
			cmd := newCmd(ctx, args...)
			cmd.Stdin = strings.NewReader(in)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			r := result{args: args, stdout: out.String(), stderr: errb.String()}
			if err != nil {
				r.code = -1
				if cmd.ProcessState != nil {
					r.code = cmd.ProcessState.ExitCode()
				}
				r.stderr += "\n(run: " + err.Error() + ")"
			}
			results <- r
		}()
	}
	got := 0
	for range producers {
		r := <-results
		if r.code != 0 {
			t.Fatalf("want exit 0, got %s", r)
		}
		got += len(lines(r.stdout))
	}
	if got != n {
		t.Fatalf("%d producers of send --cluster --stdin printed %d ids, want %d", producers, got, n)
	}
}

// commandCalls returns how many times the cluster node at addr ran cmd
// (lower case), from its INFO commandstats, read on a connection of the
// test's own as the cluster helpers read theirs: an operator's command,
// not one of delayq's.
func commandCalls(t *testing.T, addr, cmd string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("INFO commandstats of %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(testenv.EncodeCommand("INFO", "commandstats")); err != nil {
		t.Fatalf("INFO commandstats of %s: %v", addr, err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO commandstats of %s: %q, %v", addr, head, err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		t.Fatalf("INFO commandstats of %s: %q", addr, head)
	}
	body := make([]byte, size+2)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("INFO commandstats of %s: %v", addr, err)
	}
	for _, ln := range strings.Split(string(body), "\n") {
		// cmdstat_asking:calls=12,usec=3,...
		rest, ok := strings.CutPrefix(strings.TrimSpace(ln), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		return n
	}
	return 0
}

// clusterFigure logs the figures of a cluster scenario: the ledger's, and
// the lateness of every delivery from its message's own due as sent.
func clusterFigure(t *testing.T, scenario string, rep ledgerReport, lr latenessReport, extra string) {
	t.Helper()
	testenv.Figure(t, "scenario=%s messages=%d deliveries=%d lost=%d duplicates=%d %s%s",
		scenario, rep.messages, rep.deliveries, rep.lost, rep.duplicates, lr, extra)
}

// wantDuplicatesAtMost fails t when rep counts more than maxDup
// duplicates, listing some, and saves the subs' logs.
func wantDuplicatesAtMost(t *testing.T, rep ledgerReport, subs []*sub, maxDup int, what string) {
	t.Helper()
	if rep.duplicates <= maxDup {
		return
	}
	n := 0
	for id, ds := range rep.dups {
		if n++; n <= 10 {
			t.Logf("duplicate %s: %s", id, describe(ds))
		}
	}
	t.Errorf("%d duplicates of %d messages %s, want at most %d", rep.duplicates, rep.messages, what, maxDup)
	saveLogs(t, subs)
}

// clusterFailover kills -9 the master that serves partition 0 of a
// 16-partition topic (and the others on its slots) 5 s into 4000 messages
// falling due over 15 s to 2 "sub --cluster" with the defaults. Its slots
// refuse connections until the cluster (cluster-node-timeout 2 s) marks
// it failed, then every node answers CLUSTERDOWN until its replica is
// promoted. The producers send everything before the kill: replication
// is asynchronous, and an enqueue acknowledged just before the kill may
// be lost with the master (docs/proxies.md), which is not what this
// measures. As TestCodisFailover with the default lease (10 s, longer
// than the failover): nothing lost or early, no duplicate.
func clusterFailover(t *testing.T) {
	const (
		topic, prefix = "e2e.cluster.failover", "clf"
		parts, n      = 16, 4000
		spread        = 15 * time.Second
		faultAt       = 5 * time.Second
		maxDup        = 0 // TestCodisFailover, lease-default
	)
	cl := testenv.StartCluster(t, testenv.ClusterOptions{NodeTimeout: 2 * time.Second})
	seeds := cl.Seeds()
	l := newLedger()
	c := clusterFaultClient(t, seeds, parts)
	subs := clusterFleet(t, l, c, seeds, topic, prefix, parts)
	start := time.Now().Add(time.Second)
	clusterSendSpread(t, l, seeds, topic, parts, prefix, n, 2, start, spread)

	victim, err := cl.MasterOf(partitionSlot(topic, 0))
	if err != nil {
		t.Fatal(err)
	}
	var onVictim []int
	for p := range parts {
		if m, err := cl.MasterOf(partitionSlot(topic, p)); err == nil && m == victim {
			onVictim = append(onVictim, p)
		}
	}
	time.Sleep(time.Until(start.Add(faultAt)))
	killed := time.Now()
	cl.Kill(t, victim)
	// The replica is promoted after cluster-node-timeout and an election.
	var promoted string
	waitFor(t, 20*time.Second, func() bool {
		m, err := cl.MasterOf(partitionSlot(topic, 0))
		if err != nil || m == victim {
			return false
		}
		promoted = m
		return true
	}, "the promotion of a replica of %s", victim)
	cl.WaitHealthy(t, 20*time.Second)
	healed := time.Since(killed)
	t.Logf("killed master %s (partitions %v) at %s; %s serves them, cluster healthy %v after the kill",
		victim, onVictim, killed.UTC().Format(time.RFC3339Nano), promoted, healed.Round(time.Millisecond))

	waitDrained(t, c, topic, l, subs)
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	lr := ownLateness(t, l)
	wantDuplicatesAtMost(t, rep, subs, maxDup, "after a master failover")
	if rep.duplicates > maxDup {
		// What the outage cost the owners: a duplicate follows a lost lease.
		for _, s := range subs {
			for _, ln := range strings.Split(s.stderr.String(), "\n") {
				if strings.Contains(ln, `msg="lease lost`) || strings.Contains(ln, `msg="cluster slot map changed"`) {
					t.Logf("sub %d: %s", s.idx, ln)
				}
			}
		}
	}
	if rep.lost > 0 {
		saveLogs(t, subs)
	}
	// The outage is logged as through the proxies: its start, then once
	// the map no longer names the dead master, its summary.
	if n, m := countLog(subs, `msg="outage: a node of the cluster does not answer; waiting for it"`), countLog(subs, `msg="outage over"`); n == 0 || m == 0 {
		t.Errorf("outage logged %d times and its end %d times by the subs, want both", n, m)
	}
	clusterFigure(t, "cluster-failover-lease-default", rep, lr,
		fmt.Sprintf(" partitions_on_victim=%d failover_ms=%d leases_lost=%d recovered=%d outage_logs=%d",
			len(onVictim), healed.Milliseconds(), subCounter(subs, "leases_lost"), subCounter(subs, "recovered"), countLog(subs, `msg="outage over"`)))
}

// clusterReshardUnderLoad moves the slots of 8 of a 16-partition
// topic's partitions to another master, one after another, while 3000
// messages fall due over 10 s to 2 "sub --cluster" with the defaults,
// half a second apart. The first move leaves its slot migrating for a
// second with some of the partition's keys moved and the others not: an
// ASK window under load, which the target's count of ASKING shows. As
// TestCodisSlotMigration: nothing lost, early or delivered twice.
func clusterReshardUnderLoad(t *testing.T) {
	const (
		topic, prefix = "e2e.cluster.reshard", "clr"
		parts, n      = 16, 3000
		spread        = 10 * time.Second
		faultAt       = 2 * time.Second
		moves         = parts / 2
		askWindow     = time.Second
		movePause     = 500 * time.Millisecond // between two moves: they spread over the load
	)
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	seeds := cl.Seeds()
	masters, err := cl.Masters()
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	c := clusterFaultClient(t, seeds, parts)
	subs := clusterFleet(t, l, c, seeds, topic, prefix, parts)
	start := time.Now().Add(time.Second)
	clusterSendSpread(t, l, seeds, topic, parts, prefix, n, 2, start, spread)
	time.Sleep(time.Until(start.Add(faultAt)))

	began := time.Now()
	var moved []int
	movedSlot := map[int]bool{}
	asks := 0 // ASKING run by the target of the first move during its window
	for p := 0; p < parts && len(moved) < moves; p += 2 {
		slot := partitionSlot(topic, p)
		if movedSlot[slot] {
			continue // two partitions on one slot: it moved already
		}
		from, err := cl.MasterOf(slot)
		if err != nil {
			t.Fatal(err)
		}
		to := masters[(slices.Index(masters, from)+1)%len(masters)]
		if len(moved) == 0 {
			// The ASK window: the scheduled set and the records moved,
			// the in-flight set, the lease and the rest still at the
			// source, for askWindow, while messages come due.
			before := commandCalls(t, to, "asking")
			cl.BeginMove(t, slot, to)
			cl.MoveKeys(t, slot, to, keys.Scheduled(clusterTopicNS, topic, p), keys.Records(clusterTopicNS, topic, p))
			time.Sleep(askWindow)
			cl.FinishMove(t, slot, to)
			asks = commandCalls(t, to, "asking") - before
		} else {
			time.Sleep(movePause)
			cl.MoveSlot(t, slot, to)
		}
		movedSlot[slot] = true
		moved = append(moved, p)
	}
	took := time.Since(began)
	if end := start.Add(spread); time.Now().After(end) {
		t.Logf("the moves ended %v after the last due: fewer of them were under load than meant", time.Since(end).Round(time.Millisecond))
	}
	t.Logf("moved the slots of partitions %v in %v", moved, took.Round(time.Millisecond))
	if asks == 0 {
		t.Errorf("no ASKING reached the target during the %v window of partition %d's move: the window saw no command of the partition", askWindow, moved[0])
	}

	waitDrained(t, c, topic, l, subs)
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	lr := ownLateness(t, l)
	wantDuplicatesAtMost(t, rep, subs, 0, "during a reshard")
	if rep.lost > 0 {
		saveLogs(t, subs)
	}
	clusterFigure(t, "cluster-reshard", rep, lr, fmt.Sprintf(" partitions_moved=%d reshard_ms=%d ask_window_askings=%d", len(moved), took.Milliseconds(), asks))
}

// clusterPartitionChange changes a topic's count from 4 to 8
// partitions through "partitions --cluster --set 8" while 2,000 messages
// come due over 10 s to two "sub --cluster": the new partitions land on
// other slots, so the moves go from master to master. 0 lost, 0 early,
// 0 duplicates.
func clusterPartitionChange(t *testing.T) {
	const (
		topic, prefix = "e2e.cluster.repart", "clp"
		parts, n      = 4, 2000
		spread        = 10 * time.Second
		faultAt       = 3 * time.Second
	)
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	seeds := cl.Seeds()
	l := newLedger()
	c := clusterFaultClient(t, seeds, parts)
	subs := clusterFleet(t, l, c, seeds, topic, prefix, parts)
	start := time.Now().Add(time.Second)
	clusterSendSpread(t, l, seeds, topic, parts, prefix, n, 2, start, spread)
	time.Sleep(time.Until(start.Add(faultAt)))

	began := time.Now()
	mustCLI(t, "", "partitions", "--cluster", "--addr", seeds, "--topic", topic, "--set", "8")
	took := waitPartitions(t, c, topic, 8, began)

	waitDrained(t, c, topic, l, subs)
	stopAllSubs(t, subs)
	rep := checkFaultLedger(t, l, topic)
	lr := ownLateness(t, l)
	wantDuplicatesAtMost(t, rep, subs, 0, "during a partition change")
	if rep.lost > 0 {
		saveLogs(t, subs)
	}
	slots := map[int]bool{}
	for p := range 8 {
		slots[partitionSlot(topic, p)] = true
	}
	clusterFigure(t, "cluster-partitions-4-to-8", rep, lr, fmt.Sprintf(" change_ms=%d slots=%d", took.Milliseconds(), len(slots)))
}

// clusterCommands runs, through the binary in cluster mode, the
// scripts the fleet scenarios do not reach, as TestCodisCommands does
// through Codis: a debounce and a replace, limits, a pause, a schedule,
// an export and its import.
func clusterCommands(t *testing.T) {
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	commandsScenario(t, "on a cluster", "cluster.commands", "--cluster", "--addr", cl.Seeds())
}

// clusterFlowControl runs a topic's flow control on a Redis Cluster
// through the binary: a rate limit of 100/s that two "sub --cluster"
// share while 1,500 messages are due at once (its tokens on one master,
// the topic's partitions on all three), and a pause of 2 s in the middle,
// during which nothing starts. Each message once, none early.
func clusterFlowControl(t *testing.T) {
	const (
		topic, prefix = "e2e.cluster.flow", "clf"
		parts, n      = 16, 1500
		rate          = 100.0
	)
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	seeds := cl.Seeds()
	l := newLedger()
	c := clusterFaultClient(t, seeds, parts)
	on := func(args ...string) result {
		t.Helper()
		return mustCLI(t, "", append(args[:1:1], append([]string{"--cluster", "--addr", seeds, "--topic", topic}, args[1:]...)...)...)
	}
	on("send", "--id", "first", "--body", "b")
	l.expect("first", []byte("b"), time.Now().Add(-time.Minute))
	on("limits", "--rate", "100/s")
	subs := clusterFleet(t, l, c, seeds, topic, prefix, parts)
	t0 := time.Now()
	clusterSendSpread(t, l, seeds, topic, parts, prefix, n-1, 2, t0, 0)

	// The rate is measured over 10 s (of the backlog's 15): over 5 s, a
	// stall of a quarter of a second on a loaded machine was 5% of it.
	time.Sleep(time.Until(t0.Add(11 * time.Second)))
	pausedAt := time.Now()
	r := on("pause", "--for", "2s")
	// The subs follow the pause within half a second of its store, which
	// ends before the command returns (on a loaded machine, the command's
	// dial and slot map read alone have taken longer than that).
	stored := time.Now()
	end := pausedUntil(t, r)
	waitFor(t, 60*time.Second, func() bool { return len(l.missing()) == 0 }, "every message delivered; %d missing", len(l.missing()))
	stopAllSubs(t, subs)

	mid := float64(startsWithin(l, t0.Add(time.Second), pausedAt)) / pausedAt.Sub(t0.Add(time.Second)).Seconds()
	during := startsWithin(l, stored.Add(500*time.Millisecond), end)
	t.Logf("rate limit 100/s on a cluster, 2 subs: %.1f/s before the pause; %d starts during its last %v", mid, during, end.Sub(stored.Add(500*time.Millisecond)).Round(time.Millisecond))
	if mid < rate*0.95 || mid > rate*1.05 {
		t.Errorf("limited to %.0f/s, the fleet started %.1f/s", rate, mid)
	}
	if during != 0 {
		t.Errorf("%d deliveries started during the pause", during)
	}
	checkOnceNotEarly(t, l)
	testenv.Figure(t, "scenario=cluster-rate-limit subs=2 messages=%d limit_per_s=100 started_per_s=%.1f paused_starts=%d", n, mid, during)
}
