package testenv

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterSlot checks Slot against the vectors of the Redis Cluster
// specification and values CLUSTER KEYSLOT of Redis 7.0 gave.
func TestClusterSlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#04x, want 0x31c3", got)
	}
	for key, want := range map[string]int{
		"123456789":            12739,
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363, // empty tag: the whole key
		"foo{{bar}}zap":        4015, // the tag is "{bar"
		"{bar":                 4015, // no '}': the whole key
		"foo{bar}{zap}":        5061, // the first tag only: "bar"
		"{}":                   15257,
		"}{a}":                 15495,
		"a{b":                  13340,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// randomKeys returns n keys of random length made of a few letters and
// braces, so that many have a hash tag, an empty one or an unclosed one.
func randomKeys(n int) []string {
	const alphabet = "ab{}z:"
	keys := make([]string, n)
	for i := range keys {
		b := make([]byte, 1+rand.IntN(12))
		for j := range b {
			b[j] = alphabet[rand.IntN(len(alphabet))]
		}
		keys[i] = string(b)
	}
	return keys
}

// TestClusterStart: with the default options, 3 masters with a replica
// each, every slot served by a master, the options applied, and Slot
// agreeing with the nodes' CLUSTER KEYSLOT.
func TestClusterStart(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{})
	nodes := c.Nodes()
	if len(nodes) != 6 {
		t.Fatalf("Nodes() = %v, want 6", nodes)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(nodes)))) != 6 {
		t.Fatalf("Nodes() = %v: not distinct", nodes)
	}
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 || !slices.IsSorted(masters) {
		t.Fatalf("Masters() = %v, want 3, sorted", masters)
	}
	if c.Seeds() != strings.Join(masters, ",") {
		t.Fatalf("Seeds() = %q, want the masters %v", c.Seeds(), masters)
	}
	owners := map[string]bool{}
	for _, slot := range []int{0, 8000, 16383} {
		m, err := c.MasterOf(slot)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(masters, m) {
			t.Fatalf("MasterOf(%d) = %s, not one of the masters %v", slot, m, masters)
		}
		owners[m] = true
	}
	if len(owners) != 3 {
		t.Fatalf("slots 0, 8000 and 16383 served by %v, want the 3 masters", owners)
	}
	if _, err := c.MasterOf(ClusterSlots); err == nil {
		t.Fatal("MasterOf(16384) did not fail")
	}

	for _, a := range nodes {
		reply, err := c.do(a, "CONFIG", "GET", "cluster-node-timeout")
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(reply); got != "[cluster-node-timeout 2000]" {
			t.Fatalf("%s: CONFIG GET cluster-node-timeout = %s", a, got)
		}
		info, err := c.bulk(a, "INFO", "replication")
		if err != nil {
			t.Fatal(err)
		}
		f := infoFields(info)
		switch isMaster := slices.Contains(masters, a); {
		case isMaster && (f["role"] != "master" || f["connected_slaves"] != "1"):
			t.Fatalf("master %s: role:%s connected_slaves:%s", a, f["role"], f["connected_slaves"])
		case !isMaster && (f["role"] != "slave" || f["master_link_status"] != "up"):
			t.Fatalf("replica %s: role:%s master_link_status:%s", a, f["role"], f["master_link_status"])
		}
	}

	keys := append(randomKeys(200), "123456789", "foo{}{bar}", "foo{{bar}}zap")
	for i, k := range keys {
		a := nodes[i%len(nodes)]
		reply, err := c.do(a, "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if want, ok := reply.(int64); !ok || Slot(k) != int(want) {
			t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT on %s = %v", k, Slot(k), a, reply)
		}
	}
}

// otherMaster returns a master of c other than not.
func otherMaster(t *testing.T, c *Cluster, not string) string {
	t.Helper()
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		if m != not {
			return m
		}
	}
	t.Fatalf("no master other than %s in %v", not, masters)
	return ""
}

// TestClusterMoveSlot: MoveSlot hands a slot over with its keys, more of
// them than one CLUSTER GETKEYSINSLOT batch.
func TestClusterMoveSlot(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{})
	slot := Slot("{move}")
	from, err := c.MasterOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	to := otherMaster(t, c, from)
	const n = 250
	for i := range n {
		k := "{move}:" + strconv.Itoa(i)
		if r := mustDo(t, from, "SET", k, "v"+strconv.Itoa(i), "PX", "600000"); r != "+OK" {
			t.Fatalf("SET %s on %s = %q", k, from, r)
		}
	}
	c.MoveSlot(t, slot, to)
	if got, err := c.MasterOf(slot); err != nil || got != to {
		t.Fatalf("after MoveSlot(%d, %s): MasterOf = %q, %v", slot, to, got, err)
	}
	for i := range n {
		k := "{move}:" + strconv.Itoa(i)
		if r := mustDo(t, to, "GET", k); r != "$v"+strconv.Itoa(i) {
			t.Fatalf("GET %s on %s after the move = %q", k, to, r)
		}
	}
	want := fmt.Sprintf("-MOVED %d %s", slot, to)
	if r := mustDo(t, from, "GET", "{move}:0"); r != want {
		t.Fatalf("GET on the old master %s = %q, want %q", from, r, want)
	}
	c.WaitHealthy(t, 10*time.Second)
}

