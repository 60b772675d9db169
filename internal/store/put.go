package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Policies of Put: what a send does to a message whose id exists.
const (
	PolicyReplace  = "replace"
	PolicyDebounce = "debounce"
)

// Outcomes of Put, one per message.
const (
	PutCreated   = 1
	PutReplaced  = 2
	PutDebounced = 3
	putGone      = -1 // OnlyIfExists, and the id has no record
	putInSegment = -2 // the id is held by a segment: explode it first
)

// Started is the First of a record whose delivery started (see Start):
// the next send of its id opens a new debounce window.
const Started = -1

// Put is a send of one message with a policy for an existing id.
type Put struct {
	ID     string
	Policy string // PolicyReplace or PolicyDebounce
	// Due is the event's due (unix ms); for PolicyDebounce, the event's
	// time plus its delay, capped by the window's MaxWait (ms, 0: none).
	Due         int64
	MaxWait     int64
	MaxAttempts int
	Body        []byte
}

// PutResult is what a Put did: PutCreated, PutReplaced or PutDebounced,
// and the due stored.
type PutResult struct {
	Outcome int
	Due     int64
}

// recordLua declares, for the scripts that read or write a record in
// Lua, its encoding (see Record.Encode): readRecord(v) returns a table of
// its fields and body, writeRecord(r) encodes one.
var recordLua = fmt.Sprintf(`
local V1, V2 = %d, %d
local function uvar(n)
  local t = {}
  while n >= 128 do
    t[#t + 1] = string.char(n %% 128 + 128)
    n = math.floor(n / 128)
  end
  t[#t + 1] = string.char(n)
  return table.concat(t)
end
local function svar(x)
  if x >= 0 then return uvar(x * 2) end
  return uvar(-x * 2 - 1)
end
local function readu(v, pos)
  local n, mul = 0, 1
  while true do
    local b = string.byte(v, pos)
    pos = pos + 1
    if b < 128 then return n + b * mul, pos end
    n = n + (b - 128) * mul
    mul = mul * 128
  end
end
local function reads(v, pos)
  local u
  u, pos = readu(v, pos)
  if u %% 2 == 0 then return u / 2, pos end
  return -(u + 1) / 2, pos
end
local function readRecord(v)
  local r, pos, d = {}, 2, 0
  local ver = string.byte(v, 1)
  r.due, pos = reads(v, pos)
  d, pos = reads(v, pos)
  r.created = r.due + d
  d, pos = reads(v, pos)
  r.updated = r.created + d
  r.first = 0
  if ver == V2 then
    d, pos = reads(v, pos)
    r.first = r.created + d
  end
  r.attempts, pos = readu(v, pos)
  r.maxAttempts, pos = readu(v, pos)
  local n
  n, pos = readu(v, pos)
  r.lastError = string.sub(v, pos, pos + n - 1)
  r.body = string.sub(v, pos + n)
  return r
end
local function writeRecord(r)
  local ver, first = V1, ''
  if r.first ~= 0 then
    ver, first = V2, svar(r.first - r.created)
  end
  return string.char(ver) .. svar(r.due) .. svar(r.created - r.due) .. svar(r.updated - r.created) .. first ..
    uvar(r.attempts or 0) .. uvar(r.maxAttempts) .. uvar(#(r.lastError or '')) .. (r.lastError or '') .. r.body
end
`, recordVersion, recordVersionFirst)

// putScript decides, for each message, what its send does, and writes the
// record: one decision per message, atomic on the records HASH, whatever
// other producers send for the same id at once.
//
//   - no record: the message is created (a debounced one with its window
//     opening now);
//   - PolicyReplace: the record takes the event's due, body and max
//     attempts, its attempts reset; its created time stays;
//   - PolicyDebounce: the same, with the due capped by the window: the
//     window opened at the record's First (or its creation), unless a
//     delivery of the record started (First is Started: see Start): the
//     event then opens a new window, now.
//
// Every replacement moves Updated past the old one, so an outcome of a
// delivery of the old record sees the change (see Record.Header).
// KEYS[1]: records HASH. ARGV[1]: now (ms), ARGV[2]: "1" to write only
// ids that have a record (the old partition of a change); then for each
// message: id, policy, due, max wait, max attempts, body.
// Returns {outcome, due} per message.
var putScript = newScript(segLua + recordLua + `
local now, onlyIfExists = tonumber(ARGV[1]), ARGV[2] == '1'
local out = {}
for i = 3, #ARGV, 6 do
  local id, policy = ARGV[i], ARGV[i + 1]
  local due, maxWait, maxAttempts = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local body = ARGV[i + 5]
  local v = redis.call('HGET', KEYS[1], id)
  local held = false
  if not v and #id == ID_LEN then
    local seg = redis.call('HGET', KEYS[1], SEG .. string.sub(id, 1, PREFIX_LEN))
    held = seg and segFind(seg, string.sub(id, PREFIX_LEN + 1))
  end
  if held then
    out[#out + 1] = -2
    out[#out + 1] = 0
  elseif not v and onlyIfExists then
    out[#out + 1] = -1
    out[#out + 1] = 0
  else
    local r = {created = now, updated = now, first = 0, maxAttempts = maxAttempts, body = body}
    local outcome = 1
    if v then
      local old = readRecord(v)
      r.created = old.created
      r.updated = math.max(now, old.updated + 1)
      outcome = 2
      r.first = now
      if policy == 'debounce' then
        outcome = 3
        if old.first > 0 then
          r.first = old.first
        elseif old.first == 0 then
          r.first = old.created
        end
      end
    else
      r.first = now
    end
    if policy == 'debounce' and maxWait > 0 and r.first + maxWait < due then
      due = r.first + maxWait
    end
    r.due = due
    redis.call('HSET', KEYS[1], id, writeRecord(r))
    out[#out + 1] = outcome
    out[#out + 1] = due
  end
end
return out
`)

