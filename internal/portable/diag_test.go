package portable

import (
	"slices"
	"testing"
)

func TestReplicasOf(t *testing.T) {
	f := map[string]string{
		"role":   "master",
		"slave0": "ip=10.0.0.2,port=7003,state=online,offset=14,lag=0",
		"slave1": "ip=::1,port=7004,state=wait_bgsave,offset=0,lag=0",
		"slave3": "ip=10.0.0.9,port=7009,state=online,offset=14,lag=0", // after a gap: not read
	}
	if got, want := replicasOf(f), []string{"10.0.0.2:7003", "[::1]:7004"}; !slices.Equal(got, want) {
		t.Errorf("replicasOf = %v, want %v", got, want)
	}
	if got := replicasOf(map[string]string{"role": "slave"}); got == nil || len(got) != 0 {
		t.Errorf("replicasOf of a replica = %#v, want empty", got)
	}
}

// The shape doctor --cluster sends is in the audit's own list, marked as
// a cluster command.
func TestFullCoverageShapeAllowed(t *testing.T) {
	if !allowedShapes[FullCoverageShape] || FullCoverageShape[:len(ClusterMark)] != ClusterMark {
		t.Errorf("%q: allowed %v", FullCoverageShape, allowedShapes[FullCoverageShape])
	}
}
