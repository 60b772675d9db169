package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// TestShards: a master per shard with its replica and its slots, every
// node of the cluster once, the slots summing to 16384; without
// replicas, each shard has none.
func TestShards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"replicas", 1}, {"no replica", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: tc.replicas})
			r := newRouter(t, cl.Seeds())
			shards := waitShards(t, r, max(tc.replicas, 0))
			masters, err := cl.Masters()
			if err != nil {
				t.Fatal(err)
			}
			if len(shards) != len(masters) {
				t.Fatalf("%d shards %+v, want %d", len(shards), shards, len(masters))
			}
			seen := map[string]bool{}
			total := 0
			for _, s := range shards {
				if !slices.Contains(masters, s.Master) {
					t.Errorf("shard master %s is not a master %v", s.Master, masters)
				}
				want := max(tc.replicas, 0)
				if len(s.Replicas) != want || s.Replicas == nil {
					t.Errorf("master %s has replicas %v, want %d", s.Master, s.Replicas, want)
				}
				for _, a := range append([]string{s.Master}, s.Replicas...) {
					if seen[a] {
						t.Errorf("node %s in two shards", a)
					}
					seen[a] = true
				}
				if s.Slots < 1 {
					t.Errorf("master %s serves %d slots", s.Master, s.Slots)
				}
				total += s.Slots
				// The router routes by the same map.
				for _, slot := range []int{0, 5000, Slots - 1} {
					owner, err := cl.MasterOf(slot)
					if err != nil {
						t.Fatal(err)
					}
					if got, err := r.Addr(context.Background(), slot); err != nil || got != owner {
						t.Errorf("Addr(%d) = %s, %v; want %s", slot, got, err, owner)
					}
				}
			}
			if total != Slots {
				t.Errorf("shards serve %d slots, want %d", total, Slots)
			}
			for _, a := range cl.Nodes() {
				if !seen[a] {
					t.Errorf("node %s in no shard: %+v", a, shards)
				}
			}
		})
	}
}

// waitShards returns the shards once each master lists replicas replicas.
// Redis 7.0 leaves out of CLUSTER SLOTS a replica whose replication
// offset it has not heard to be above 0: one of a master never written
// to, until the master's first replication PING (repl-ping-replica-period,
// 10 s). A write to each master makes it sooner.
func waitShards(t *testing.T, r *Router, replicas int) []Shard {
	t.Helper()
	ctx := context.Background()
	c := r.Conn()
	defer c.Close()
	for i := range 60 {
		if _, err := c.Do("SET", fmt.Sprintf("{w%d}:k", i), 1, "PX", 60000); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		shards, err := r.Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for _, s := range shards {
			ok = ok && len(s.Replicas) >= replicas
		}
		if ok || time.Now().After(deadline) {
			return shards
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShardsOf: a master's ranges merge, its replicas once each, in the
// order of the first slot.
func TestShardsOf(t *testing.T) {
	got := shardsOf([]slotRange{
		{first: 100, last: 199, master: "b:1", replicas: []string{"b:2"}},
		{first: 0, last: 99, master: "a:1"},
		{first: 200, last: 200, master: "b:1", replicas: []string{"b:2", "b:3"}},
	})
	want := []Shard{{Master: "a:1", Replicas: []string{}, Slots: 100}, {Master: "b:1", Replicas: []string{"b:2", "b:3"}, Slots: 101}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Master != want[i].Master || got[i].Slots != want[i].Slots || !slices.Equal(got[i].Replicas, want[i].Replicas) {
			t.Errorf("shard %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestParseSlotsReplicas: the nodes after the master in an entry are its
// replicas; an empty ip is the answering node's host.
func TestParseSlotsReplicas(t *testing.T) {
	reply := []any{
		[]any{int64(0), int64(8191), []any{[]byte("10.0.0.1"), int64(7000), []byte("id1")}, []any{[]byte(""), int64(7003), []byte("id4")}},
		[]any{int64(8192), int64(16383), []any{[]byte("10.0.0.2"), int64(7001)}},
	}
	m, err := parseSlots(reply, "10.0.0.9:7000")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[0].master != "10.0.0.1:7000" || !slices.Equal(m[0].replicas, []string{"10.0.0.9:7003"}) ||
		m[1].master != "10.0.0.2:7001" || len(m[1].replicas) != 0 {
		t.Errorf("parsed %+v", m)
	}
	bad := []any{[]any{int64(0), int64(10), []any{[]byte("10.0.0.1"), int64(7000)}, []any{[]byte("x")}}}
	if _, err := parseSlots(bad, "h:1"); err == nil {
		t.Error("a replica without a port: no error")
	}
}
