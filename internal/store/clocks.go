package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Clocks are the values a topic's processes wrote from their clocks,
// for delayq doctor to compare with its own: three commands, one a key.
type Clocks struct {
	// Members are the heartbeat expiries of its members (see Members),
	// each written as its writer's now plus three heartbeats.
	Members []Member
	// Slots are the slots of its concurrency cap, each scored as its
	// holder's now plus a lease.
	Slots []Slot
	// BucketClock is the latest clock a taker gave its rate limit's
	// bucket (zero: none), and BucketOffset that taker's offset to it:
	// how far its clock was behind the fastest one's (see TakeTokens).
	BucketClock  time.Time
	BucketOffset time.Duration
}

// ReadClocks reads topic's Clocks, up to limit members and slots.
func (s *Store) ReadClocks(ctx context.Context, topic string, limit int) (Clocks, error) {
	r, err := s.do(ctx,
		cmd{"ZRANGE", []any{keys.Members(s.ns, topic), 0, limit - 1, "WITHSCORES"}},
		cmd{"ZRANGE", []any{keys.Slots(s.ns, topic), 0, limit - 1, "WITHSCORES"}},
		cmd{"HMGET", []any{keys.Rate(s.ns, topic), "clk", "off"}})
	if err != nil {
		return Clocks{}, fmt.Errorf("clocks of %s: %w", topic, err)
	}
	var c Clocks
	pairs := func(v any, add func(string, int64)) {
		vals, _ := redis.Strings(v, nil)
		for i := 0; i+1 < len(vals); i += 2 {
			f, _ := strconv.ParseFloat(vals[i+1], 64)
			add(vals[i], int64(f))
		}
	}
	pairs(r[0], func(id string, score int64) {
		m := Member{ID: id, Expires: score}
		if m.Expires < 0 {
			m.Expires, m.Leaving = -m.Expires, true
		}
		c.Members = append(c.Members, m)
	})
	pairs(r[1], func(m string, score int64) { c.Slots = append(c.Slots, Slot{Member: m, Score: score}) })
	if v, _ := redis.Values(r[2], nil); len(v) == 2 && v[0] != nil {
		clk, _ := redis.Int64(v[0], nil)
		off, _ := redis.Int64(v[1], nil)
		c.BucketClock, c.BucketOffset = time.UnixMilli(clk), time.Duration(off)*time.Millisecond
	}
	return c, nil
}
