package portable

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// ErrNotPortable is wrapped by every refusal of a command outside the
// portable set (docs/portability.md).
var ErrNotPortable = errors.New("delayq: command not in the portable set")

// Shape is the audited form of a command: its name and option words, with
// keys and values left out, e.g. "SET NX PX" or "ZRANGEBYSCORE WITHSCORES LIMIT".
type Shape string

// keyless commands: allowed with no key at all.
// AUTH is the connection's password; both proxies pass it through.
var keyless = map[string]bool{"PING": true, "AUTH": true}

// fixed arity commands (arguments after the command name, key included).
var fixed = map[string]int{
	"GET": 1, "DEL": 1, "EXISTS": 1, "PEXPIRE": 2, "PTTL": 1, "INCR": 1, "INCRBY": 2,
	"HSET": 3, "HSETNX": 3, "HGET": 2, "HINCRBY": 3, "HLEN": 1,
	"ZSCORE": 2, "ZCARD": 1, "ZCOUNT": 3,
	"LRANGE": 3, "LLEN": 1, "LREM": 3,
}

// variadic commands: a key then at least min arguments.
var variadic = map[string]int{
	"HMGET": 1, "HDEL": 1, "ZREM": 1, "LPUSH": 1, "RPUSH": 1,
}

var (
	scriptsMu sync.RWMutex
	scripts   = map[string]string{} // sha1 hex -> source
)

// callRE finds the commands a Lua script calls.
var callRE = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)

// RegisterScript records src as a script delayq may send with EVALSHA or
// EVAL. It returns an error if the script calls a command outside the
// portable set. Safe for concurrent use.
func RegisterScript(src string) error {
	for _, m := range callRE.FindAllStringSubmatch(src, -1) {
		name := strings.ToUpper(m[1])
		if keyless[name] || strings.HasPrefix(name, "EVAL") {
			return fmt.Errorf("%w: script calls %s", ErrNotPortable, name)
		}
		if _, ok := fixed[name]; ok {
			continue
		}
		if _, ok := variadic[name]; ok {
			continue
		}
		switch name {
		case "SET", "HMSET", "HSCAN", "ZADD", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZRANGE", "ZSCAN":
			continue
		}
		return fmt.Errorf("%w: script calls %s", ErrNotPortable, name)
	}
	sum := sha1.Sum([]byte(src))
	scriptsMu.Lock()
	scripts[hex.EncodeToString(sum[:])] = src
	scriptsMu.Unlock()
	return nil
}

// redsync's lock scripts (github.com/go-redsync/redsync/v4 scripts.go),
// which call only GET, DEL, PEXPIRE and SET NX PX on their one key.
var redsyncScripts = map[string]bool{
	"e950836ed1e694540c503ef9972b8de518044d3b": true, // release
	"d75bb8b5bd13532ddedd17762e772346e39b321e": true, // extend
	"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79": true, // extend with SET NX
}

func knownScript(sha string) bool {
	if redsyncScripts[sha] {
		return true
	}
	scriptsMu.RLock()
	defer scriptsMu.RUnlock()
	_, ok := scripts[sha]
	return ok
}

func str(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	default:
		return fmt.Sprint(v)
	}
}

func refuse(cmd string, format string, a ...any) error {
	return fmt.Errorf("%w: %s %s", ErrNotPortable, cmd, fmt.Sprintf(format, a...))
}

// Named reports whether cmd names a command of the portable set, in any
// shape: a proxy's per-command counters name commands only.
func Named(cmd string) bool {
	name := strings.ToUpper(cmd)
	if _, ok := fixed[name]; ok || keyless[name] {
		return true
	}
	if _, ok := variadic[name]; ok {
		return true
	}
	switch name {
	case "SET", "HMSET", "HSCAN", "ZSCAN", "ZADD", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZRANGE", "EVALSHA", "EVAL":
		return true
	}
	return false
}

