package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Limits are a topic's fleet-wide limits, stored as JSON in the
// keys.MetaLimits field of its meta HASH.
type Limits struct {
	// Rate is the most deliveries started per second across the fleet (0:
	// none), with bursts of up to Burst (0: DefaultBurst(Rate)).
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Concurrency is the most deliveries running at once across the
	// fleet (0: none).
	Concurrency int `json:"concurrency,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l.Rate == 0 && l.Concurrency == 0 }

// BurstOrDefault is l's burst, or its default.
func (l Limits) BurstOrDefault() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return DefaultBurst(l.Rate)
}

// DefaultBurst is the burst of a rate with none set: a tenth of a
// second's worth, at least 1.
func DefaultBurst(rate float64) int { return max(1, int(math.Ceil(rate/10))) }

// SetLimits stores topic's limits (a zero l clears them, which is stored
// too), then bumps its controls' counter for its consumers to follow at
// once. With ifUnset, it writes only when the topic's limits were never
// set or cleared (a worker's file), and reports whether it wrote. It fails
// with ErrNoTopic for a topic that does not exist.
func (s *Store) SetLimits(ctx context.Context, topic string, l Limits, ifUnset bool) (written bool, err error) {
	b, err := json.Marshal(l)
	if err != nil {
		return false, err
	}
	return s.setControl(ctx, topic, keys.MetaLimits, "limits", string(b), ifUnset)
}

// decodeLimits reads the keys.MetaLimits field v (nil: never set).
func decodeLimits(meta string, v any) (l Limits, set bool, err error) {
	if v == nil {
		return Limits{}, false, nil
	}
	b, err := redis.Bytes(v, nil)
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil {
		return Limits{}, false, fmt.Errorf("field %q of %s: %w", keys.MetaLimits, meta, err)
	}
	return l, true, nil
}

// takeTokensScript takes up to ARGV[4] starts from the token bucket in
// KEYS[1] (see TakeTokens): ARGV[1] now (ms), ARGV[2] rate (per ms),
// ARGV[3] burst, ARGV[5] horizon (ms). A token is granted when it is in
// the bucket, or comes into it within the horizon (the bucket goes below
// zero by those): the caller starts each at its time. Fewer than ARGV[6]
// (and than wanted) are not granted, so that takes come in batches. The bucket refills
// from its last take, never from a clock behind that, so no clock can
// make it refill twice. It counts the starts granted per whole second
// (fields sec, cur, prev), and returns the grant, the tokens before it
// (in millionths) and the time it is measured from.
var takeTokensScript = newScript(`
local now, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local want, horizon = tonumber(ARGV[4]), tonumber(ARGV[5])
local v = redis.call('HMGET', KEYS[1], 't', 'at', 'sec', 'cur', 'prev')
local t, at = tonumber(v[1]), tonumber(v[2])
if not t then t, at = burst, now end
if now > at then
  t = math.min(burst, t + (now - at) * rate)
  at = now
end
if t > burst then t = burst end
local g = math.floor(t + horizon * rate + 1e-9)
if g > want then g = want end
if g < tonumber(ARGV[6]) and g < want then g = 0 end
if g < 0 then g = 0 end
local before = t
t = t - g
local s = math.floor(at / 1000)
local sec, cur, prev = tonumber(v[3]) or s, tonumber(v[4]) or 0, tonumber(v[5]) or 0
if s ~= sec then
  if s == sec + 1 then prev = cur else prev = 0 end
  cur, sec = 0, s
end
cur = cur + g
redis.call('HMSET', KEYS[1], 't', string.format('%.6f', t), 'at', at, 'sec', sec, 'cur', cur, 'prev', prev)
return {g, math.floor(before * 1000000), at}
`)

// refundScript gives ARGV[1] tokens back to the bucket in KEYS[1] (a
// grant its taker could not use), up to the burst ARGV[2].
var refundScript = newScript(`
local t = tonumber(redis.call('HGET', KEYS[1], 't'))
if not t then return 0 end
local b = tonumber(ARGV[2])
t = math.min(b, t + tonumber(ARGV[1]))
redis.call('HSET', KEYS[1], 't', string.format('%.6f', t))
local cur = tonumber(redis.call('HGET', KEYS[1], 'cur'))
if cur then redis.call('HSET', KEYS[1], 'cur', math.max(0, cur - tonumber(ARGV[1]))) end
return 1
`)

// Tokens is a grant of the rate limit's token bucket.
type Tokens struct {
	// N starts are granted; the i-th (0-based) may start at Start(i).
	N int
	// Before is the tokens in the bucket before the grant, Base when
	// that was measured, Rate its rate per second.
	Before float64
	Base   time.Time
	Rate   float64
	// Horizon and Min: see TakeTokens.
	Horizon time.Duration
	Min     int
}

// Start is when the i-th start of the grant may begin: at once for a
// token that was in the bucket, at its refill otherwise.
func (g Tokens) Start(i int) time.Time {
	lack := float64(i+1) - g.Before
	if lack <= 0 {
		return g.Base
	}
	return g.Base.Add(time.Duration(lack / g.Rate * float64(time.Second)))
}

// Next is when a take may grant again: when Min tokens (at least one)
// come within the horizon.
func (g Tokens) Next() time.Time {
	lack := float64(max(1, g.Min)) - (g.Before - float64(g.N)) - g.Rate*g.Horizon.Seconds()
	if lack <= 0 {
		return g.Base
	}
	return g.Base.Add(time.Duration(lack / g.Rate * float64(time.Second)))
}

// TakeTokens takes up to want starts from topic's token bucket at now, at
// rate per second with bursts of burst: the tokens in the bucket, and
// those that come into it within horizon, each to start at its time (see
// Tokens.Start), none when fewer than minimum (and than want) are there.
// One script on the bucket's key.
func (s *Store) TakeTokens(ctx context.Context, topic string, rate float64, burst, want, minimum int, now time.Time, horizon time.Duration) (Tokens, error) {
	r, err := s.script(ctx, takeTokensScript, keys.Rate(s.ns, topic), now.UnixMilli(),
		strconv.FormatFloat(rate/1000, 'g', -1, 64), burst, want, horizon.Milliseconds(), minimum)
	if err != nil {
		return Tokens{}, fmt.Errorf("rate limit of %s: %w", topic, err)
	}
	v, err := redis.Int64s(r, nil)
	if err != nil || len(v) != 3 {
		return Tokens{}, fmt.Errorf("rate limit of %s: bad reply %v (%v)", topic, r, err)
	}
	return Tokens{N: int(v[0]), Before: float64(v[1]) / 1e6, Base: time.UnixMilli(v[2]), Rate: rate, Horizon: horizon, Min: minimum}, nil
}

// RefundTokens gives n tokens of a grant back to topic's bucket.
func (s *Store) RefundTokens(ctx context.Context, topic string, n, burst int) error {
	if _, err := s.script(ctx, refundScript, keys.Rate(s.ns, topic), n, burst); err != nil {
		return fmt.Errorf("rate limit of %s: %w", topic, err)
	}
	return nil
}

// takeSlotsScript takes slots of the concurrency cap ARGV[2] in the ZSET
// KEYS[1] for the members ARGV[4...], each expiring at ARGV[3], after it
// removed the slots whose holders let them expire (ARGV[1] is now). It
// returns the slots taken (the first members) and the earliest expiry of
// the others' slots (0: none).
var takeSlotsScript = newScript(`
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
if #old > 0 then redis.call('ZREM', KEYS[1], unpack(old)) end
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
local g = math.min(free, #ARGV - 3)
if g > 0 then
  local args = {}
  for i = 1, g do
    args[#args + 1] = ARGV[3]
    args[#args + 1] = ARGV[3 + i]
  end
  redis.call('ZADD', KEYS[1], unpack(args))
else
  g = 0
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local e = 0
if #first > 0 then e = tonumber(first[2]) end
return {g, e}
`)

// TakeSlots takes up to len(members) slots of topic's concurrency cap
// (at most limit held across the fleet), named by members, expiring at
// expiry unless renewed (RenewSlots). Slots whose holders let them
// expire are freed first: a process that died holding slots shrinks the
// cap until they expire. It returns how many it took (the first of
// members), and the earliest expiry among the slots held.
func (s *Store) TakeSlots(ctx context.Context, topic string, limit int, members []string, now, expiry time.Time) (int, time.Time, error) {
	args := []any{keys.Slots(s.ns, topic), now.UnixMilli(), limit, expiry.UnixMilli()}
	for _, m := range members {
		args = append(args, m)
	}
	r, err := s.script(ctx, takeSlotsScript, args...)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("concurrency cap of %s: %w", topic, err)
	}
	v, err := redis.Int64s(r, nil)
	if err != nil || len(v) != 2 {
		return 0, time.Time{}, fmt.Errorf("concurrency cap of %s: bad reply %v (%v)", topic, r, err)
	}
	var first time.Time
	if v[1] > 0 {
		first = time.UnixMilli(v[1])
	}
	return int(v[0]), first, nil
}

// RenewSlots pushes the expiry of the slots members hold back to expiry
// (ZADD XX: a slot that expired and was freed is not taken again), and
// returns how many it renewed.
func (s *Store) RenewSlots(ctx context.Context, topic string, members []string, expiry time.Time) (int, error) {
	args := []any{keys.Slots(s.ns, topic), "XX", "CH"}
	for _, m := range members {
		args = append(args, expiry.UnixMilli(), m)
	}
	r, err := s.do(ctx, cmd{"ZADD", args})
	if err != nil {
		return 0, fmt.Errorf("concurrency cap of %s: %w", topic, err)
	}
	n, err := redis.Int(r[0], nil)
	return n, err
}

// ReleaseSlots frees the slots members hold, then bumps the topic's
// slots counter of the changes hash (keys.SlotsField) for the consumers
// waiting for one to try again at once.
func (s *Store) ReleaseSlots(ctx context.Context, topic string, members []string) error {
	args := []any{keys.Slots(s.ns, topic)}
	for _, m := range members {
		args = append(args, m)
	}
	_, err := s.do(ctx, cmd{"ZREM", args}, cmd{"HINCRBY", []any{keys.Changes(s.ns), keys.SlotsField(topic), 1}})
	if err != nil {
		return fmt.Errorf("concurrency cap of %s: %w", topic, err)
	}
	return nil
}

// Flow is what runs against a topic's limits now.
type Flow struct {
	// Started is the starts the rate limit granted in the last whole
	// second (counted only while a rate is set).
	Started int64
	// Running is the slots of the concurrency cap held and not expired
	// (counted only while a cap is set): deliveries running, or claimed
	// and about to start.
	Running int64
}

// ReadFlow reads topic's Flow at now: two commands, one a key.
func (s *Store) ReadFlow(ctx context.Context, topic string, now time.Time) (Flow, error) {
	r, err := s.do(ctx,
		cmd{"HMGET", []any{keys.Rate(s.ns, topic), "sec", "cur", "prev"}},
		cmd{"ZCOUNT", []any{keys.Slots(s.ns, topic), "(" + strconv.FormatInt(now.UnixMilli(), 10), "+inf"}})
	if err != nil {
		return Flow{}, fmt.Errorf("flow of %s: %w", topic, err)
	}
	var f Flow
	if v, err := redis.Values(r[0], nil); err == nil && len(v) == 3 && v[0] != nil {
		sec, _ := redis.Int64(v[0], nil)
		cur, _ := redis.Int64(v[1], nil)
		prev, _ := redis.Int64(v[2], nil)
		switch now.UnixMilli() / 1000 {
		case sec:
			f.Started = prev
		case sec + 1:
			f.Started = cur
		}
	}
	f.Running, _ = redis.Int64(r[1], nil)
	return f, nil
}
