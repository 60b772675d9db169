package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Auto is the stored form of a topic's automatic partition count (the
// MetaAuto field, JSON): the bounds of the count and the damping of its
// changes, in milliseconds. The zero value is off.
type Auto struct {
	Min         int   `json:"min,omitempty"`
	Max         int   `json:"max,omitempty"`
	GrowAfterMS int64 `json:"grow_after_ms,omitempty"`
	// ShrinkAfterMS is how long the signal to shrink must hold.
	ShrinkAfterMS int64 `json:"shrink_after_ms,omitempty"`
	// CooldownMS is the time after a change ends before the automatic
	// count begins another.
	CooldownMS int64 `json:"cooldown_ms,omitempty"`
}

// On reports whether a is an automatic count (Max is always set then).
func (a Auto) On() bool { return a.Max > 0 }

// SetAuto stores topic's automatic partition count (a zero Auto turns it
// off, stored as "{}"); with ifUnset, only if it was never set nor turned
// off, and it reports whether it wrote. It fails with ErrNoTopic for a
// topic that does not exist. The topic's consumers read it with the
// controls (see ReadControls).
func (s *Store) SetAuto(ctx context.Context, topic string, a Auto, ifUnset bool) (written bool, err error) {
	b, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	return s.setControl(ctx, topic, keys.MetaAuto, "automatic partition count", string(b), ifUnset)
}

// AutoOn is the error of a change or cancel by hand of topic's count
// while it is automatic; l is the layout then. It wraps
// ErrAutoPartitions and says how to turn the automatic count off: a
// person's count must not be undone by the automation minutes later, so
// it is refused rather than taken and then lost.
func AutoOn(topic string, l Layout) error {
	now := fmt.Sprintf("it has %d partitions", l.Count)
	if l.Changing() {
		now = fmt.Sprintf("it is changing from %d to %d partitions", l.Count, l.Next)
	}
	return fmt.Errorf("%w: topic %q follows its consumers (%s), and would undo a count or a cancel by hand; "+
		"turn that off first (delayq partitions --topic %s --auto off, or Admin.SetAutoPartitions with nil), then set the count or cancel the change",
		ErrAutoPartitions, topic, now, topic)
}

// decodeAuto reads the MetaAuto field of meta: the settings, and whether
// they were ever set (or turned off).
func decodeAuto(meta string, v any) (Auto, bool, error) {
	if v == nil {
		return Auto{}, false, nil
	}
	b, err := redis.Bytes(v, nil)
	if err != nil {
		return Auto{}, false, fmt.Errorf("field %q of %s: %w", keys.MetaAuto, meta, err)
	}
	var a Auto
	if err := json.Unmarshal(b, &a); err != nil {
		return Auto{}, false, fmt.Errorf("field %q of %s: %q: %w", keys.MetaAuto, meta, b, err)
	}
	return a, true, nil
}

// AutoSignal is what the automatic count of a topic wants, as its
// checks stored it: a change from Count to Target partitions, wanted by
// every check since Since (unix ms). Target 0: none.
type AutoSignal struct {
	Count, Target int
	Since         int64
}

// AutoState is the stored state of a topic's automatic count: the end of
// its last change (unix ms, 0 if none ended yet) and its signal.
type AutoState struct {
	Changed int64
	Signal  AutoSignal
}

// ReadAutoState reads topic's AutoState.
func (s *Store) ReadAutoState(ctx context.Context, topic string) (AutoState, error) {
	meta := keys.Meta(s.ns, topic)
	r, err := s.do(ctx, cmd{"HMGET", []any{meta, keys.MetaChanged, keys.MetaAutoSignal}})
	if err != nil {
		return AutoState{}, fmt.Errorf("automatic partition count of %s: %w", topic, err)
	}
	vals, err := redis.Values(r[0], nil)
	if err != nil || len(vals) != 2 {
		return AutoState{}, fmt.Errorf("automatic partition count of %s: bad reply %v (%v)", topic, r[0], err)
	}
	var st AutoState
	if vals[0] != nil {
		st.Changed, _ = redis.Int64(vals[0], nil)
	}
	if vals[1] != nil {
		sig, _ := redis.String(vals[1], nil)
		if _, err := fmt.Sscanf(sig, "%d:%d:%d", &st.Signal.Count, &st.Signal.Target, &st.Signal.Since); err != nil {
			return AutoState{}, fmt.Errorf("field %q of %s: %q: %w", keys.MetaAutoSignal, meta, sig, err)
		}
	}
	return st, nil
}

