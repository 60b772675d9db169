package store

import (
	"fmt"
	"strings"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// Every Lua script of the store is here. Each is a one-key script (its
// KEYS[1] is the only key it touches) calling only commands of the
// portable set, which newScript checks. The scripts get the reserved names
// of internal/keys from the Go constants (segNames), never from literals of
// their own, and the fence and handover names as arguments.

// newScript registers src with the portable checker and returns it as a
// one-key script. It panics if src calls a command outside the portable
// set, which is a bug caught by every test run.
func newScript(src string) *redis.Script {
	if err := portable.RegisterScript(src); err != nil {
		panic(err)
	}
	sc := redis.NewScript(1, src)
	scriptSources[sc.Hash()] = src
	return sc
}

// scriptSources maps each script's SHA1 to its source, for EVAL after
// NOSCRIPT in pipelines (redis.Script does that only for single calls).
// Written only during package initialisation.
var scriptSources = map[string]string{}

// luaString returns s as a Lua string literal, control and non-ASCII bytes
// as three-digit decimal escapes.
func luaString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c >= 0x7f || c == '\'' || c == '\\':
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// segNames declares, as Lua locals, the names and lengths the segment
// scripts share with the Go code:
//
//	SEG         keys.SegmentMark: the field of a segment is SEG .. prefix
//	PENDING     keys.SegmentPendingMark: its pending field is PENDING .. prefix
//	EXTRA       keys.SegmentExtraField
//	LEFT        keys.SegmentLeftField
//	ID_LEN      SegmentIDLen
//	PREFIX_LEN  SegmentPrefixLen
//	ENTRY       struct.unpack format of a segment's entry: suffix, due,
//	            record length (see encodeSegment)
var segNames = fmt.Sprintf(`
local SEG, PENDING, EXTRA, LEFT = %s, %s, %s, %s
local ID_LEN, PREFIX_LEN = %d, %d
local ENTRY = '>c%ddI4'
`, luaString(keys.SegmentMark), luaString(keys.SegmentPendingMark), luaString(keys.SegmentExtraField),
	luaString(keys.SegmentLeftField), SegmentIDLen, SegmentPrefixLen, SegmentIDLen-SegmentPrefixLen)

// segLua adds to segNames the functions of the scripts that look into a
// segment. segFind(v, suffix) returns the first and one past the last byte
// of the entry of suffix in the encoded segment v, or nil; segHolds(id)
// whether a segment of the records HASH KEYS[1] holds id; segLen(v)
// returns the number of entries of v.
var segLua = segNames + `
local function segFind(v, suffix)
  local pos, n = 1, #v
  while pos <= n do
    local suf, due, rl, p2 = struct.unpack(ENTRY, v, pos)
    if suf == suffix then return pos, p2 + rl end
    pos = p2 + rl
  end
  return nil
end
local function segHolds(id)
  if #id ~= ID_LEN then return false end
  local v = redis.call('HGET', KEYS[1], SEG .. string.sub(id, 1, PREFIX_LEN))
  return v and segFind(v, string.sub(id, PREFIX_LEN + 1)) ~= nil or false
end
local function segLen(v)
  local pos, n, live = 1, #v, 0
  while pos <= n do
    local _, _, rl, p2 = struct.unpack(ENTRY, v, pos)
    live = live + 1
    pos = p2 + rl
  end
  return live
end
`

// segCutLua adds to segLua segCut(field, suffix), which rewrites the
// segment in field of KEYS[1] without the entry of suffix (one message
// fewer in the count, if the segment was counted), and says whether it
// held one.
var segCutLua = segLua + `
local function segCut(field, suffix)
  local v = redis.call('HGET', KEYS[1], field)
  if not v then return false end
  local a, b = segFind(v, suffix)
  if not a then return false end
  redis.call('HSET', KEYS[1], field, string.sub(v, 1, a - 1) .. string.sub(v, b))
  if not redis.call('HGET', KEYS[1], PENDING .. string.sub(field, #SEG + 1)) then
    redis.call('HINCRBY', KEYS[1], EXTRA, -1)
  end
  return true
end
`

// Fence and claim: the scheduled ZSET.

// fenceLua declares what the scripts on the scheduled ZSET share, whose
// ARGV[1] names the fence member and ARGV[2] is the caller's token:
// fence() returns the token the fence holds (0 when there is none), and
// fencedReply(cur) the error "FENCED <cur>" a refused caller gets.
const fenceLua = `
local function fence()
  local f = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if f then return -tonumber(f) end
  return 0
end
local function fencedReply(cur)
  return redis.error_reply('FENCED ' .. string.format('%d', cur))
end
`

// raiseScript raises the partition's fence to the caller's token.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token.
// Returns the fence's token after the call (the caller's token unless a
// newer one was already there).
var raiseScript = newScript(fenceLua + `
local cur = fence()
local t = tonumber(ARGV[2])
if t > cur then
  redis.call('ZADD', KEYS[1], -t, ARGV[1])
  return t
end
return cur
`)

// claimScript removes up to ARGV[4] ids due at or before ARGV[3] from the
// scheduled ZSET, if and only if the fence holds the caller's token.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3]: max due (unix ms), ARGV[4]: limit.
// Returns {id1, due1, id2, due2, ...}: exactly the ids it removed, or the
// error "FENCED <fence token>" (0 when the fence is missing).
var claimScript = newScript(fenceLua + `
local cur = fence()
if cur ~= tonumber(ARGV[2]) then return fencedReply(cur) end
local r = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[3], 'WITHSCORES', 'LIMIT', 0, ARGV[4])
local ids = {}
for i = 1, #r, 2 do ids[#ids + 1] = r[i] end
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return r
`)

// claimIDsScript removes the given ids from the scheduled ZSET, those
// still there and due by ARGV[3], if and only if the fence holds the
// caller's token. The ids are those a peek listed a moment before, the
// first of the ZSET: one ZRANGEBYSCORE from its start (with room for a
// few added since) finds them, where a ZSCORE each cost a call each
// (about a third of the script); an id it does not find is looked up
// alone. The range is read without its scores, and the reply names each
// id by its place: the caller has both from its peek, and formatting a
// score and copying an id through Lua twice cost more than the rest of
// the script.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3]: max due (unix ms), ARGV[4...]: ids.
// Returns {i1, i2, ...}: the places (1 for ARGV[4]) of exactly the ids
// it removed, each once, or the error "FENCED <fence token>".
var claimIDsScript = newScript(fenceLua + `
local cur = fence()
if cur ~= tonumber(ARGV[2]) then return fencedReply(cur) end
local want, left = {}, 0
for i = 4, #ARGV do
  if not want[ARGV[i]] then
    want[ARGV[i]] = i - 3
    left = left + 1
  end
end
local out, ids = {}, {}
local r = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[3], 'LIMIT', 0, left + 64)
for i = 1, #r do
  local at = want[r[i]]
  if at then
    want[r[i]] = false
    left = left - 1
    ids[#ids + 1] = r[i]
    out[#out + 1] = at
  end
end
if left > 0 then
  local max = tonumber(ARGV[3])
  for i = 4, #ARGV do
    local id = ARGV[i]
    local at = want[id]
    if at then
      want[id] = false
      local s = redis.call('ZSCORE', KEYS[1], id)
      if s and tonumber(s) >= 0 and tonumber(s) <= max then
        ids[#ids + 1] = id
        out[#out + 1] = at
      end
    end
  end
end
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return out
`)

// Takeover and handover: the scheduled ZSET (see handover.go).

// takeOverScript raises the fence to the caller's token and takes the
// handover marks.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3]: the marks' member prefix.
// Returns {fence after the call, fence before it, giver ids...}: the
// givers of the marks scored as the fence before it. Every mark is
// removed. When a newer token holds the fence it changes nothing and
// returns {fence, fence}.
var takeOverScript = newScript(fenceLua + `
local cur = fence()
local t = tonumber(ARGV[2])
if t <= cur then
  return {string.format('%d', cur), string.format('%d', cur)}
end
redis.call('ZADD', KEYS[1], -t, ARGV[1])
local out = {string.format('%d', t), string.format('%d', cur)}
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(0', 'WITHSCORES')
local gone = {}
local n = #ARGV[3]
for i = 1, #r, 2 do
  if string.sub(r[i], 1, n) == ARGV[3] then
    gone[#gone + 1] = r[i]
    if -tonumber(r[i + 1]) == cur then out[#out + 1] = string.sub(r[i], n + 1) end
  end
end
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
return out
`)

// handOverScript marks a graceful handover, if the caller's token is the
// fence's.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3...]: the marks' members.
// Returns 1 when written, or the error "FENCED <fence token>".
var handOverScript = newScript(fenceLua + `
local cur = fence()
if cur ~= tonumber(ARGV[2]) then return fencedReply(cur) end
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], -cur, ARGV[i]) end
return 1
`)

// Any ZSET.

// memberScript tells which ids are members of a ZSET, for the reconciler:
// one command per index instead of one ZSCORE per id and index.
// KEYS[1]: a ZSET. ARGV: ids. Returns one integer per id: 1 member, 0 not.
var memberScript = newScript(`
local out = {}
for i = 1, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then out[i] = 1 else out[i] = 0 end
end
return out
`)

// scoresScript reads the scores of ids in a ZSET, for an export or a
// move pass: one command per index instead of one ZSCORE per id.
// KEYS[1]: a ZSET. ARGV: ids. Returns one string per id: its score, or ""
// when it is not a member.
var scoresScript = newScript(`
local out = {}
for i = 1, #ARGV do
  out[i] = redis.call('ZSCORE', KEYS[1], ARGV[i]) or ''
end
return out
`)

// unindexScript removes the entries an enqueue of duplicate ids added
// beside its duplicate check, each only while it still has the score that
// enqueue gave it: an entry rescheduled or retried since is the existing
// message's and stays.
// KEYS[1]: scheduled ZSET. ARGV: due1, id1, due2, id2, ...
// Returns the number of entries removed.
var unindexScript = newScript(`
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[1], ARGV[i + 1]) == ARGV[i] then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i + 1])
  end
end
return n
`)

// Records: the records HASH.

// addScript adds records that are not there yet, neither as a record of
// their own nor in a segment (an id of SegmentIDLen characters, the first
// SegmentPrefixLen the segment's prefix).
// KEYS[1]: records HASH. ARGV: id1, record1, id2, record2, ...
// Returns one integer per id: 1 added, 0 already there (a duplicate).
var addScript = newScript(segLua + `
local out = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  if segHolds(id) then
    out[#out + 1] = 0
  else
    out[#out + 1] = redis.call('HSETNX', KEYS[1], id, ARGV[i + 1])
  end
end
return out
`)

// Segments: the records HASH (see segment.go).

// explodeScript turns a segment into ordinary records, one field per
// message, and removes it (with its pending field, or its messages from
// the count), counting itself in keys.SegmentLeftField.
// KEYS[1]: records HASH. ARGV[1]: the segment's field, ARGV[2]: its prefix.
// Returns {id1, due1, id2, due2, ...}: the records it wrote.
var explodeScript = newScript(segNames + `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return {} end
local out = {}
local pos, n, live = 1, #v, 0
while pos <= n do
  local suf, due, rl, p2 = struct.unpack(ENTRY, v, pos)
  live = live + 1
  if redis.call('HSETNX', KEYS[1], ARGV[2] .. suf, string.sub(v, p2, p2 + rl - 1)) == 1 then
    out[#out + 1] = ARGV[2] .. suf
    out[#out + 1] = string.format('%d', due)
  end
  pos = p2 + rl
end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HDEL', KEYS[1], PENDING .. ARGV[2]) == 0 then
  redis.call('HINCRBY', KEYS[1], EXTRA, 1 - live)
end
redis.call('HINCRBY', KEYS[1], LEFT, 1)
return out
`)

// deleteLua declares runningLua's names and delRecord(id): it deletes
// id's record and running mark (see StartMany) from the records HASH
// KEYS[1] and returns 0 (there was no record), 1 (deleted) or 2
// (deleted, and a delivery of it had started).
var deleteLua = runningLua + `
local function delRecord(id)
  local n = redis.call('HDEL', KEYS[1], id)
  local r = redis.call('HDEL', KEYS[1], RUNNING .. id)
  if n == 0 then return 0 end
  return n + r
end
`

// segDeleteScript deletes a message that may be held by a segment: its
// own record if it has one, else its entry in the segment (the segment is
// rewritten without it; an empty one stays until claimed, so that it
// still accounts for its index entry).
// KEYS[1]: records HASH. ARGV[1]: id, ARGV[2]: its segment's field,
// ARGV[3]: its suffix. Returns 1 if it removed something, 2 if what it
// removed was a record whose delivery had started, 0 if nothing.
var segDeleteScript = newScript(segCutLua + deleteLua + `
local n = delRecord(ARGV[1])
if n > 0 then return n end
if segCut(ARGV[2], ARGV[3]) then return 1 end
return 0
`)

// deleteScript deletes a message's record (see delRecord).
// KEYS[1]: records HASH. ARGV[1]: id. Returns 0, 1 or 2 (see delRecord).
var deleteScript = newScript(deleteLua + `
return delRecord(ARGV[1])
`)

// deleteManyScript deletes messages that may be held by segments, as
// segDeleteScript does each: its own record if it has one, else its entry
// in its segment.
// KEYS[1]: records HASH. ARGV: id1, its segment's field ("" when no
// segment can hold it), its suffix, id2, ...
// Returns one integer per id: 1 removed, 2 removed while a delivery of
// it had started, 0 nothing to remove.
var deleteManyScript = newScript(segCutLua + deleteLua + `
local out = {}
for i = 1, #ARGV, 3 do
  local n = delRecord(ARGV[i])
  if n > 0 then
    out[#out + 1] = n
  elseif ARGV[i + 1] ~= '' and segCut(ARGV[i + 1], ARGV[i + 2]) then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)

// segMoveOutScript gives a message held by a segment its own record (the
// rescheduled one) and rewrites the segment without it, counting itself
// in keys.SegmentLeftField: the message now has a field an export's scan
// may have passed. (A delete out of a segment does not count: a message
// deleted during an export may be missing from it.)
// KEYS[1]: records HASH. ARGV[1]: id, ARGV[2]: its segment's field,
// ARGV[3]: its suffix, ARGV[4]: the new record.
// Returns 1 moved, 0 not found (deleted, or no such message), 2 the
// message has its own record already (the segment exploded meanwhile).
var segMoveOutScript = newScript(segCutLua + `
if redis.call('HGET', KEYS[1], ARGV[1]) then return 2 end
if not segCut(ARGV[2], ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('HINCRBY', KEYS[1], LEFT, 1)
return 1
`)

// segCountScript counts the segments a write just made, once each: the
// ones whose pending field it removes.
// KEYS[1]: records HASH. ARGV: pending field, messages in the segment
// minus one, pending field, ...
// Returns 1.
var segCountScript = newScript(segNames + `
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then n = n + tonumber(ARGV[i + 1]) end
end
if n ~= 0 then redis.call('HINCRBY', KEYS[1], EXTRA, n) end
return 1
`)

// segHealScript counts the segments of pending fields a crashed write
// left (see segCountScript), with the messages they hold now.
// KEYS[1]: records HASH. ARGV: pending fields.
// Returns 1.
var segHealScript = newScript(segLua + `
local n = 0
for i = 1, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    local v = redis.call('HGET', KEYS[1], SEG .. string.sub(ARGV[i], #PENDING + 1))
    if v then n = n + segLen(v) - 1 end
  end
end
if n ~= 0 then redis.call('HINCRBY', KEYS[1], EXTRA, n) end
return 1
`)

// Topic metadata.

// autoOnLua declares autoOn(field): whether the automatic partition
// count stored in that field of the meta HASH KEYS[1] is on. The field
// holds Auto as JSON, whose max is set exactly when it is on (off is
// stored as "{}"; see Auto.On). A person's change of the count is
// refused while it is on, in the script that would begin it, so that no
// check of the automatic count can come between the refusal's read and
// the write.
const autoOnLua = `
local function autoOn(field)
  local a = redis.call('HGET', KEYS[1], field)
  return a and string.find(a, '"max":', 1, true) ~= nil
end
`

// changeScript starts a change of the partition count.
// KEYS[1]: meta HASH. ARGV[1..3]: the fields partitions, next and since,
// ARGV[4]: the new count, ARGV[5]: now (unix ms), ARGV[6..7]: the fields
// moved count and reversed (cleared when a change starts), ARGV[8]: the
// field most (the largest count, raised as a change begins), ARGV[9]:
// the field auto (a change by hand is refused while it is on: see
// autoOnLua).
// Returns {count, next, since}: next and since 0 when no change runs (the
// count is the new one already); {-1, 0, 0} for a topic that does not exist;
// {-2, count, next} when a change to another count runs; {-3, count,
// next} while the count is automatic.
var changeScript = newScript(autoOnLua + `
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not cur then return {-1, 0, 0} end
if autoOn(ARGV[9]) then return {-3, cur, tonumber(redis.call('HGET', KEYS[1], ARGV[2])) or 0} end
local n = tonumber(ARGV[4])
local nxt = tonumber(redis.call('HGET', KEYS[1], ARGV[2]))
if nxt then
  if nxt == n then return {cur, nxt, tonumber(redis.call('HGET', KEYS[1], ARGV[3])) or 0} end
  return {-2, cur, nxt}
end
if cur == n then return {cur, 0, 0} end
redis.call('HDEL', KEYS[1], ARGV[6], ARGV[7])
redis.call('HSET', KEYS[1], ARGV[3], ARGV[5])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[1], ARGV[8], math.max(cur, n, tonumber(redis.call('HGET', KEYS[1], ARGV[8])) or 0))
return {cur, n, tonumber(ARGV[5])}
`)

// cancelScript reverses a running change of the partition count, from
// count to next, into a change from next back to count: the partitions
// that received moved messages are the sources of the reverse change,
// which moves them back (see docs/architecture.md). The moved marks and
// the moved count start again, the change's since is now, and reversed
// is set so that the reverse moves wait for the cancelled ones to end.
// KEYS[1]: meta HASH. ARGV[1..3]: the fields partitions, next and since,
// ARGV[4]: the prefix of the moved marks, ARGV[5..6]: the fields moved
// count and reversed, ARGV[7..8]: the count and next of the change to
// cancel (as the caller read them), ARGV[9]: now (unix ms), ARGV[10]:
// the field auto (a cancel by hand is refused while it is on: see
// autoOnLua).
// Returns {count, next, since} after the call: the reverse change, or
// the layout unchanged when it is the reverse already (cancelled before)
// or no change runs (next 0: the change ended); {-1, 0, 0} for a topic
// never used; {-2, count, next} when another change runs; {-3, count,
// next} while the count is automatic.
var cancelScript = newScript(autoOnLua + `
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not cur then return {-1, 0, 0} end
if autoOn(ARGV[10]) then return {-3, cur, tonumber(redis.call('HGET', KEYS[1], ARGV[2])) or 0} end
local nxt = tonumber(redis.call('HGET', KEYS[1], ARGV[2]))
if not nxt then return {cur, 0, 0} end
local since = tonumber(redis.call('HGET', KEYS[1], ARGV[3])) or 0
local ec, en = tonumber(ARGV[7]), tonumber(ARGV[8])
if cur == en and nxt == ec then return {cur, nxt, since} end
if cur ~= ec or nxt ~= en then return {-2, cur, nxt} end
local del = {ARGV[5]}
for p = 0, math.max(cur, nxt) - 1 do del[#del + 1] = ARGV[4] .. p end
redis.call('HDEL', KEYS[1], unpack(del))
redis.call('HSET', KEYS[1], ARGV[1], nxt)
redis.call('HSET', KEYS[1], ARGV[2], cur)
redis.call('HSET', KEYS[1], ARGV[3], ARGV[9])
redis.call('HSET', KEYS[1], ARGV[6], 1)
return {nxt, cur, tonumber(ARGV[9])}
`)

// markMovedScript marks a source partition of a change as moved, and
// ends the change when every source partition is: the count becomes the
// new one and the change's fields go. A mark for another change (one
// cancelled, or ended and begun again: another next or since) is
// ignored.
// KEYS[1]: meta HASH. ARGV[1..3]: the fields partitions, next and since,
// ARGV[4]: the prefix of the moved marks, ARGV[5]: the partition,
// ARGV[6]: the count the change goes to, ARGV[7]: the change's since,
// ARGV[8..9]: the fields moved count and reversed, ARGV[10..11]: the
// field changed and now (unix ms), the end's time.
// Returns 0 when no such change runs, 1 marked, 2 marked and ended.
var markMovedScript = newScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
local want = tonumber(ARGV[6])
if not cur or tonumber(redis.call('HGET', KEYS[1], ARGV[2])) ~= want then return 0 end
if tonumber(redis.call('HGET', KEYS[1], ARGV[3])) ~= tonumber(ARGV[7]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[4] .. ARGV[5], ARGV[6])
local lo = 0
if want < cur then lo = want end
for p = lo, cur - 1 do
  if tonumber(redis.call('HGET', KEYS[1], ARGV[4] .. p)) ~= want then return 1 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6])
redis.call('HSET', KEYS[1], ARGV[10], ARGV[11])
local del = {ARGV[2], ARGV[3], ARGV[8], ARGV[9]}
for p = lo, cur - 1 do del[#del + 1] = ARGV[4] .. p end
redis.call('HDEL', KEYS[1], unpack(del))
return 2
`)

// countMovedScript adds to the count of messages a change moved, if the
// change is still the one the mover ran (its since).
// KEYS[1]: meta HASH. ARGV[1]: the field since, ARGV[2]: the change's
// since, ARGV[3]: the field moved count, ARGV[4]: messages moved.
// Returns the count, or -1 when another change (or none) runs.
var countMovedScript = newScript(`
if tonumber(redis.call('HGET', KEYS[1], ARGV[1])) ~= tonumber(ARGV[2]) then return -1 end
return redis.call('HINCRBY', KEYS[1], ARGV[3], ARGV[4])
`)

// Moving messages between partitions (a change of the count).

// moveInScript writes moved records into the records HASH of their new
// partition, each only where the id has no record, or has the same one
// (an earlier attempt of the same move).
// KEYS[1]: records HASH. ARGV: id1, record1, id2, record2, ...
// Returns one integer per id: 1 written or there already, 0 the id has
// another record (a conflict: nothing written).
var moveInScript = newScript(`
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    out[#out + 1] = 1
  elseif redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)

// casDeleteScript removes records that still hold the given bytes, with
// their running marks (see keys.RunningField): the source of a move once
// its copy is written (a record rewritten or deleted meanwhile is left
// alone), or a copy whose move was undone.
// KEYS[1]: records HASH. ARGV: id1, record1, id2, record2, ...
// Returns one integer per id: 1 removed, 0 not (changed or gone).
var casDeleteScript = newScript(runningLua + `
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i], RUNNING .. ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)

// moveOutScript removes moved ids from the scheduled ZSET of their old
// partition, if and only if the fence holds the caller's token: only the
// owner of the old partition moves its messages.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3...]: ids. Returns the number removed, or the error
// "FENCED <fence token>".
var moveOutScript = newScript(fenceLua + `
local cur = fence()
if cur ~= tonumber(ARGV[2]) then return fencedReply(cur) end
local n = 0
for i = 3, #ARGV, 500 do
  n = n + redis.call('ZREM', KEYS[1], unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
return n
`)

// fieldsScript tells which ids have a field in a records HASH, without
// sending their records back: a Done (see Done) is sent back, and one
// whose window ended is no field.
// KEYS[1]: records HASH. ARGV[1]: now (unix ms); then ids. Returns one
// value per id: 1 there, 0 not, or a Done within its window.
var fieldsScript = newScript(recordLua + `
local now, out = tonumber(ARGV[1]), {}
for i = 2, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if not v then
    out[i - 1] = 0
  elseif isDone(v) then
    local _, till = doneTimes(v)
    if till > now then out[i - 1] = v else out[i - 1] = 0 end
  else
    out[i - 1] = 1
  end
end
return out
`)

// wakeScript bumps the wake-up counters of partitions, and the version
// of the changes hash, one command for a write's partitions.
// KEYS[1]: the changes HASH. ARGV: keys.VersionField, then the fields
// (keys.WakeField). Returns nil.
var wakeScript = newScript(`
for i = 1, #ARGV do redis.call('HINCRBY', KEYS[1], ARGV[i], 1) end
`)

// tokenScript draws a fencing token: the epoch counter plus one, raised
// to the caller's clock when that is more. Tokens only grow; drawn from
// the clock, they stay above the fences raised before even when a failover
// to a replica took the counter back (with hosts' clocks in step).
// KEYS[1]: the epoch counter. ARGV[1]: now (unix ms). Returns the token.
var tokenScript = newScript(`
local t = redis.call('INCR', KEYS[1])
local floor = tonumber(ARGV[1])
if t < floor then
  t = redis.call('INCRBY', KEYS[1], floor - t)
end
return t
`)
