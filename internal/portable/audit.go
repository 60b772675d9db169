package portable

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// allowedShapes is the portable set (check.go, docs/portability.md) written out as
// shapes, independently of Check, so that the audit of a test run does not
// trust the code it audits.
var allowedShapes = map[string]bool{
	"PING": true, "AUTH": true,
	"SET PX": true, "SET NX PX": true, "GET": true, "DEL": true, "EXISTS": true,
	"PEXPIRE": true, "PTTL": true, "INCR": true, "INCRBY": true,
	"HSET": true, "HSETNX": true, "HMSET": true, "HMGET": true, "HGET": true, "HDEL": true,
	"HINCRBY": true, "HLEN": true, "HSCAN": true, "HSCAN COUNT": true, "HSCAN MATCH": true, "HSCAN MATCH COUNT": true,
	"ZADD": true, "ZADD NX": true, "ZADD XX": true, "ZADD CH": true, "ZADD NX CH": true, "ZADD XX CH": true,
	"ZRANGEBYSCORE": true, "ZRANGEBYSCORE WITHSCORES": true, "ZRANGEBYSCORE LIMIT": true, "ZRANGEBYSCORE WITHSCORES LIMIT": true,
	"ZREVRANGEBYSCORE": true, "ZREVRANGEBYSCORE WITHSCORES": true, "ZREVRANGEBYSCORE LIMIT": true, "ZREVRANGEBYSCORE WITHSCORES LIMIT": true,
	"ZRANGE": true, "ZRANGE WITHSCORES": true, "ZREM": true, "ZSCORE": true, "ZCARD": true, "ZCOUNT": true,
	"ZSCAN": true, "ZSCAN COUNT": true, "ZSCAN MATCH": true, "ZSCAN MATCH COUNT": true,
	"LPUSH": true, "RPUSH": true, "LRANGE": true, "LLEN": true, "LREM": true,
	"EVALSHA 1": true, "EVAL 1": true,
	// Sent only to backends, by benchmarks and doctor: see BackendUsedMemory
	// and BackendSettings.
	DiagnosticShape: true,
	SettingsShape:   true,
	// Sent only on connections to the nodes of a Redis Cluster (see
	// CheckCluster): never through a proxy.
	ClusterMark + "ASKING":        true,
	ClusterMark + "CLUSTER SLOTS": true,
	// Sent only by delayq doctor --cluster, on a connection of its own
	// straight to each master (see ClusterFullCoverage).
	ClusterMark + "CONFIG GET cluster-require-full-coverage": true,
}

// AuditReport is the verdict on an audit log.
type AuditReport struct {
	Shapes  map[string]int // distinct shape -> lines that recorded it
	Refused []string       // lines the checker refused at run time
	Unknown []string       // shapes recorded as sent but outside the portable set
}

// OK reports whether every recorded command was portable.
func (r *AuditReport) OK() bool { return len(r.Refused) == 0 && len(r.Unknown) == 0 }

// ReadAudit parses an audit log written through DELAYQ_COMMAND_AUDIT.
func ReadAudit(rd io.Reader) (*AuditReport, error) {
	rep := &AuditReport{Shapes: map[string]int{}}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		shape, verdict, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("audit line %d: no verdict: %q", n, line)
		}
		rep.Shapes[shape]++
		switch {
		case verdict != "ok":
			rep.Refused = append(rep.Refused, line)
		case !allowedShapes[shape]:
			rep.Unknown = append(rep.Unknown, shape)
		}
	}
	sort.Strings(rep.Unknown)
	return rep, sc.Err()
}