// TestClusterBeginMove: in the middle of a move, the source answers -ASK
// for a key already moved and still serves the others; FinishMove moves
// the rest. The cluster has no replicas (Replicas < 0).
func TestClusterBeginMove(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{Replicas: -1})
	if len(c.Nodes()) != 3 {
		t.Fatalf("Nodes() = %v, want 3 masters and no replica", c.Nodes())
	}
	slot := Slot("{ask}")
	from, err := c.MasterOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	to := otherMaster(t, c, from)
	for _, k := range []string{"{ask}:moved", "{ask}:stays"} {
		if r := mustDo(t, from, "SET", k, k+"-v", "PX", "600000"); r != "+OK" {
			t.Fatalf("SET %s on %s = %q", k, from, r)
		}
	}
	c.BeginMove(t, slot, to)
	c.MoveKeys(t, slot, to, "{ask}:moved")
	if r, want := mustDo(t, from, "GET", "{ask}:moved"), fmt.Sprintf("-ASK %d %s", slot, to); r != want {
		t.Fatalf("GET of the moved key on the source = %q, want %q", r, want)
	}
	if r := mustDo(t, from, "GET", "{ask}:stays"); r != "${ask}:stays-v" {
		t.Fatalf("GET of the key not yet moved on the source = %q", r)
	}
	// Without ASKING, the target sends clients back to the owner.
	if r, want := mustDo(t, to, "GET", "{ask}:moved"), fmt.Sprintf("-MOVED %d %s", slot, from); r != want {
		t.Fatalf("GET on the target during the move = %q, want %q", r, want)
	}
	if got, err := c.MasterOf(slot); err != nil || got != from {
		t.Fatalf("during the move MasterOf = %q, %v; want the source %s", got, err, from)
	}
	c.FinishMove(t, slot, to)
	if got, err := c.MasterOf(slot); err != nil || got != to {
		t.Fatalf("after FinishMove MasterOf = %q, %v; want %s", got, err, to)
	}
	for _, k := range []string{"{ask}:moved", "{ask}:stays"} {
		if r := mustDo(t, to, "GET", k); r != "$"+k+"-v" {
			t.Fatalf("GET %s on %s after FinishMove = %q", k, to, r)
		}
	}
	c.WaitHealthy(t, 10*time.Second)
}

// TestClusterKillMaster: a killed master's replica takes over within a
// few node timeouts, and the killed node, restarted with its nodes.conf,
// rejoins as a replica. The nodes want a password.
func TestClusterKillMaster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{NodeTimeout: 2 * time.Second, Password: "s3cret"})
	if err := Ping(c.Nodes()[0]); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without AUTH: %v, want NOAUTH", err)
	}
	victim, err := c.MasterOf(0)
	if err != nil {
		t.Fatal(err)
	}
	victimID, err := c.myID(victim)
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, err := c.clusterNodes()
	if err != nil {
		t.Fatal(err)
	}
	replica := ""
	for _, ni := range nodes {
		if ni.master == victimID {
			replica = ni.addr
		}
	}
	if replica == "" {
		t.Fatalf("no replica of %s (%s) in %v", victim, victimID, nodes)
	}

	start := time.Now()
	c.Kill(t, victim)
	var masters []string
	WaitFor(t, 20*time.Second, "the replica "+replica+" promoted in place of "+victim, func() bool {
		masters, err = c.Masters()
		return err == nil && len(masters) == 3 && !slices.Contains(masters, victim)
	})
	if !slices.Contains(masters, replica) {
		t.Fatalf("Masters() = %v after the failover of %s, want its replica %s among them", masters, victim, replica)
	}
	c.WaitHealthy(t, 20*time.Second)
	t.Logf("failover with a 2s node timeout: %v", time.Since(start).Round(time.Millisecond))
	if got, err := c.MasterOf(0); err != nil || got != replica {
		t.Fatalf("MasterOf(0) = %q, %v; want the promoted %s", got, err, replica)
	}

	c.Restart(t, victim)
	if id, err := c.myID(victim); err != nil || id != victimID {
		t.Fatalf("restarted %s has id %q (%v), want %s: nodes.conf not kept", victim, id, err, victimID)
	}
	WaitFor(t, 20*time.Second, victim+" back as a replica", func() bool {
		info, err := c.bulk(victim, "INFO", "replication")
		f := infoFields(info)
		return err == nil && f["role"] == "slave" && f["master_link_status"] == "up"
	})
	c.WaitHealthy(t, 20*time.Second)
	if masters, err := c.Masters(); err != nil || len(masters) != 3 || slices.Contains(masters, victim) {
		t.Fatalf("after the restart Masters() = %v, %v; want 3 without %s", masters, err, victim)
	}
}
