package portable

import (
	"context"
	"fmt"
	"strconv"
)

// BackendCommandsProcessed returns total_commands_processed of INFO stats
// on the Redis server at addr, which must be a backend, not a proxy: the
// commands it has run since it started, the commands scripts call
// included (and this INFO not yet). A benchmark reads it before and after
// a window to tell the commands a second a workload costs the servers
// (audited as DiagnosticShape).
func BackendCommandsProcessed(ctx context.Context, addr, password string) (int64, error) {
	f, err := backendInfo(ctx, addr, password, DiagnosticShape, "stats")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(f["total_commands_processed"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO stats on %s: total_commands_processed %q: %v", addr, f["total_commands_processed"], err)
	}
	return v, nil
}
