package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Segments keep queued messages compact. The messages of one write whose
// ids the client generated, due farther ahead than consumers claim (see
// Group.Fresh), share an id prefix: SegmentPrefixLen characters, then
// characters of their own. Two or more of them in one partition are
// stored as one segment: a single field of the records HASH holding all
// their records, indexed by a single member of the scheduled ZSET scored
// by the earliest due time among them. One field and one member per
// segment instead of one each per message saves the hash-table entry, the
// field name and the skiplist node of every message but one.
//
// The first claim that meets a segment's member explodes it: one script
// writes its messages as ordinary records (one field each) and removes the
// segment, after which they live as any message does. Until then:
//   - Get, Delete and Reschedule find a message by its id's prefix;
//   - Delete rewrites the segment without the message, and Reschedule
//     moves it out (its own record, the segment rewritten without it),
//     each with one script;
//   - enqueueing an id that a segment holds is ErrDuplicate.
//
// Stats counts a segment's messages with segExtraField, the messages held
// in segments minus the segments. A write does not pass its segments
// through a script to update it (every byte of a script's arguments costs
// Redis a few ns to turn into a Lua string and back: 12-32 µs for a
// segment of 8-16 messages, against 1 µs for a plain HMSET). The HMSET
// writes each segment together with a pending field (segPendingField),
// and a small script then removes the pending fields and adds their
// segments' counts, in one step: a segment is counted exactly once, by
// whoever removes its pending field. A crash between the two leaves the
// pending field, and the reconciler counts that segment (segHealScript);
// until then Stats counts it as one message. Exploding or cutting a
// segment adjusts the count only when the segment was counted.
//
// Field and member names of segments begin with a control character,
// which ids cannot contain: they never collide with an id.
const (
	// SegmentIDLen is the length of ids that can belong to a segment.
	SegmentIDLen = 26
	// SegmentPrefixLen is the length of the prefix the ids of one segment share.
	SegmentPrefixLen = 22
	// segExtraField counts the messages held in segments minus the
	// segments' index entries, so that Stats reports messages.
	segExtraField = "\x03extra"
)

// SegField is the records-HASH field, and the scheduled-ZSET member, of
// the segment whose ids begin with prefix.
func SegField(prefix string) string { return "\x01" + prefix }

func isSegField(f string) bool { return len(f) > 0 && f[0] == '\x01' }

// segPendingField is the records-HASH field that says the segment whose
// ids begin with prefix is not counted in segExtraField yet.
func segPendingField(prefix string) string { return "\x04" + prefix }

func isSegPendingField(f string) bool { return len(f) > 0 && f[0] == '\x04' }

// isIDField says whether a records-HASH field is a message id (not a
// segment, a pending field or the counter).
func isIDField(f string) bool { return len(f) > 0 && f[0] >= ' ' }

// segEntry is one message of a segment.
type segEntry struct {
	suffix string // the id after the prefix
	due    int64
	rec    []byte
}

// encodeSegment packs msgs, whose ids share a prefix: per message, its
// id's suffix (SegmentIDLen-SegmentPrefixLen bytes), its due time
// (big-endian IEEE 754 double, exact for unix ms), the record's length
// (big-endian uint32) and the record. The scripts read it with
// struct.unpack('>c4dI4'). It returns the earliest due time too.
func encodeSegment(msgs []New) (seg []byte, due int64) {
	n := 0
	for _, m := range msgs {
		n += SegmentIDLen - SegmentPrefixLen + 12 + m.Record.encodedLen()
	}
	b := make([]byte, 0, n)
	due = msgs[0].Record.Due
	for _, m := range msgs {
		b = append(b, m.ID[SegmentPrefixLen:]...)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(float64(m.Record.Due)))
		at := len(b)
		b = m.Record.AppendEncode(append(b, 0, 0, 0, 0))
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
		due = min(due, m.Record.Due)
	}
	return b, due
}

var errBadSegment = errors.New("delayq: bad segment")

// decodeSegment parses what encodeSegment produced.
func decodeSegment(b []byte) ([]segEntry, error) {
	const sl = SegmentIDLen - SegmentPrefixLen
	var out []segEntry
	for len(b) > 0 {
		if len(b) < sl+12 {
			return nil, fmt.Errorf("%w: truncated entry", errBadSegment)
		}
		e := segEntry{suffix: string(b[:sl])}
		e.due = int64(math.Float64frombits(binary.BigEndian.Uint64(b[sl:])))
		n := binary.BigEndian.Uint32(b[sl+8:])
		b = b[sl+12:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: record of %d bytes past the end", errBadSegment, n)
		}
		e.rec, b = b[:n], b[n:]
		out = append(out, e)
	}
	return out, nil
}

