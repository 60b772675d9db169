package portable

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// BackendCPU returns the CPU time (used_cpu_user plus used_cpu_sys of
// INFO cpu) the Redis server at addr has used, which must be a backend,
// not a proxy: what a benchmark reads before and after a run to tell the
// share of a backend's core the run took.
func BackendCPU(ctx context.Context, addr, password string) (time.Duration, error) {
	f, err := backendInfo(ctx, addr, password, DiagnosticShape, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(f[k], 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu on %s: %s %q: %v", addr, k, f[k], err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), nil
}
