package portable

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// DiagnosticShape is the audit shape of the one command outside the
// portable set that delayq may send: INFO memory, by BackendUsedMemory,
// straight to a Redis backend (never through a proxy) to measure memory
// per message for benchmarks (DESIGN.md section 8). Nothing on the
// queue's paths sends it.
const DiagnosticShape = "INFO memory (backend diagnostic)"

// BackendUsedMemory returns used_memory of the Redis server at addr,
// which must be a backend, not a proxy (proxies refuse INFO).
func BackendUsedMemory(ctx context.Context, addr, password string) (int64, error) {
	c, err := redis.DialContext(ctx, "tcp", addr,
		redis.DialConnectTimeout(DefaultConnectTimeout),
		redis.DialReadTimeout(DefaultReadTimeout),
		redis.DialWriteTimeout(DefaultWriteTimeout))
	if err != nil {
		return 0, fmt.Errorf("dial backend %s: %w", addr, err)
	}
	defer c.Close()
	if password != "" {
		Record("AUTH", nil)
		if _, err := c.Do("AUTH", password); err != nil {
			return 0, fmt.Errorf("auth backend %s: %w", addr, err)
		}
	}
	Record(DiagnosticShape, nil)
	s, err := redis.String(redis.DoContext(c, ctx, "INFO", "memory"))
	if err != nil {
		return 0, fmt.Errorf("INFO memory on %s (a backend, not a proxy?): %w", addr, err)
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory on %s: no used_memory", addr)
}
