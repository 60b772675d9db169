package portable

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		args  []any
		shape Shape
		ok    bool
	}{
		{[]any{"PING"}, "PING", true},
		{[]any{"PING", "msg"}, "PING", false},
		{[]any{"AUTH", "secret"}, "AUTH", true},
		{[]any{"SET", "k", "v", "NX", "PX", 100}, "SET NX PX", true},
		{[]any{"SET", "k", "v", "PX", 100}, "SET PX", true},
		{[]any{"SET", "k", "v"}, "SET", false},
		{[]any{"SET", "k", "v", "PX", 100, "GET"}, "SET PX GET", false},
		{[]any{"GET", "k"}, "GET", true},
		{[]any{"DEL", "a", "b"}, "DEL", false},
		{[]any{"EXISTS", "a", "b"}, "EXISTS", false},
		{[]any{"EXPIRE", "k", 10, "NX"}, "EXPIRE", false},
		{[]any{"HSET", "k", "f", "v"}, "HSET", true},
		{[]any{"HSET", "k", "f", "v", "g", "w"}, "HSET", false},
		{[]any{"HMSET", "k", "f", "v", "g", "w"}, "HMSET", true},
		{[]any{"HDEL", "k", "a", "b"}, "HDEL", true},
		{[]any{"HSCAN", "k", "0", "COUNT", 10}, "HSCAN COUNT", true},
		{[]any{"HSCAN", "k", "0", "NOVALUES"}, "HSCAN NOVALUES", false},
		{[]any{"ZADD", "k", "NX", 1, "a", 2, "b"}, "ZADD NX", true},
		{[]any{"ZADD", "k", "XX", "CH", 1, "a"}, "ZADD XX CH", true},
		{[]any{"ZADD", "k", "GT", 1, "a"}, "ZADD", false},
		{[]any{"ZRANGEBYSCORE", "k", 0, 10, "WITHSCORES", "LIMIT", 0, 5}, "ZRANGEBYSCORE WITHSCORES LIMIT", true},
		{[]any{"ZRANGE", "k", 0, 10, "BYSCORE"}, "ZRANGE BYSCORE", false},
		{[]any{"ZRANGE", "k", 0, -1, "WITHSCORES"}, "ZRANGE WITHSCORES", true},
		{[]any{"ZPOPMIN", "k"}, "ZPOPMIN", false},
		{[]any{"BLPOP", "k", 0}, "BLPOP", false},
		{[]any{"MULTI"}, "MULTI", false},
		{[]any{"KEYS", "*"}, "KEYS", false},
		{[]any{"SCRIPT", "LOAD", "return 1"}, "SCRIPT", false},
		{[]any{"SELECT", 1}, "SELECT", false},
		{[]any{"CLIENT", "SETNAME", "x"}, "CLIENT", false},
		{[]any{"HELLO", 3}, "HELLO", false},
		{[]any{"UNLINK", "k"}, "UNLINK", false},
		{[]any{"EVAL", "return redis.call('GET', KEYS[1])", 1, "k"}, "EVAL 1", true},
		{[]any{"EVAL", "return redis.call('GET', KEYS[1])", 2, "k", "j"}, "EVAL 2", false},
		{[]any{"EVAL", "return redis.call('UNLINK', KEYS[1])", 1, "k"}, "EVAL 1", false},
		{[]any{"EVALSHA", "0000000000000000000000000000000000000000", 1, "k"}, "EVALSHA 1", false},
		{[]any{"EVALSHA", "d75bb8b5bd13532ddedd17762e772346e39b321e", 1, "k", "v", 100}, "EVALSHA 1", true},
	} {
		name := strings.TrimSpace(strings.Join(strings.Fields(strings.Repeat(" ", 0)+string(tc.shape)), "_"))
		t.Run(name, func(t *testing.T) {
			shape, err := Check(tc.args[0].(string), tc.args[1:]...)
			if (err == nil) != tc.ok {
				t.Fatalf("Check(%v) = %v, want ok=%v", tc.args, err, tc.ok)
			}
			if tc.ok && !Named(tc.args[0].(string)) {
				t.Errorf("Named(%q) = false for a portable command", tc.args[0])
			}
			if err != nil && !errors.Is(err, ErrNotPortable) {
				t.Errorf("error %v does not wrap ErrNotPortable", err)
			}
			if shape != tc.shape {
				t.Errorf("shape = %q, want %q", shape, tc.shape)
			}
		})
	}
}

