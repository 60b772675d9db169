package main

import "time"

// doctorTTL is the expiry set on every scratch key, so that keys of an
// interrupted run do not stay behind.
const doctorTTL = 10 * time.Minute

// checks lists every command shape of the portable set (internal/portable,
// docs/portability.md), in an order where each check finds the state the
// ones before it left.
func (d *doctor) checks() []doctorCheck {
	str, ctr, h, z, l, sk := d.key("str"), d.key("ctr"), d.key("hash"), d.key("zset"), d.key("list"), d.key("script")
	ttl := doctorTTL.Milliseconds()
	expire := func(k string) step { return step{[]any{"PEXPIRE", k, ttl}, wantInt(1)} }
	s := func(expect func(any, error) error, args ...any) step { return step{args, expect} }
	return []doctorCheck{
		{"PING", []step{s(wantString("PONG"), "PING")}},
		{"SET NX PX", []step{
			s(wantString("OK"), "SET", str, "v1", "NX", "PX", ttl),
			s(wantNil, "SET", str, "v0", "NX", "PX", ttl),
		}},
		{"SET PX", []step{s(wantString("OK"), "SET", str, "v2", "PX", ttl)}},
		{"GET", []step{s(wantString("v2"), "GET", str), s(wantNil, "GET", ctr)}},
		{"EXISTS", []step{s(wantInt(1), "EXISTS", str), s(wantInt(0), "EXISTS", ctr)}},
		{"PEXPIRE", []step{s(wantInt(1), "PEXPIRE", str, ttl/2), s(wantInt(0), "PEXPIRE", ctr, ttl)}},
		{"PTTL", []step{s(wantIntIn(1, ttl/2), "PTTL", str), s(wantInt(-2), "PTTL", ctr)}},
		{"INCR", []step{s(wantInt(1), "INCR", ctr), expire(ctr)}},
		{"INCRBY", []step{s(wantInt(42), "INCRBY", ctr, 41)}},
		{"DEL", []step{s(wantInt(1), "DEL", ctr), s(wantInt(0), "DEL", ctr)}},

		{"HSET", []step{s(wantInt(1), "HSET", h, "f1", "v1"), expire(h), s(wantInt(0), "HSET", h, "f1", "v1")}},
		{"HSETNX", []step{s(wantInt(0), "HSETNX", h, "f1", "x"), s(wantInt(1), "HSETNX", h, "f2", "v2")}},
		{"HMSET", []step{s(wantString("OK"), "HMSET", h, "f3", "v3", "f4", "v4")}},
		{"HMGET", []step{s(wantStrings("v1", "v2", "v3", nilValue), "HMGET", h, "f1", "f2", "f3", "none")}},
		{"HGET", []step{s(wantString("v4"), "HGET", h, "f4"), s(wantNil, "HGET", h, "none")}},
		{"HINCRBY", []step{s(wantInt(3), "HINCRBY", h, "n", 3)}},
		{"HLEN", []step{s(wantInt(5), "HLEN", h)}},
		{"HDEL", []step{s(wantInt(2), "HDEL", h, "f3", "f4", "none")}},
		{"HSCAN", []step{s(wantScan(map[string]string{"f1": "v1", "f2": "v2", "n": "3"}), "HSCAN", h, "0", "COUNT", 100)}},

		{"ZADD", []step{s(wantInt(2), "ZADD", z, 1, "a", 2, "b"), expire(z)}},
		{"ZADD NX", []step{s(wantInt(1), "ZADD", z, "NX", 9, "a", 3, "c")}}, // a kept, c added
		{"ZADD XX CH", []step{
			s(wantInt(0), "ZADD", z, "XX", 6, "a"),
			s(wantInt(1), "ZADD", z, "XX", "CH", 5, "a", 7, "x"), // a changed, x not added
		}},
		{"ZADD CH", []step{s(wantInt(2), "ZADD", z, "CH", 10, "c", 4, "d")}}, // b=2 d=4 a=5 c=10
		{"ZRANGEBYSCORE WITHSCORES LIMIT", []step{
			s(wantStrings("b", "2", "d", "4"), "ZRANGEBYSCORE", z, "-inf", "+inf", "WITHSCORES", "LIMIT", 0, 2),
			s(wantStrings("d", "a"), "ZRANGEBYSCORE", z, 3, 9),
			s(wantStrings("d"), "ZRANGEBYSCORE", z, "(2", "(5"), // exclusive bounds: members' leaving scores
		}},
		{"ZREVRANGEBYSCORE", []step{
			s(wantStrings("a", "d", "b"), "ZREVRANGEBYSCORE", z, 9, 0),
			s(wantStrings("c", "10"), "ZREVRANGEBYSCORE", z, "+inf", "-inf", "WITHSCORES", "LIMIT", 0, 1),
		}},
		{"ZRANGE", []step{
			s(wantStrings("b", "d", "a", "c"), "ZRANGE", z, 0, -1),
			s(wantStrings("b", "2"), "ZRANGE", z, 0, 0, "WITHSCORES"),
		}},
		{"ZSCORE", []step{s(wantString("5"), "ZSCORE", z, "a"), s(wantNil, "ZSCORE", z, "x")}},
		{"ZCARD", []step{s(wantInt(4), "ZCARD", z)}},
		{"ZCOUNT", []step{s(wantInt(2), "ZCOUNT", z, 3, 6)}},
		{"ZSCAN", []step{s(wantScan(map[string]string{"a": "5", "b": "2", "c": "10", "d": "4"}), "ZSCAN", z, "0", "COUNT", 100)}},
		{"ZREM", []step{s(wantInt(1), "ZREM", z, "b", "none"), s(wantInt(3), "ZCARD", z)}},

		{"LPUSH", []step{s(wantInt(1), "LPUSH", l, "x"), expire(l)}},
		{"RPUSH", []step{s(wantInt(4), "RPUSH", l, "y", "z", "y")}},
		{"LRANGE", []step{s(wantStrings("x", "y", "z", "y"), "LRANGE", l, 0, -1)}},
		{"LLEN", []step{s(wantInt(4), "LLEN", l)}},
		{"LREM", []step{s(wantInt(2), "LREM", l, 0, "y"), s(wantStrings("x", "z"), "LRANGE", l, 0, -1)}},

		{"EVALSHA NOSCRIPT", []step{
			s(wantNoScript, "EVALSHA", d.sha, 1, sk, 5),
			s(wantString("PONG"), "PING"), // the connection survived the error
		}},
		{"EVAL", []step{s(wantInt(5), "EVAL", d.script, 1, sk, 5)}},
		{"EVALSHA", []step{s(wantInt(10), "EVALSHA", d.sha, 1, sk, 5)}},
		// Segments are read by scripts with Lua's struct library.
		{"EVAL struct", []step{s(wantInt(7), "EVAL", "return struct.unpack('>I4', struct.pack('>I4', 7))", 1, sk)}},
	}
}
