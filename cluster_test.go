package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/cluster"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
)

// clusterClient starts a Redis Cluster of 3 masters (no replicas) and
// returns it with a client in cluster mode over its seeds.
func clusterClient(t *testing.T, o Options) (*testenv.Cluster, *Client) {
	t.Helper()
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	o.Cluster = true
	return cl, newClient(t, cl.Seeds(), o)
}

// partitionsPerMaster returns how many of topic's partitions each master
// serves now.
func partitionsPerMaster(t *testing.T, cl *testenv.Cluster, topic string, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for p := range n {
		m, err := cl.MasterOf(cluster.Slot(keys.Scheduled(DefaultNamespace, topic, p)))
		if err != nil {
			t.Fatal(err)
		}
		out[m]++
	}
	return out
}

// TestClusterLifecycle sends, deletes, reschedules and consumes a topic
// of 16 partitions over a cluster of 3 masters: every message is
// delivered once and not early, and the partitions hold keys on every
// master.
func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, c := clusterClient(t, Options{Partitions: 16})
	const topic, n = "spread", 300
	for i := range n {
		if _, err := c.Send(ctx, Message{Topic: topic, ID: fmt.Sprintf("m%d", i), Body: []byte("b"), Delay: time.Duration(i%3) * 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Send(ctx, Message{Topic: topic, ID: "m3"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate enqueue: %v, want ErrDuplicate", err)
	}
	if err := c.Delete(ctx, topic, "m4"); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Second)
	if _, err := c.Reschedule(ctx, topic, "m5", due); err != nil {
		t.Fatal(err)
	}
	per := partitionsPerMaster(t, cl, topic, 16)
	if len(per) != 3 {
		t.Errorf("16 partitions over %d masters (%v), want 3", len(per), per)
	}
	rec := newRecorder()
	k := runConsumer(t, c, ConsumerOptions{Topic: topic}, rec.handle)
	waitFor(t, 20*time.Second, "deliveries", func() bool { return rec.total() >= n-1 })
	waitFor(t, 5*time.Second, "acks", func() bool { return k.Stats().Acked >= n-1 })
	if rec.count("m4") != 0 {
		t.Error("deleted m4 was delivered")
	}
	for id, ds := range rec.seen {
		if len(ds) != 1 {
			t.Errorf("%s delivered %d times", id, len(ds))
		}
		if rec.at[id][0].Before(ds[0].Due) {
			t.Errorf("%s delivered at %v, before its due %v", id, rec.at[id][0], ds[0].Due)
		}
	}
	if at := rec.at["m5"]; len(at) != 1 || at[0].Before(due) {
		t.Errorf("rescheduled m5 delivered at %v, want once, after %v", at, due)
	}
	st, err := c.Inspector().Stats(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if st.Scheduled != 0 || st.InFlight != 0 || st.Dead != 0 {
		t.Errorf("stats after draining: %+v", st)
	}
}

// TestClusterReshard moves the slots of four of a topic's partitions to
// another master while their messages come due and are delivered: none
// is lost, none delivered twice, none early.
func TestClusterReshard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, c := clusterClient(t, Options{Partitions: 8})
	const topic, n = "reshard", 2000
	start := time.Now()
	for i := range n {
		if _, err := c.Send(ctx, Message{Topic: topic, ID: fmt.Sprintf("m%d", i), Delay: time.Duration(i) * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	early := 0
	k := runConsumer(t, c, ConsumerOptions{Topic: topic}, func(ctx context.Context, d *Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		seen[d.ID]++
		if time.Now().Before(d.Due) {
			early++
		}
		return nil
	})
	masters, err := cl.Masters()
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for p := range 8 {
		slot := cluster.Slot(keys.Scheduled(DefaultNamespace, topic, p))
		from, err := cl.MasterOf(slot)
		if err != nil {
			t.Fatal(err)
		}
		to := masters[0]
		if to == from {
			to = masters[1]
		}
		cl.MoveSlot(t, slot, to)
		if moved++; moved == 4 {
			break
		}
	}
	if time.Since(start) > time.Duration(n)*time.Millisecond {
		t.Logf("the moves ended after the last due (%v): the test moved fewer slots under load than it means to", time.Since(start))
	}
	waitFor(t, 30*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	waitFor(t, 5*time.Second, "acks", func() bool { return k.Stats().Acked >= n })
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	if dups != 0 || early != 0 {
		t.Errorf("over the reshard: %d duplicates, %d early of %d", dups, early, n)
	}
}
