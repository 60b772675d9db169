package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// A delivery starts in a script on the records HASH, where every write
// of the same message (Delete, Reschedule, a Replace or Debounce send)
// is decided too: whichever comes first wins. A start marks the record
// as running (recordRunning; and a record with a First gets First =
// Started, so that the next debounce send opens a new window); a write
// that finds the mark says the delivery runs (ErrRunning), and a start
// that finds the record gone or rewritten does not start. Starts are
// batched: a claim marks those of its messages that are due already in
// the read of their records (claimCmds, readStartScript), and a loop
// marks the messages it held until due together (StartMany).

// startLua declares markStarted(v): record v as a start writes it. It
// fails (for pcall) on bytes that are no record.
var startLua = recordLua + `
local function markStarted(v)
  local b = string.byte(v, 1)
  local version = b % VERSIONS
  if version == V2 then
    local due, created, updated, _, pos = readHeader(v)
    return writeHeader(due, created, updated, -1, flagsOf(v) - runningOf(v) + RUNNING) .. string.sub(v, pos)
  end
  if version ~= 1 then error('not a record') end
  readHeader(v)
  return string.char(b - runningOf(v) + RUNNING) .. string.sub(v, 2)
end
`

// startManyScript starts the deliveries of records as claimed: each
// record that still begins with the header it was claimed with is marked
// as started (markStarted). One that begins with the header of its
// start already was started by an earlier call whose reply was lost.
// KEYS[1]: records HASH. ARGV: id1, header1 (as claimed), started1 (the
// header once started), id2, ...
// Returns per id 0 (started), -1 (gone: deleted, or undecodable), or the
// due of the record that replaced the one claimed (a Replace, Debounce
// or Reschedule came first).
var startManyScript = newScript(startLua + `
local out = {}
for i = 1, #ARGV, 3 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if not v then
    out[#out + 1] = -1
  elseif string.sub(v, 1, #ARGV[i + 2]) == ARGV[i + 2] then
    out[#out + 1] = 0
  elseif string.sub(v, 1, #ARGV[i + 1]) == ARGV[i + 1] then
    local ok, w = pcall(markStarted, v)
    if ok then
      redis.call('HSET', KEYS[1], ARGV[i], w)
      out[#out + 1] = 0
    else
      out[#out + 1] = -1
    end
  else
    local ok, due = pcall(readHeader, v)
    if ok then out[#out + 1] = due else out[#out + 1] = -1 end
  end
end
return out
`)

// readStartScript reads records, as HMGET does, and marks as started
// (markStarted) those due by a time: the claim of messages due already
// starts them in the read of their records. Undecodable bytes are read
// and left as they are.
// KEYS[1]: records HASH. ARGV[1]: start by (unix ms; 0: start none),
// ARGV[2...]: ids.
// Returns per id its record as it was before the start, or nil.
var readStartScript = newScript(startLua + `
local by = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  out[#out + 1] = v
  if v and by > 0 then
    local ok, due = pcall(readHeader, v)
    if ok and due <= by then
      local ok2, w = pcall(markStarted, v)
      if ok2 then redis.call('HSET', KEYS[1], ARGV[i], w) end
    end
  end
end
return out
`)

// StartsBy reports whether readStartScript, run with start-by byMS,
// marked rec as started.
func StartsBy(rec *Record, byMS int64) bool {
	return byMS > 0 && rec != nil && rec.Corrupt == nil && rec.Due <= byMS
}

// Started returns the record as its start writes it (see markStarted):
// running, and with First Started if it has a First.
func (r *Record) Started() *Record {
	s := *r
	s.Running = true
	if s.First != 0 {
		s.First = Started
	}
	return &s
}

// Outcomes of StartMany, per message.
const (
	StartOK   = 0  // started: the delivery may run
	StartGone = -1 // deleted (or undecodable): nothing to deliver
	// Any other outcome is the due (unix ms) of the record that replaced
	// the one claimed: that version is delivered at its own due.
)

// StartMany starts the deliveries of ids, whose records were claimed as
// recs (see startManyScript): one script for them all. It returns per id
// StartOK, StartGone, or the due of the record that replaced the one
// claimed.
func (s *Store) StartMany(ctx context.Context, topic string, p int, ids []string, recs []*Record) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := scriptCall(startManyScript, keys.Records(s.ns, topic, p), 3*len(ids))
	for i, id := range ids {
		args = append(args, id, recs[i].Header(), recs[i].Started().Header())
	}
	r, err := s.do(ctx, cmd{"EVALSHA", args})
	if err != nil {
		return nil, fmt.Errorf("start %d in partition %d: %w", len(ids), p, err)
	}
	out, err := redis.Int64s(r[0], nil)
	if err != nil || len(out) != len(ids) {
		return nil, fmt.Errorf("start %d in partition %d: bad reply %v (%v)", len(ids), p, r[0], err)
	}
	return out, nil
}
