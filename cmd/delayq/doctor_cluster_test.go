package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// clusterTopic creates topic with 16 partitions through the library in
// cluster mode, with one message.
func clusterTopic(t *testing.T, seeds, topic string) {
	t.Helper()
	c, err := delayq.New(delayq.Options{Addr: seeds, Cluster: true, Partitions: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Send(context.Background(), delayq.Message{Topic: topic, Body: []byte("x"), Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

// TestDoctorCluster: on a cluster of 3 masters with a replica each, a
// report per master with every check passed on scratch keys of that
// master, the settings of all 6 nodes, the full-coverage warning (the
// nodes keep the default yes), and the 16 partitions of a topic counted
// per master; --json parses to the same.
func TestDoctorCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{})
	clusterTopic(t, cl.Seeds(), "orders")
	masters, err := cl.Masters()
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runArgs(t, "doctor", "--cluster", "--addr", cl.Seeds(), "--samples", "5")
	if err != nil {
		t.Fatalf("doctor --cluster: %v\n%s", err, stdout)
	}
	if strings.Contains(stdout, "FAIL") {
		t.Errorf("a failed check:\n%s", stdout)
	}
	for _, m := range masters {
		for _, want := range []string{
			"delayq doctor " + m + " (scratch keys dq:doctor:{",
			"master " + m + ": ",
			"warn master " + m + ": cluster-require-full-coverage is yes: while any slot has no master",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		}
	}
	for _, n := range cl.Nodes() {
		if want := "backend " + n + ": redis "; !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
		if !regexp.MustCompile(`backend ` + regexp.QuoteMeta(n) + `: redis \S+, maxmemory-policy noeviction, appendonly yes\n`).MatchString(stdout) {
			t.Errorf("no noeviction and appendonly line for node %s:\n%s", n, stdout)
		}
	}
	if got := strings.Count(stdout, "\nall 43 checks passed\n"); got != 3 {
		t.Errorf("%d reports of 43 checks passed (41 + 2 nodes), want 3:\n%s", got, stdout)
	}
	if strings.Contains(stdout, "has no replica") {
		t.Errorf("a no-replica warning with a replica each:\n%s", stdout)
	}
	m := regexp.MustCompile(`topic orders: 16 partitions per master: (.*)\n`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no partitions line for topic orders:\n%s", stdout)
	}
	sum := 0
	for _, part := range strings.Split(m[1], ", ") {
		addr, n, _ := strings.Cut(part, " ")
		k, err := strconv.Atoi(n)
		if err != nil || !slices.Contains(masters, addr) {
			t.Errorf("partitions %q: not a master's count", part)
		}
		sum += k
	}
	if sum != 16 {
		t.Errorf("partitions per master sum to %d, want 16: %s", sum, m[0])
	}
	if !strings.Contains(stdout, "cluster: 3 masters, 3 replicas, 16384 of 16384 slots served\n") ||
		!strings.HasSuffix(stdout, "all 129 checks passed on 3 masters\n") {
		t.Errorf("cluster summary:\n%s", stdout)
	}

	stdout, _, err = runArgs(t, "doctor", "--cluster", "--addr", cl.Seeds(), "--json", "--samples", "2")
	if err != nil {
		t.Fatalf("doctor --cluster --json: %v\n%s", err, stdout)
	}
	var rep clusterReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if len(rep.Masters) != 3 || rep.Failed != 0 || rep.Passed != 129 || rep.Replicas != 3 || rep.Slots != 16384 || len(rep.Topics) != 1 {
		t.Fatalf("report: %d masters, %d passed, %d failed, %d replicas, %d slots, topics %+v",
			len(rep.Masters), rep.Passed, rep.Failed, rep.Replicas, rep.Slots, rep.Topics)
	}
	nodes := map[string]bool{}
	for _, mr := range rep.Masters {
		// The scratch keys were on a slot of the master checked.
		if owner, err := cl.MasterOf(testenv.Slot(strings.TrimSuffix(mr.Keys, "*"))); err != nil || owner != mr.Addr {
			t.Errorf("scratch keys %s of master %s are served by %s (%v)", mr.Keys, mr.Addr, owner, err)
		}
		mc := mr.Cluster
		if mc == nil || mr.Failed != 0 || len(mc.Replicas) != 1 || mc.FullCoverage == nil || !*mc.FullCoverage || len(mr.Backends) != 2 {
			t.Errorf("master %s: %+v, %d failed", mr.Addr, mc, mr.Failed)
			continue
		}
		for _, b := range mr.Backends {
			nodes[b.Addr] = b.AppendOnly && b.MaxmemoryPolicy == "noeviction"
		}
	}
	for _, n := range cl.Nodes() {
		if !nodes[n] {
			t.Errorf("node %s: not read, or not appendonly noeviction: %v", n, nodes)
		}
	}
	if ts := rep.Topics[0]; ts.Topic != "orders" || ts.Partitions != 16 || len(ts.Masters) != 3 {
		t.Errorf("topic: %+v", ts)
	} else if sum := ts.Masters[masters[0]] + ts.Masters[masters[1]] + ts.Masters[masters[2]]; sum != 16 {
		t.Errorf("topic %+v: %d partitions over the masters, want 16", ts, sum)
	}
}

// TestDoctorClusterNoReplica: without replicas, each master is warned
// about, and the checks still pass, with a password.
func TestDoctorClusterNoReplica(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1, Password: "pw"})
	stdout, _, err := runArgs(t, "doctor", "--cluster", "--addr", cl.Seeds(), "--password", "pw", "--samples", "2")
	if err != nil {
		t.Fatalf("doctor --cluster: %v\n%s", err, stdout)
	}
	masters, err := cl.Masters()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		want := "warn master " + m + " has no replica: when it fails, its slots stop until it comes back, and with appendonly off its messages are lost\n"
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"hint AUTH was accepted.", "cluster: 3 masters, 0 replicas, 16384 of 16384 slots served\n",
		"no topic in namespace dq", "all 126 checks passed on 3 masters\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestDoctorClusterUsage: --backends does not go with --cluster, and a
// seed list where nothing answers is an error naming the seeds.
func TestDoctorClusterUsage(t *testing.T) {
	args := []string{"doctor", "--cluster", "--addr", "127.0.0.1:7000", "--backends", "127.0.0.1:7001"}
	_, _, err := runArgs(t, args...)
	checkUsageError(t, args, err, "--backends")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	stdout, _, err := runArgs(t, "doctor", "--cluster", "--addr", dead, "--timeout", "500ms")
	var ue *usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), dead) || stdout != "" {
		t.Errorf("a dead seed: err = %v, stdout %q; want a plain error naming %s", err, stdout, dead)
	}
}

