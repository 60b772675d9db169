package portable_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// On the nodes of a cluster: a master's INFO names its replica, and
// cluster-require-full-coverage reads yes (the default), then no once
// set so.
func TestClusterDiagnostics(t *testing.T) {
	cl := testenv.StartCluster(t, testenv.ClusterOptions{Password: "pw"})
	ctx := context.Background()
	masters := strings.Split(cl.Seeds(), ",")
	replicas := 0
	for _, m := range masters {
		bi, err := portable.BackendSettings(ctx, m, "pw")
		if err != nil {
			t.Fatal(err)
		}
		if len(bi.Replicas) != 1 || slices.Contains(masters, bi.Replicas[0]) || !slices.Contains(cl.Nodes(), bi.Replicas[0]) {
			t.Errorf("master %s: replicas %v, want one of the other nodes %v", m, bi.Replicas, cl.Nodes())
		}
		replicas += len(bi.Replicas)
		full, err := portable.ClusterFullCoverage(ctx, m, "pw")
		if err != nil || !full {
			t.Errorf("ClusterFullCoverage(%s) = %v, %v; want the default yes", m, full, err)
		}
	}
	if replicas != len(masters) {
		t.Errorf("%d replicas, want %d", replicas, len(masters))
	}
	c, err := redis.Dial("tcp", masters[0], redis.DialPassword("pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do("CONFIG", "SET", "cluster-require-full-coverage", "no"); err != nil {
		t.Fatal(err)
	}
	if full, err := portable.ClusterFullCoverage(ctx, masters[0], "pw"); err != nil || full {
		t.Errorf("after CONFIG SET no: %v, %v", full, err)
	}
	if _, err := portable.ClusterFullCoverage(ctx, masters[0], "wrong"); err == nil || !strings.Contains(err.Error(), masters[0]) {
		t.Errorf("a wrong password: %v, want an error naming %s", err, masters[0])
	}
}
