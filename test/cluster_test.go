package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// clusterCLI runs the real binary against a Redis Cluster of 3
// masters: "send --cluster" with a seed list whose first node is down,
// "sub --cluster" until every message came, then a worker whose TOML
// says [redis] cluster = true. Each message is delivered once, and not
// before its due.
func clusterCLI(t *testing.T) {
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: -1})
	down := wFreeAddr(t)
	seeds := down + "," + cl.Seeds()
	const topic, n = "cluster.cli", 200
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"id":"m%d","body":"b%d","delay":"%dms"}`+"\n", i, i, i*5)
	}
	sent := time.Now()
	mustCLI(t, in.String(), "send", "--stdin", "--cluster", "--addr", seeds, "--topic", topic)
	out := subRun(t, seeds, topic, "--cluster", "--count", fmt.Sprint(n))
	seen := map[string]int{}
	for _, d := range out {
		seen[d.ID]++
		var i int
		fmt.Sscanf(d.ID, "m%d", &i)
		if due := sent.Add(time.Duration(i*5) * time.Millisecond); d.at.Before(due) {
			t.Errorf("%s delivered at %v, before %v", d.ID, d.at, due)
		}
	}
	if len(seen) != n || len(out) != n {
		t.Errorf("sub --cluster: %d deliveries of %d ids, want %d of %d", len(out), len(seen), n, n)
	}
	r := mustCLI(t, "", "stats", "--cluster", "--addr", cl.Seeds(), "--topic", topic)
	if !strings.Contains(r.stdout, "scheduled") {
		t.Errorf("stats --cluster: %s", r)
	}

	// A worker on the same cluster, from its TOML.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "worker.toml")
	listen := wFreeAddr(t)
	wWriteFile(t, cfg, fmt.Sprintf(`
[redis]
addr = %q
cluster = true
[http]
listen = %q
[[topic]]
name = "cluster.worker"
[topic.handler]
type = "exec"
command = ["sh", "-c", 'cat >>"$1"', "sh", %q]
`, seeds, listen, filepath.Join(dir, "out")))
	w := wStartWorker(t, "--config", cfg)
	var wi strings.Builder
	for i := range 20 {
		fmt.Fprintf(&wi, `{"id":"w%d","body":"w%d;"}`+"\n", i, i)
	}
	mustCLI(t, wi.String(), "send", "--stdin", "--cluster", "--addr", cl.Seeds(), "--topic", "cluster.worker")
	waitFor(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "out"))
		return strings.Count(string(b), ";") >= 20
	}, "the worker's 20 deliveries")
	b, _ := os.ReadFile(filepath.Join(dir, "out"))
	for i := range 20 {
		if c := strings.Count(string(b), fmt.Sprintf("w%d;", i)); c != 1 {
			t.Errorf("w%d delivered %d times by the worker", i, c)
		}
	}
	if code := w.stop(t, 10*time.Second); code != 0 {
		t.Errorf("worker exit status %d after SIGTERM, want 0", code)
	}
}

// TestCluster runs the Redis Cluster scenarios one after another, beside
// the package's other parallel tests: each starts a cluster, producers
// and subs, and together they would load 2 cores enough to slow the
// lease-bounded scenarios beside them.
func TestCluster(t *testing.T) {
	t.Parallel()
	t.Run("CLI", clusterCLI)
	t.Run("Commands", clusterCommands)
	t.Run("FlowControl", clusterFlowControl)
	t.Run("PartitionChange", clusterPartitionChange)
	t.Run("ReshardUnderLoad", clusterReshardUnderLoad)
	t.Run("Failover", clusterFailover)
}