func TestAllowedShapesAgreeWithCheck(t *testing.T) {
	// Every shape Check accepts in TestCheck is in the audit's own list.
	for shape := range allowedShapes {
		if shape == "" {
			t.Error("empty shape")
		}
	}
	if !allowedShapes["EVALSHA 1"] || allowedShapes["EVALSHA 2"] {
		t.Error("script shapes wrong")
	}
}

func TestReadAudit(t *testing.T) {
	log := "ZADD NX\tok\nEVALSHA 1\tok\nKEYS\tREFUSED: delayq: command not in the portable set: KEYS\nZPOPMIN\tok\n"
	rep, err := ReadAudit(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Refused) != 1 || len(rep.Unknown) != 1 || rep.Unknown[0] != "ZPOPMIN" {
		t.Fatalf("report = %+v", rep)
	}
	rep, err = ReadAudit(strings.NewReader("ZADD\tok\nHSETNX\tok\n"))
	if err != nil || !rep.OK() {
		t.Fatalf("clean log: %+v, %v", rep, err)
	}
}

func BenchmarkCheck(b *testing.B) {
	args := []any{"dq:{t:3}:s", 1700000000000, "01JD3Z7X9M0000000000000000"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check("ZADD", args...); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNamed(t *testing.T) {
	for _, name := range []string{"KEYS", "BLPOP", "INFO", "MULTI", "SUBSCRIBE", "SCRIPT", "HELLO"} {
		if Named(name) {
			t.Errorf("Named(%q) = true", name)
		}
	}
}

func TestCheckCluster(t *testing.T) {
	for _, c := range []struct {
		cmd   string
		args  []any
		shape Shape
		ok    bool
	}{
		{"ASKING", nil, "cluster: ASKING", true},
		{"CLUSTER", []any{"SLOTS"}, "cluster: CLUSTER SLOTS", true},
		{"cluster", []any{"slots"}, "cluster: CLUSTER SLOTS", true},
		{"CLUSTER", []any{"RESET"}, "cluster: CLUSTER", false},
		{"ASKING", []any{"x"}, "cluster: ASKING", false},
		{"HGET", []any{"k", "f"}, "HGET", true},
		{"KEYS", []any{"*"}, "KEYS", false},
	} {
		shape, err := CheckCluster(c.cmd, c.args...)
		if shape != c.shape || (err == nil) != c.ok {
			t.Errorf("CheckCluster(%s %v) = %q, %v; want %q, ok %v", c.cmd, c.args, shape, err, c.shape, c.ok)
		}
		if err != nil && !errors.Is(err, ErrNotPortable) {
			t.Errorf("CheckCluster(%s %v): %v does not wrap ErrNotPortable", c.cmd, c.args, err)
		}
		// A proxy's connection sends neither.
		if _, err := Check(c.cmd, c.args...); c.cmd != "HGET" && err == nil {
			t.Errorf("Check(%s %v) allowed a cluster command", c.cmd, c.args)
		}
	}
	rep, err := ReadAudit(strings.NewReader("cluster: ASKING\tok\ncluster: CLUSTER SLOTS\tok\ncluster: CLUSTER NODES\tok\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Unknown) != 1 || rep.Unknown[0] != "cluster: CLUSTER NODES" {
		t.Errorf("audit Unknown = %v, want only the shape outside both sets", rep.Unknown)
	}
}