// indexEarlierScript sets the scheduled entries of ids to the given due,
// unless they have an earlier one: an entry earlier than its record is
// harmless (a claim holds or returns the message to its record's due),
// a later one would make it late, and writers of one id race.
// KEYS[1]: scheduled ZSET. ARGV: due1, id1, due2, id2, ...
var indexEarlierScript = newScript(`
for i = 1, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[i + 1])
  if not cur or tonumber(ARGV[i]) < tonumber(cur) then
    redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
`)

// Puts sends messages to partition p of topic with a policy for ids that
// exist (see putScript), in two round trips as an enqueue of given ids:
// the decisions and records, then the index entries (indexEarlierScript)
// and, for a dead message the send revives, the removal of its dead
// entry. With onlyIfExists (the old partition of a change, where the id
// may still live), messages without a record are left out: their
// Outcome is 0. A message held in a segment has it exploded first.
func (s *Store) Puts(ctx context.Context, topic string, p int, puts []Put, nowMS int64, onlyIfExists bool) ([]PutResult, error) {
	res := make([]PutResult, len(puts))
	todo := make([]int, len(puts))
	for i := range todo {
		todo[i] = i
	}
	mk := keys.Records(s.ns, topic, p)
	for try := 0; len(todo) > 0; try++ {
		args := []any{mk, nowMS, ""}
		if onlyIfExists {
			args[2] = "1"
		}
		for _, i := range todo {
			m := puts[i]
			args = append(args, m.ID, m.Policy, m.Due, m.MaxWait, m.MaxAttempts, m.Body)
		}
		r, err := s.script(ctx, putScript, args...)
		if err != nil {
			return nil, fmt.Errorf("send %d to partition %d: %w", len(todo), p, err)
		}
		vals, err := redis.Int64s(r, nil)
		if err != nil || len(vals) != 2*len(todo) {
			return nil, fmt.Errorf("send %d to partition %d: bad reply %v (%v)", len(todo), p, r, err)
		}
		var segs []string
		var again []int
		for j, i := range todo {
			switch o := vals[2*j]; o {
			case putInSegment:
				segs = append(segs, keys.SegmentField(puts[i].ID[:SegmentPrefixLen]))
				again = append(again, i)
			case putGone:
			default:
				res[i] = PutResult{Outcome: int(o), Due: vals[2*j+1]}
			}
		}
		if len(segs) > 0 {
			if try > 0 {
				return nil, fmt.Errorf("send to partition %d: %q still in a segment", p, puts[again[0]].ID)
			}
			if _, err := s.explode(ctx, topic, p, segs, nil, 0, 0); err != nil {
				return nil, err
			}
		}
		todo = again
	}
	index := []any{keys.Scheduled(s.ns, topic, p)}
	dead := []any{keys.Dead(s.ns, topic, p)}
	for i, r := range res {
		if r.Outcome != 0 {
			index = append(index, r.Due, puts[i].ID)
			dead = append(dead, puts[i].ID)
		}
	}
	if len(index) == 1 {
		return res, nil
	}
	ss := keys.Scheduled(s.ns, topic, p)
	cmds := []cmd{{"EVALSHA", append(scriptCall(indexEarlierScript, ss, len(index)-1), index[1:]...)}, {"ZREM", dead}}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("index %d in partition %d: %w", len(index)/2, p, err)
	}
	defer c.Close()
	replies, err := pipeScripts(ctx, c, cmds)
	if err == nil {
		err = firstErr(replies)
	}
	if err != nil {
		// The records are written: the reconciler indexes them.
		return nil, fmt.Errorf("index %d in partition %d: %w", len(index)/2, p, err)
	}
	return res, nil
}

// startScript marks the start of a delivery of a record a Put wrote (its
// First set), if it is still the record claimed: its First becomes
// Started, so that a send after this moment opens a new window. A record
// a send replaced since the claim is not started: the newer event is
// delivered instead, at its own due.
// KEYS[1]: records HASH. ARGV[1]: id, ARGV[2]: the header claimed.
// Returns 1 (started) or 0 (replaced or gone).
var startScript = newScript(recordLua + `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v or string.sub(v, 1, #ARGV[2]) ~= ARGV[2] then return 0 end
local r = readRecord(v)
r.first = -1
redis.call('HSET', KEYS[1], ARGV[1], writeRecord(r))
return 1
`)

// Start marks the start of the delivery of rec, the record of id as
// claimed (see startScript), and reports whether it may start. rec's
// First becomes Started, as stored.
func (s *Store) Start(ctx context.Context, topic string, p int, id string, rec *Record) (bool, error) {
	r, err := s.script(ctx, startScript, keys.Records(s.ns, topic, p), id, rec.Header())
	if err != nil {
		return false, fmt.Errorf("start %q in partition %d: %w", id, p, err)
	}
	n, err := redis.Int(r, nil)
	if err != nil {
		return false, fmt.Errorf("start %q in partition %d: %w", id, p, err)
	}
	if n == 1 {
		rec.First = Started
	}
	return n == 1, nil
}