// autoStepScript is one check of a topic's automatic partition count, by
// whichever consumer makes it: the count it saw, and the change it wants
// (target 0: none). A change is begun only when every check for at least
// after wanted the same one (the signal, "<count>:<target>:<since>"), at
// least cooldown after the last change ended, and while no change runs
// and the count is still the one seen: checks of many consumers at once
// begin one change at most. Any check that wants none, or another,
// starts the signal again.
//
// Each consumer checks with its own clock, and no clock is trusted with
// more than a step: a check adds to the time the wish held, and to the
// time since the last change ended (cooled, kept for the value of changed
// it counts from), the time since the check before (seen), at most step,
// never less than 0. So a clock ahead by minutes adds a step, not
// minutes, and one behind adds nothing and holds nothing back: the next
// check counts from its own clock again. The since stored is the time
// the wish has held, back from now: the earliest it began on this clock.
// KEYS[1]: meta HASH. ARGV[1..5]: the fields partitions, next, since,
// moved count and reversed; ARGV[6..7]: the fields signal and changed;
// ARGV[8]: now (unix ms), ARGV[9]: the count seen, ARGV[10]: the target,
// ARGV[11]: after (ms), ARGV[12]: cooldown (ms), ARGV[13]: the field
// most (the largest count, raised as a change begins), ARGV[14..15]: the
// fields seen and cooled, ARGV[16]: step (ms).
// Returns {state, since}: state -1 for a topic that does not exist, 0
// no signal, 1 a signal held since since, 2 the change begun.
var autoStepScript = newScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not cur then return {-1, 0} end
local now, target, step = tonumber(ARGV[8]), tonumber(ARGV[10]), tonumber(ARGV[16])
local seen = tonumber(redis.call('HGET', KEYS[1], ARGV[14]))
local gap = 0
if seen then gap = math.min(math.max(now - seen, 0), step) end
redis.call('HSET', KEYS[1], ARGV[14], now)
local changed = redis.call('HGET', KEYS[1], ARGV[7])
local cooled = nil
if changed then
  local c = redis.call('HGET', KEYS[1], ARGV[15])
  cooled = 0
  if c and string.sub(c, 1, #changed + 1) == changed .. ':' then
    cooled = tonumber(string.sub(c, #changed + 2)) + gap
  end
  redis.call('HSET', KEYS[1], ARGV[15], changed .. ':' .. cooled)
end
if target == 0 or redis.call('HGET', KEYS[1], ARGV[2]) or cur ~= tonumber(ARGV[9]) then
  redis.call('HDEL', KEYS[1], ARGV[6])
  return {0, 0}
end
local want = cur .. ':' .. target .. ':'
local sig = redis.call('HGET', KEYS[1], ARGV[6])
if not sig or string.sub(sig, 1, #want) ~= want then
  redis.call('HSET', KEYS[1], ARGV[6], want .. ARGV[8])
  return {1, now}
end
local held = 0
if seen then held = math.max(seen - tonumber(string.sub(sig, #want + 1)), 0) + gap end
local since = now - held
redis.call('HSET', KEYS[1], ARGV[6], want .. since)
if held < tonumber(ARGV[11]) or (cooled and cooled < tonumber(ARGV[12])) then return {1, since} end
redis.call('HDEL', KEYS[1], ARGV[4], ARGV[5], ARGV[6])
redis.call('HSET', KEYS[1], ARGV[3], ARGV[8])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[10])
redis.call('HSET', KEYS[1], ARGV[13], math.max(cur, target, tonumber(redis.call('HGET', KEYS[1], ARGV[13])) or 0))
return {2, since}
`)

// AutoCheck is one check of a topic's automatic partition count (see
// AutoStep).
type AutoCheck struct {
	Count  int // the count the caller saw
	Target int // the count it wants (0: none)
	// AfterMS is how long the wish must have held, CooldownMS how long
	// ago the last change must have ended.
	AfterMS, CooldownMS int64
	// StepMS is the most one check adds to either (about the time between
	// two checks of one consumer).
	StepMS int64
	NowMS  int64 // the caller's clock
}

// AutoStep runs check, one check of topic's automatic partition count
// (see autoStepScript). It returns whether it began the change, and since
// when the signal holds (0: none), on the caller's clock. The caller
// tells the consumers of a change begun (Changed).
func (s *Store) AutoStep(ctx context.Context, topic string, check AutoCheck) (begun bool, since int64, err error) {
	r, err := s.script(ctx, autoStepScript, keys.Meta(s.ns, topic), keys.MetaPartitions, keys.MetaNext, keys.MetaSince,
		keys.MetaMovedCount, keys.MetaReversed, keys.MetaAutoSignal, keys.MetaChanged, check.NowMS, check.Count, check.Target, check.AfterMS, check.CooldownMS, keys.MetaMost,
		keys.MetaAutoSeen, keys.MetaAutoCooled, check.StepMS)
	if err != nil {
		return false, 0, fmt.Errorf("automatic partition count of %s: %w", topic, err)
	}
	vals, err := redis.Int64s(r, nil)
	if err != nil || len(vals) != 2 {
		return false, 0, fmt.Errorf("automatic partition count of %s: bad reply %v (%v)", topic, r, err)
	}
	if vals[0] == -1 {
		return false, 0, NoTopic(topic)
	}
	return vals[0] == 2, vals[1], nil
}
