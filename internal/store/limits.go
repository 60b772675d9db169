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
// once, then deletes the rate limit's bucket: nothing of the old limits
// (tokens of a larger burst, a debt, the timeline) carries over, and the
// next take starts a bucket full at the burst set now. With ifUnset, it
// writes only when the topic's limits were never set or cleared (a
// worker's file), and reports whether it wrote. It fails with ErrNoTopic
// for a topic that does not exist.
func (s *Store) SetLimits(ctx context.Context, topic string, l Limits, ifUnset bool) (written bool, err error) {
	b, err := json.Marshal(l)
	if err != nil {
		return false, err
	}
	written, err = s.setControl(ctx, topic, keys.MetaLimits, "limits", string(b), ifUnset)
	if err != nil || !written {
		return written, err
	}
	if _, err := s.do(ctx, cmd{"DEL", []any{keys.Rate(s.ns, topic)}}); err != nil {
		// The limits are stored: the takes cap the old tokens at the new
		// burst anyway, so this only costs the bucket's old state.
		s.log.Warn("limits stored, but their rate limit's old bucket could not be deleted", "topic", topic, "err", err)
	}
	return true, nil
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
// KEYS[1] (see TakeTokens). ARGV[1] from (ms, on the bucket's timeline:
// see TokenTake.Offset), ARGV[2] rate (per ms), ARGV[3] burst, ARGV[5]
// horizon (ms), ARGV[6] the fewest to grant, ARGV[7] the caller's now on
// the bucket's timeline (ms), ARGV[8] the caller's offset to that
// timeline (ms) and ARGV[9] the timeline's epoch it was learned in (a
// new bucket's epoch is the now of its first take, so that no offset
// learned of an older bucket applies to it),
// ARGV[10] how long (ms) the timeline may go unmoved by a caller on its
// own clock before it starts again (timelineReset).
//
// A token is granted when it is in the bucket, or comes into it within
// the horizon (the bucket goes below zero by those, never by more than a
// horizon's worth at the rate now: a lowered rate acts within a horizon,
// not after the debt of the old one is paid). Fewer than ARGV[6] (and
// than wanted) are not granted, so that takes come in batches. The bucket
// refills from its last take (field at), never from a time behind that,
// so no clock can make it refill twice; it never holds more than the
// burst, whatever burst it was filled with.
//
// Field clk is the latest now any caller gave, off that caller's offset,
// ep the timeline's epoch and lead the latest now a caller with no offset
// gave (one on its own clock). A caller behind clk learns from the reply
// how far (see TakeTokens), so a clock ahead of the others moves the
// timeline, never the others' waits. An offset of another epoch is
// dropped. When no caller on its own clock moved the timeline for
// ARGV[10] (the clock ahead that set it is gone or was set right), a
// caller with an offset starts a new epoch from its own clock.
//
// It counts the starts granted per whole second (fields sec, cur, prev),
// and returns {grant, tokens before it (in millionths), at, clk, off of
// the last caller, ep, the caller's offset as it applied}.
var takeTokensScript = newScript(`
local from, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local want, horizon = tonumber(ARGV[4]), tonumber(ARGV[5])
local now, off, cep, reset = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local v = redis.call('HMGET', KEYS[1], 't', 'at', 'sec', 'cur', 'prev', 'clk', 'off', 'ep', 'lead')
local ep = tonumber(v[8]) or now
if cep ~= ep then now, from, off = now - off, from - off, 0 end
local t, at = tonumber(v[1]), tonumber(v[2])
if not t then t, at = burst, from end
local clk, lead, peer = tonumber(v[6]) or now, tonumber(v[9]) or now, tonumber(v[7]) or off
if off > 0 and math.max(now, clk) - lead > reset then
  ep = ep + 1
  at, clk = at - off, clk - off
  now, from, off, lead, peer = now - off, from - off, 0, now - off, 0
end
if off == 0 and now > lead then lead = now end
if from > at then
  t = math.min(burst, t + (from - at) * rate)
  at = from
end
if t > burst then t = burst end
if t < -horizon * rate then t = -horizon * rate end
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
if now >= clk then clk = now end
redis.call('HMSET', KEYS[1], 't', string.format('%.6f', t), 'at', at, 'sec', sec, 'cur', cur, 'prev', prev,
  'clk', clk, 'off', off, 'ep', ep, 'lead', lead)
return {g, math.floor(before * 1000000), at, clk, peer, ep, off}
`)

// timelineReset is how long a rate limit's timeline may go unmoved by a
// taker on its own clock before a taker starts it again from its own
// (see takeTokensScript): after a clock that was ahead is set right or
// stops, the others' offsets go back to zero within this, and their
// warnings of a skew stop.
const timelineReset = time.Minute

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

// TokenTake is a take of a topic's token bucket (see TakeTokens).
type TokenTake struct {
	// Rate is the rate per second, Burst the bucket's size.
	Rate  float64
	Burst int
	// Want starts are asked for; fewer than Min (and than Want) are not
	// granted.
	Want, Min int
	// Now is the caller's clock; From is when the starts are wanted (Now,
	// or the earliest due of the messages to claim if later): the bucket
	// refills up to From.
	Now, From time.Time
	// Offset is added to the caller's clock to give the bucket's
	// timeline, as learned in the timeline's Epoch: zero at first, then
	// the grants' Offset plus what Learn said.
	Offset time.Duration
	Epoch  int64
	// Horizon: the tokens that come into the bucket within it are
	// granted too, each to start at its time.
	Horizon time.Duration
}

// Tokens is a grant of the rate limit's token bucket.
type Tokens struct {
	// N starts are granted; the i-th (0-based) may start at Start(i).
	N int
	// Before is the tokens in the bucket before the grant, Base when
	// that was measured (on the caller's clock), Rate its rate per
	// second.
	Before float64
	Base   time.Time
	Rate   float64
	// Horizon and Min: see TakeTokens.
	Horizon time.Duration
	Min     int
	// Clock is the latest clock a caller gave the bucket (Now plus
	// Offset), on the caller's clock: when it is after the caller's
	// clock as the reply came, the caller is behind the others by that
	// much at least (see Learn). PeerOffset is the Offset of the caller
	// before this one.
	Clock      time.Time
	PeerOffset time.Duration
	// Offset and Epoch are the caller's offset as it applied (zero when
	// it was of another epoch, or this take started a new one) and the
	// timeline's epoch: the caller's next take sends them, Offset plus
	// what Learn says.
	Offset time.Duration
	Epoch  int64
}

// Learn returns how far the clock of a caller whose reply came at after
// (on its clock) is behind the bucket's timeline, at least (0: not
// behind), and moves the grant's times onto the caller's clock as it
// will be with that added to its Offset. Measured from after, not from
// the Now sent, so that it never puts the caller ahead of the clock it
// learns from: a take that waited on the way (a slow network, a pause)
// cannot push the timeline ahead, however often it happens.
func (g *Tokens) Learn(after time.Time) time.Duration {
	if !g.Clock.After(after) {
		return 0
	}
	d := g.Clock.Sub(after)
	g.Base, g.Clock = g.Base.Add(-d), after
	return d
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

// TakeTokens takes up to a.Want starts from topic's token bucket, at
// a.Rate per second with bursts of a.Burst: the tokens in the bucket,
// and those that come into it within a.Horizon, each to start at its
// time (see Tokens.Start), none when fewer than a.Min (and than a.Want)
// are there. One script on the bucket's key.
//
// Callers' clocks differ. The bucket keeps its own timeline, the latest
// clock a caller gave it (its Now plus its Offset): a caller behind it
// learns by how much (Tokens.Learn) and adds that to its Offset, so that a
// clock ahead of the others, even by hours, never makes them wait for
// their refills or hold their grants, and the bucket refills by the
// elapsed time of one timeline, never twice. The grant's times are on the
// caller's clock (see Tokens.Learn).
func (s *Store) TakeTokens(ctx context.Context, topic string, a TokenTake) (Tokens, error) {
	from := a.From
	if from.Before(a.Now) {
		from = a.Now
	}
	off := a.Offset.Milliseconds()
	now := a.Now.UnixMilli() + off
	r, err := s.script(ctx, takeTokensScript, keys.Rate(s.ns, topic), from.UnixMilli()+off,
		strconv.FormatFloat(a.Rate/1000, 'g', -1, 64), a.Burst, a.Want, a.Horizon.Milliseconds(), a.Min, now, off,
		a.Epoch, timelineReset.Milliseconds())
	if err != nil {
		return Tokens{}, fmt.Errorf("rate limit of %s: %w", topic, err)
	}
	v, err := redis.Int64s(r, nil)
	if err != nil || len(v) != 7 {
		return Tokens{}, fmt.Errorf("rate limit of %s: bad reply %v (%v)", topic, r, err)
	}
	off = v[6] // as it applied
	return Tokens{N: int(v[0]), Before: float64(v[1]) / 1e6, Base: time.UnixMilli(v[2] - off), Rate: a.Rate, Horizon: a.Horizon, Min: a.Min,
		Clock: time.UnixMilli(v[3] - off), PeerOffset: time.Duration(v[4]) * time.Millisecond,
		Offset: time.Duration(off) * time.Millisecond, Epoch: v[5]}, nil
}

// RefundTokens gives n tokens of a grant back to topic's bucket.
func (s *Store) RefundTokens(ctx context.Context, topic string, n, burst int) error {
	if _, err := s.script(ctx, refundScript, keys.Rate(s.ns, topic), n, burst); err != nil {
		return fmt.Errorf("rate limit of %s: %w", topic, err)
	}
	return nil
}

// Slot is a slot of a concurrency cap: its holder's member, and its
// score (its expiry, unix ms, by its holder's clock).
type Slot struct {
	Member string
	Score  int64
}

// takeSlotsScript takes slots of the concurrency cap ARGV[1] in the ZSET
// KEYS[1] for the members after the evictions, each scored ARGV[2] (its
// expiry), after it removed the slots ARGV[3] names (pairs of member and
// score after it), each only while it still has that score: slots the
// caller saw unrenewed for a lease by its own clock (see TakeSlots). It
// returns {slots taken (the first members)}, followed, when it took
// fewer than asked, by every slot held: member, score, ...
var takeSlotsScript = newScript(`
local limit, e = tonumber(ARGV[1]), tonumber(ARGV[3])
local i = 4
for j = 1, e do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if cur and tonumber(cur) == tonumber(ARGV[i + 1]) then redis.call('ZREM', KEYS[1], ARGV[i]) end
  i = i + 2
end
local w = #ARGV - i + 1
local g = math.min(limit - redis.call('ZCARD', KEYS[1]), w)
if g > 0 then
  local args = {}
  for j = 0, g - 1 do
    args[#args + 1] = ARGV[2]
    args[#args + 1] = ARGV[i + j]
  end
  redis.call('ZADD', KEYS[1], unpack(args))
else
  g = 0
end
if g == w then return {g} end
local out = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
table.insert(out, 1, g)
return out
`)

// TakeSlots takes up to len(members) slots of topic's concurrency cap
// (at most limit held across the fleet), named by members, scored expiry
// (pushed back while held: RenewSlots). It first frees the slots of
// evict, each only if its score is still the one given: slots the caller
// saw keep their score for a lease by its own clock, whose holders
// stopped renewing them. No slot is freed by comparing its score with a
// clock: a holder's clock and the caller's may differ by any amount. It
// returns how many it took (the first of members) and, when it took fewer
// than asked, every slot held (held is nil otherwise).
func (s *Store) TakeSlots(ctx context.Context, topic string, limit int, members []string, expiry time.Time, evict []Slot) (took int, held []Slot, err error) {
	args := []any{keys.Slots(s.ns, topic), limit, expiry.UnixMilli(), len(evict)}
	for _, e := range evict {
		args = append(args, e.Member, e.Score)
	}
	for _, m := range members {
		args = append(args, m)
	}
	r, err := s.script(ctx, takeSlotsScript, args...)
	if err != nil {
		return 0, nil, fmt.Errorf("concurrency cap of %s: %w", topic, err)
	}
	v, err := redis.Values(r, nil)
	if err == nil && (len(v) == 0 || len(v)%2 != 1) {
		err = fmt.Errorf("%d values", len(v))
	}
	if err == nil {
		took, err = redis.Int(v[0], nil)
	}
	for i := 1; err == nil && i < len(v); i += 2 {
		var sl Slot
		if sl.Member, err = redis.String(v[i], nil); err == nil {
			var f float64
			f, err = redis.Float64(v[i+1], nil)
			sl.Score = int64(f)
		}
		held = append(held, sl)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("concurrency cap of %s: bad reply %v (%v)", topic, r, err)
	}
	if held == nil && took < len(members) {
		held = []Slot{}
	}
	return took, held, nil
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
	_, err := s.do(ctx, append([]cmd{{"ZREM", args}}, s.bump(keys.SlotsField(topic))...)...)
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
