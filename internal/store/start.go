package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// A delivery starts on the records HASH, where every write of the same
// message (Delete, Reschedule, a Replace or Debounce send) is decided
// too: a start sets the message's running mark (keys.RunningField) to
// the owner's fencing token, and a write reads it in the script that
// decides it. Whichever comes first
// wins: a write that finds the mark says the delivery runs (ErrRunning);
// a start that finds the record gone or rewritten does not start.
//
// Starts are batched. A claim starts the messages due already with one
// plain command before the read of their records, the HMSET of their
// marks (claimCmds): a Delete that comes before the mark removes the record
// the read then misses (a tombstone), one that comes after it finds the
// mark. A loop starts the messages it held until due together, in one
// script that compares each record with the one claimed (StartMany).
// The mark goes with the delivery's outcome (Ack, Moves, Drop). A write
// that rewrites a marked record sets its mark to keys.RunningReplaced,
// and one that removes a record removes its mark: a mark that holds the
// token of the delivery's owner says the record is the one started, and
// its ack need not read it (see Ack).

// startManyScript starts the deliveries of records as claimed: each
// record that still begins with the header it was claimed with gets its
// running mark, the owner's token (see claimedLua).
// KEYS[1]: records HASH. ARGV[1]: the token; then id1, header1 (as
// claimed), id2, ...
// Returns per id 0 (started), -1 (gone: deleted, or finished: a Done), or the due of the
// record that replaced the one claimed (a Replace, Debounce or
// Reschedule came first).
var startManyScript = newScript(recordLua + claimedLua + `
local out = {}
eachClaimed(2, function(ids, headers, vals)
  local marks = {}
  for j, id in ipairs(ids) do
    local v = vals[j]
    if not v or isDone(v) then
      out[#out + 1] = -1
    elseif string.sub(v, 1, #headers[j]) == headers[j] then
      marks[#marks + 1] = RUNNING .. id
      marks[#marks + 1] = ARGV[1]
      out[#out + 1] = 0
    else
      local ok, due = pcall(readHeader, v)
      if ok then out[#out + 1] = due else out[#out + 1] = -1 end
    end
  end
  if #marks > 0 then redis.call('HMSET', KEYS[1], unpack(marks)) end
end)
return out
`)

// runningLua declares RUNNING, the running marks' field prefix, and
// REPLACED, the mark of a record rewritten after its start (see
// keys.RunningField).
var runningLua = fmt.Sprintf("local RUNNING, REPLACED = %q, %q\n", keys.RunningMark, keys.RunningReplaced)

// claimedLua declares RUNNING (runningLua); eachPair(first, f), which
// calls f(ids, headers, base) for each run of up to 1,000 pairs (id,
// header as claimed) of ARGV from ARGV[first], base the number of pairs
// before the run; and eachClaimed(first, f), which calls f(ids, headers,
// vals) for the same runs, vals their records in the records HASH
// KEYS[1] read with one HMGET: a batch's start costs two commands, not
// two per id.
var claimedLua = runningLua + `
local function eachPair(first, f)
  for from = first, #ARGV, 2000 do
    local ids, headers = {}, {}
    for i = from, math.min(from + 1999, #ARGV), 2 do
      ids[#ids + 1] = ARGV[i]
      headers[#headers + 1] = ARGV[i + 1]
    end
    f(ids, headers, (from - first) / 2)
  end
end
local function eachClaimed(first, f)
  eachPair(first, function(ids, headers)
    f(ids, headers, redis.call('HMGET', KEYS[1], unpack(ids)))
  end)
end
`

// Outcomes of StartMany, per message.
const (
	StartOK   = 0  // started: the delivery may run
	StartGone = -1 // deleted: nothing to deliver
	// Any other outcome is the due (unix ms) of the record that replaced
	// the one claimed: that version is delivered at its own due.
)

// StartMany starts the deliveries of ids, whose records were claimed as
// recs under the fencing token token (see startManyScript): one script
// for them all. It returns per id StartOK, StartGone, or the due of the
// record that replaced the one claimed. A start whose reply was lost can
// be made again.
func (s *Store) StartMany(ctx context.Context, tp TopicPartition, token int64, ids []string, recs []*Record) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := scriptCall(startManyScript, keys.Records(s.ns, tp.Topic, tp.P), 1+2*len(ids))
	args = append(args, token)
	for i, id := range ids {
		args = append(args, id, recs[i].Header())
	}
	r, err := s.do(ctx, cmd{"EVALSHA", args})
	if err != nil {
		return nil, fmt.Errorf("start %d in partition %d: %w", len(ids), tp.P, err)
	}
	out, err := redis.Int64s(r[0], nil)
	if err != nil || len(out) != len(ids) {
		return nil, fmt.Errorf("start %d in partition %d: bad reply %v (%v)", len(ids), tp.P, r[0], err)
	}
	return out, nil
}

// runningFields returns the running marks of ids, after prefix.
func runningFields(prefix []any, ids []string) []any {
	out := append(make([]any, 0, len(prefix)+len(ids)), prefix...)
	for _, id := range ids {
		out = append(out, keys.RunningField(id))
	}
	return out
}

// clearRunning is the command that removes the running marks of ids
// from the records HASH mk: their deliveries ended, or never ran.
func clearRunning(mk string, ids []string) cmd {
	return cmd{"HDEL", runningFields([]any{mk}, ids)}
}