// segLookup finds the entry of id in an encoded segment.
func segLookup(seg []byte, id string) (*segEntry, error) {
	entries, err := decodeSegment(seg)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		if entries[i].suffix == id[SegmentPrefixLen:] {
			return &entries[i], nil
		}
	}
	return nil, nil
}

// segLua is shared by the scripts that look into a segment.
// segFind(v, suffix) returns the first and one past the last byte of the
// entry of suffix in the encoded segment v, or nil; segLen(v) returns the
// number of entries of v.
const segLua = `
local function segFind(v, suffix)
  local pos, n = 1, #v
  while pos <= n do
    local suf, due, rl, p2 = struct.unpack('>c4dI4', v, pos)
    if suf == suffix then return pos, p2 + rl end
    pos = p2 + rl
  end
  return nil
end
local function segLen(v)
  local pos, n, live = 1, #v, 0
  while pos <= n do
    local _, _, rl, p2 = struct.unpack('>c4dI4', v, pos)
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
const segCutLua = segLua + `
local function segCut(field, suffix)
  local v = redis.call('HGET', KEYS[1], field)
  if not v then return false end
  local a, b = segFind(v, suffix)
  if not a then return false end
  redis.call('HSET', KEYS[1], field, string.sub(v, 1, a - 1) .. string.sub(v, b))
  if not redis.call('HGET', KEYS[1], '\4' .. string.sub(field, 2)) then
    redis.call('HINCRBY', KEYS[1], '\3extra', -1)
  end
  return true
end
`

// explodeScript turns a segment into ordinary records, one field per
// message, and removes it (with its pending field, or its messages from
// the count).
// KEYS[1]: records HASH. ARGV[1]: the segment's field, ARGV[2]: its prefix.
// Returns {id1, due1, id2, due2, ...}: the records it wrote.
var explodeScript = newScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return {} end
local out = {}
local pos, n, live = 1, #v, 0
while pos <= n do
  local suf, due, rl, p2 = struct.unpack('>c4dI4', v, pos)
  live = live + 1
  if redis.call('HSETNX', KEYS[1], ARGV[2] .. suf, string.sub(v, p2, p2 + rl - 1)) == 1 then
    out[#out + 1] = ARGV[2] .. suf
    out[#out + 1] = string.format('%d', due)
  end
  pos = p2 + rl
end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HDEL', KEYS[1], '\4' .. ARGV[2]) == 0 then
  redis.call('HINCRBY', KEYS[1], '\3extra', 1 - live)
end
return out
`)

// segDeleteScript deletes a message that may be held by a segment: its
// own record if it has one, else its entry in the segment (the segment is
// rewritten without it; an empty one stays until claimed, so that it
// still accounts for its index entry).
// KEYS[1]: records HASH. ARGV[1]: id, ARGV[2]: its segment's field,
// ARGV[3]: its suffix. Returns 1 if it removed something, 0 if not.
var segDeleteScript = newScript(segCutLua + `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then return 1 end
if segCut(ARGV[2], ARGV[3]) then return 1 end
return 0
`)

// segMoveOutScript gives a message held by a segment its own record (the
// rescheduled one) and rewrites the segment without it.
// KEYS[1]: records HASH. ARGV[1]: id, ARGV[2]: its segment's field,
// ARGV[3]: its suffix, ARGV[4]: the new record.
// Returns 1 moved, 0 not found (deleted, or no such message), 2 the
// message has its own record already (the segment exploded meanwhile).
var segMoveOutScript = newScript(segCutLua + `
if redis.call('HGET', KEYS[1], ARGV[1]) then return 2 end
if not segCut(ARGV[2], ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return 1
`)

// segCountScript counts the segments a write just made, once each: the
// ones whose pending field it removes.
// KEYS[1]: records HASH. ARGV: pending field, messages in the segment
// minus one, pending field, ...
var segCountScript = newScript(`
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then n = n + tonumber(ARGV[i + 1]) end
end
if n ~= 0 then redis.call('HINCRBY', KEYS[1], '\3extra', n) end
return 1
`)

// segHealScript counts the segments of pending fields a crashed write
// left (see segCountScript), with the messages they hold now.
// KEYS[1]: records HASH. ARGV: pending fields.
var segHealScript = newScript(segLua + `
local n = 0
for i = 1, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    local v = redis.call('HGET', KEYS[1], '\1' .. string.sub(ARGV[i], 2))
    if v then n = n + segLen(v) - 1 end
  end
end
if n ~= 0 then redis.call('HINCRBY', KEYS[1], '\3extra', n) end
return 1
`)
