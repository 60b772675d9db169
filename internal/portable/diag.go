package portable

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// DiagnosticShape is the audit shape of the INFO sections benchmarks read,
// outside the portable set (docs/portability.md): INFO memory, by
// BackendUsedMemory, and INFO cpu, by BackendCPU, straight to a Redis
// backend (never through a proxy) to measure memory and backend CPU per
// message (docs/benchmarks.md). Nothing on the queue's paths sends it.
const DiagnosticShape = "INFO memory (backend diagnostic)"

// BackendUsedMemory returns used_memory of the Redis server at addr,
// which must be a backend, not a proxy (proxies refuse INFO).
func BackendUsedMemory(ctx context.Context, addr, password string) (int64, error) {
	f, err := backendInfo(ctx, addr, password, DiagnosticShape, "memory")
	if err != nil {
		return 0, err
	}
	v, ok := f["used_memory"]
	if !ok {
		return 0, fmt.Errorf("INFO memory on %s: no used_memory", addr)
	}
	return strconv.ParseInt(v, 10, 64)
}

// SettingsShape is the audit shape of the INFO that BackendSettings
// sends straight to a backend (never through a proxy), for delayq doctor.
const SettingsShape = "INFO (backend diagnostic)"

// BackendInfo is what a Redis backend says of the settings delayq's
// guarantees rest on.
type BackendInfo struct {
	Version         string   // redis_version
	MaxmemoryPolicy string   // maxmemory_policy ("" when INFO does not say)
	AOF             bool     // aof_enabled: appendonly yes
	Replicas        []string // host:port of each replica connected to it (slave0, slave1, ...)
}

// BackendSettings reads version, maxmemory policy and AOF from INFO on the
// Redis server at addr, which must be a backend, not a proxy.
func BackendSettings(ctx context.Context, addr, password string) (BackendInfo, error) {
	f, err := backendInfo(ctx, addr, password, SettingsShape)
	if err != nil {
		return BackendInfo{}, err
	}
	if f["redis_version"] == "" {
		return BackendInfo{}, fmt.Errorf("INFO on %s: no redis_version (a proxy?)", addr)
	}
	return BackendInfo{
		Version: f["redis_version"], MaxmemoryPolicy: f["maxmemory_policy"], AOF: f["aof_enabled"] == "1",
		Replicas: replicasOf(f),
	}, nil
}

// replicasOf reads the replicas INFO lists, "slaveN:ip=...,port=...,...",
// as host:port, in the order of N.
func replicasOf(f map[string]string) []string {
	out := []string{}
	for i := 0; ; i++ {
		v, ok := f["slave"+strconv.Itoa(i)]
		if !ok {
			return out
		}
		kv := map[string]string{}
		for _, p := range strings.Split(v, ",") {
			if k, v, ok := strings.Cut(p, "="); ok {
				kv[k] = v
			}
		}
		if kv["ip"] != "" && kv["port"] != "" {
			out = append(out, net.JoinHostPort(kv["ip"], kv["port"]))
		}
	}
}

// FullCoverageShape is the audit shape of the CONFIG GET that
// ClusterFullCoverage sends straight to a node of a Redis Cluster, for
// delayq doctor --cluster.
const FullCoverageShape = ClusterMark + "CONFIG GET cluster-require-full-coverage"

// ClusterFullCoverage reads cluster-require-full-coverage from the node
// of a Redis Cluster at addr: true when it is yes, the default, under
// which every node refuses every command while a slot has no master.
func ClusterFullCoverage(ctx context.Context, addr, password string) (bool, error) {
	c, err := dialBackend(ctx, addr, password)
	if err != nil {
		return false, err
	}
	defer c.Close()
	const name = "cluster-require-full-coverage"
	Record(FullCoverageShape, nil)
	kv, err := redis.StringMap(redis.DoContext(c, ctx, "CONFIG", "GET", name))
	if err != nil {
		return false, fmt.Errorf("CONFIG GET %s on %s: %w", name, addr, err)
	}
	switch v, ok := kv[name]; {
	case !ok:
		return false, fmt.Errorf("CONFIG GET %s on %s: no such setting", name, addr)
	case strings.EqualFold(v, "yes"):
		return true, nil
	case strings.EqualFold(v, "no"):
		return false, nil
	default:
		return false, fmt.Errorf("CONFIG GET %s on %s: %q, want yes or no", name, addr, v)
	}
}

// backendInfo sends INFO (with section, if any) straight to the backend at
// addr, recording shape in the audit, and returns its fields.
func backendInfo(ctx context.Context, addr, password string, shape Shape, section ...any) (map[string]string, error) {
	c, err := dialBackend(ctx, addr, password)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	Record(shape, nil)
	s, err := redis.String(redis.DoContext(c, ctx, "INFO", section...))
	if err != nil {
		return nil, fmt.Errorf("INFO on %s (a backend, not a proxy?): %w", addr, err)
	}
	f := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			f[k] = v
		}
	}
	return f, nil
}

// dialBackend connects straight to the Redis server at addr, with no
// check of the commands: each caller records the shape it sends.
func dialBackend(ctx context.Context, addr, password string) (redis.Conn, error) {
	c, err := redis.DialContext(ctx, "tcp", addr,
		redis.DialConnectTimeout(DefaultConnectTimeout),
		redis.DialReadTimeout(DefaultReadTimeout),
		redis.DialWriteTimeout(DefaultWriteTimeout))
	if err != nil {
		return nil, fmt.Errorf("dial backend %s: %w", addr, err)
	}
	if password != "" {
		Record("AUTH", nil)
		if _, err := c.Do("AUTH", password); err != nil {
			c.Close()
			return nil, fmt.Errorf("auth backend %s: %w", addr, err)
		}
	}
	return c, nil
}
