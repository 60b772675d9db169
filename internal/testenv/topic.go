package testenv

import (
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// TopicStored reports whether topic's meta key and its entry in the
// topics set exist in namespace ns at addr, read with a connection of its
// own (not the one of the client under test).
func TopicStored(tb testing.TB, addr, ns, topic string) (meta, listed bool) {
	tb.Helper()
	conn, err := redis.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	n, err := redis.Int(conn.Do("EXISTS", keys.Meta(ns, topic)))
	if err != nil {
		tb.Fatal(err)
	}
	score, err := conn.Do("ZSCORE", keys.Topics(ns), topic)
	if err != nil {
		tb.Fatal(err)
	}
	return n == 1, score != nil
}