// Check returns the shape of the command and nil if it is in the portable
// set with exactly one key (none for PING and AUTH), or an error wrapping
// ErrNotPortable that says why not. Safe for concurrent use.
func Check(cmd string, args ...any) (Shape, error) {
	name := strings.ToUpper(cmd)
	n := len(args)
	if keyless[name] {
		if name == "PING" && n != 0 {
			return Shape(name), refuse(name, "with an argument (Twemproxy closes the connection)")
		}
		if name == "AUTH" && n != 1 {
			return Shape(name), refuse(name, "with %d arguments, want 1", n)
		}
		return Shape(name), nil
	}
	if want, ok := fixed[name]; ok {
		if n != want {
			return Shape(name), refuse(name, "with %d arguments, want %d (one key)", n, want)
		}
		return Shape(name), nil
	}
	if min, ok := variadic[name]; ok {
		if n < 1+min {
			return Shape(name), refuse(name, "with %d arguments, want a key and at least %d more", n, min)
		}
		return Shape(name), nil
	}
	switch name {
	case "SET":
		// SET k v PX ms | SET k v NX PX ms
		opts := make([]string, 0, 3)
		for _, a := range args[min(2, n):] {
			if o := strings.ToUpper(str(a)); o != "" && (o[0] < '0' || o[0] > '9') && o[0] != '-' {
				opts = append(opts, o)
			} else {
				opts = append(opts, "#")
			}
		}
		switch {
		case n == 4 && opts[0] == "PX" && opts[1] == "#":
			return "SET PX", nil
		case n == 5 && opts[0] == "NX" && opts[1] == "PX" && opts[2] == "#":
			return "SET NX PX", nil
		}
		return Shape(strings.Join(strings.Fields("SET "+strings.ReplaceAll(strings.Join(opts, " "), "#", "")), " ")), refuse(name, "%v: only SET k v PX ms and SET k v NX PX ms", opts)
	case "HMSET":
		if n < 3 || (n-1)%2 != 0 {
			return Shape(name), refuse(name, "with %d arguments, want a key and field/value pairs", n)
		}
		return Shape(name), nil
	case "HSCAN", "ZSCAN":
		return scanShape(name, args)
	case "ZADD":
		return zaddShape(args)
	case "ZRANGEBYSCORE", "ZREVRANGEBYSCORE":
		return rangeShape(name, args, 3)
	case "ZRANGE":
		return rangeShape(name, args, 3)
	case "EVALSHA", "EVAL":
		if n < 3 {
			return Shape(name), refuse(name, "with %d arguments", n)
		}
		if k := str(args[1]); k != "1" {
			return Shape(name + " " + k), refuse(name, "with %s keys, want exactly 1", k)
		}
		body := str(args[0])
		if name == "EVAL" {
			if err := RegisterScript(body); err != nil {
				return Shape(name + " 1"), err
			}
			sum := sha1.Sum([]byte(body))
			body = hex.EncodeToString(sum[:])
		}
		if !knownScript(strings.ToLower(body)) {
			return Shape(name + " 1"), refuse(name, "of an unknown script %s", body)
		}
		return Shape(name + " 1"), nil
	}
	return Shape(name), refuse(name, "is not portable through Codis and Twemproxy")
}

// ClusterMark begins the shape of each command CheckCluster allows
// beyond the portable set, so that an audit tells them apart: a proxy's
// connection can never send one.
const ClusterMark = "cluster: "

// CheckCluster is Check for a connection to a node of a Redis Cluster: it
// allows also the two commands a cluster client routes with, CLUSTER
// SLOTS (the slot map) and ASKING (before a command a migration
// redirected), with shapes that begin with ClusterMark.
func CheckCluster(cmd string, args ...any) (Shape, error) {
	switch name := strings.ToUpper(cmd); {
	case name == "ASKING" && len(args) == 0:
		return ClusterMark + "ASKING", nil
	case name == "CLUSTER" && len(args) == 1 && strings.ToUpper(str(args[0])) == "SLOTS":
		return ClusterMark + "CLUSTER SLOTS", nil
	case name == "ASKING" || name == "CLUSTER":
		return Shape(ClusterMark + name), refuse(name, "with arguments %v: only ASKING and CLUSTER SLOTS", args)
	}
	return Check(cmd, args...)
}

func scanShape(name string, args []any) (Shape, error) {
	if len(args) < 2 {
		return Shape(name), refuse(name, "with %d arguments", len(args))
	}
	shape := name
	rest := args[2:]
	for len(rest) > 0 {
		opt := strings.ToUpper(str(rest[0]))
		if (opt != "MATCH" && opt != "COUNT") || len(rest) < 2 {
			return Shape(shape + " " + opt), refuse(name, "option %s", opt)
		}
		shape += " " + opt
		rest = rest[2:]
	}
	return Shape(shape), nil
}

func zaddShape(args []any) (Shape, error) {
	if len(args) < 3 {
		return "ZADD", refuse("ZADD", "with %d arguments", len(args))
	}
	shape := "ZADD"
	i := 1
	for ; i < len(args); i++ {
		opt := strings.ToUpper(str(args[i]))
		if opt != "NX" && opt != "XX" && opt != "CH" {
			break
		}
		shape += " " + opt
	}
	pairs := len(args) - i
	if pairs < 2 || pairs%2 != 0 {
		return Shape(shape), refuse("ZADD", "with %d score/member arguments (GT, LT and INCR are not portable)", pairs)
	}
	if _, err := strconv.ParseFloat(str(args[i]), 64); err != nil {
		return Shape(shape), refuse("ZADD", "option or score %q", str(args[i]))
	}
	return Shape(shape), nil
}

func rangeShape(name string, args []any, base int) (Shape, error) {
	if len(args) < base {
		return Shape(name), refuse(name, "with %d arguments", len(args))
	}
	shape := name
	rest := args[base:]
	for len(rest) > 0 {
		opt := strings.ToUpper(str(rest[0]))
		switch {
		case opt == "WITHSCORES":
			rest = rest[1:]
		case opt == "LIMIT" && name != "ZRANGE" && len(rest) >= 3:
			rest = rest[3:]
		default:
			return Shape(shape + " " + opt), refuse(name, "option %s (BYSCORE, REV and friends are not in Redis 3.2)", opt)
		}
		shape += " " + opt
	}
	return Shape(shape), nil
}