func TestSpreadWarnings(t *testing.T) {
	masters := []string{"a:1", "b:1", "c:1"}
	for _, tc := range []struct {
		name   string
		ts     topicSpread
		want   []string
		wantNo bool
	}{
		{"even", topicSpread{Topic: "t", Partitions: 16, Masters: map[string]int{"a:1": 6, "b:1": 5, "c:1": 5}}, nil, true},
		{"fewer partitions than masters", topicSpread{Topic: "t", Partitions: 2, Masters: map[string]int{"a:1": 2}}, nil, true},
		{"none", topicSpread{Topic: "t", Partitions: 4, Masters: map[string]int{"a:1": 3, "b:1": 1}},
			[]string{"topic t: master c:1 serves none of its 4 partitions", "delayq partitions --topic t --set 8"}, false},
		{"two none", topicSpread{Topic: "t", Partitions: 4, Masters: map[string]int{"a:1": 4}},
			[]string{"masters b:1, c:1 serve none"}, false},
		{"uneven", topicSpread{Topic: "t", Partitions: 12, Masters: map[string]int{"a:1": 7, "b:1": 2, "c:1": 3}},
			[]string{"topic t: master a:1 serves 7 of its 12 partitions, more than twice the 2 of master b:1", "--set 24"}, false},
		{"twice is fine", topicSpread{Topic: "t", Partitions: 8, Masters: map[string]int{"a:1": 4, "b:1": 2, "c:1": 2}}, nil, true},
		{"unserved", topicSpread{Topic: "t", Partitions: 2, Masters: map[string]int{"a:1": 1}, Unserved: 1},
			[]string{"topic t: 1 of its 2 partitions are on slots no master serves"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := spreadWarnings(tc.ts, masters)
			if tc.wantNo != (len(ws) == 0) {
				t.Fatalf("warnings %q", ws)
			}
			all := strings.Join(ws, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q lack %q", ws, w)
				}
			}
		})
	}
}
