package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// peekScript checks the fence and lists what a claim would take, without
// taking it.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3]: max due (unix ms), ARGV[4]: limit.
// Returns {id1, due1, ...}, or the error "FENCED <fence token>".
var peekScript = newScript(`
local f = redis.call('ZSCORE', KEYS[1], ARGV[1])
local cur = 0
if f then cur = -tonumber(f) end
if cur ~= tonumber(ARGV[2]) then
  return redis.error_reply('FENCED ' .. string.format('%d', cur))
end
return redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[3], 'WITHSCORES', 'LIMIT', 0, ARGV[4])
`)

// claimIDsScript removes the given ids from the scheduled ZSET, those
// still there and due by ARGV[3], if and only if the fence holds the
// caller's token.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token,
// ARGV[3]: max due (unix ms), ARGV[4...]: ids.
// Returns {id1, due1, ...}: exactly the ids it removed, or the error
// "FENCED <fence token>".
var claimIDsScript = newScript(`
local f = redis.call('ZSCORE', KEYS[1], ARGV[1])
local cur = 0
if f then cur = -tonumber(f) end
if cur ~= tonumber(ARGV[2]) then
  return redis.error_reply('FENCED ' .. string.format('%d', cur))
end
local max = tonumber(ARGV[3])
local out, ids = {}, {}
for i = 4, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) >= 0 and tonumber(s) <= max then
    ids[#ids + 1] = ARGV[i]
    out[#out + 1] = ARGV[i]
    out[#out + 1] = s
  end
end
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return out
`)

// fencedErr turns a script's "FENCED n" error into a *FencedError.
func fencedErr(err error, token int64) (*FencedError, bool) {
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(string(re), "FENCED ") {
		newest, _ := strconv.ParseInt(strings.TrimPrefix(string(re), "FENCED "), 10, 64)
		return &FencedError{Token: token, Newest: newest}, true
	}
	return nil, false
}

// ClaimBegin claims up to limit ids due by maxDueMS from partition p under
// the caller's fencing token, puts them in flight with the visibility
// deadline deadline(due) gives, and reads their records (see Begin for
// nil and Corrupt ones). A *FencedError means the fence holds another
// token and nothing was claimed.
//
// An id is in flight before it leaves the scheduled set: the claim looks
// first (peekScript, which also checks the fence), then sends, in one
// pipeline, the in-flight entries, the claim of exactly those ids
// (claimIDsScript) and the read of their records. A consumer that dies
// at any point leaves each id scheduled, in flight, or both, never in
// neither, so the partition's next owner returns it at once (it returns
// everything in flight at takeover). Entries put in flight for ids the
// claim did not take (deleted or rescheduled meanwhile) are removed. Ids
// of a segment are claimed with the segment and put in flight after it
// is taken apart, as Claim does; should that fail midway, the reconciler
// finds them.
//
// On an error other than a *FencedError some ids may be in flight and
// not scheduled, without the caller knowing them: the caller returns
// them (with the other in-flight messages not its own) to scheduled.
func (s *Store) ClaimBegin(ctx context.Context, topic string, p int, token, maxDueMS int64, limit int, deadline func(dueMS int64) int64) ([]Claimed, []*Record, error) {
	sk := keys.Scheduled(s.ns, topic, p)
	r, err := s.script(ctx, peekScript, sk, keys.Fence, token, maxDueMS, limit)
	if err != nil {
		if fe, ok := fencedErr(err, token); ok {
			return nil, nil, fe
		}
		return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	vals, err := redis.Strings(r, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	if len(vals) == 0 {
		return nil, nil, nil
	}
	ik, mk := keys.InFlight(s.ns, topic, p), keys.Records(s.ns, topic, p)
	claimArgs := scriptCall(claimIDsScript, sk, 3+len(vals)/2)
	claimArgs = append(claimArgs, keys.Fence, token, maxDueMS)
	zadd := []any{ik}
	hmget := []any{mk}
	var plain []string
	for i := 0; i+1 < len(vals); i += 2 {
		id := vals[i]
		claimArgs = append(claimArgs, id)
		if isSegField(id) {
			continue
		}
		due, _ := strconv.ParseFloat(vals[i+1], 64)
		zadd = append(zadd, deadline(int64(due)), id)
		hmget = append(hmget, id)
		plain = append(plain, id)
	}
	var cmds []cmd
	if len(plain) > 0 {
		cmds = append(cmds, cmd{"ZADD", zadd})
	}
	cmds = append(cmds, cmd{"EVALSHA", claimArgs})
	if len(plain) > 0 {
		cmds = append(cmds, cmd{"HMGET", hmget})
	}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	defer c.Close()
	replies, err := pipeScripts(ctx, c, cmds)
	if err == nil {
		err = firstErr(replies)
	}
	if err != nil {
		// A refused claim leaves its in-flight entries: removing them
		// could remove the newer owner's.
		if fe, ok := fencedErr(err, token); ok {
			return nil, nil, fe
		}
		return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	at := 0
	if len(plain) > 0 {
		at = 1
	}
	got, err := redis.Strings(replies[at], nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	var recsByID map[string]*Record
	if len(plain) > 0 {
		raw, err := redis.ByteSlices(replies[at+1], nil)
		if err != nil {
			return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
		}
		recs := decodeAll(raw, len(plain))
		recsByID = make(map[string]*Record, len(plain))
		for i, id := range plain {
			recsByID[id] = recs[i]
		}
	}
	var claimed []Claimed
	var recs []*Record
	var segs []string
	taken := make(map[string]bool, len(got)/2)
	for i := 0; i+1 < len(got); i += 2 {
		if isSegField(got[i]) {
			segs = append(segs, got[i])
			continue
		}
		due, _ := strconv.ParseFloat(got[i+1], 64)
		claimed = append(claimed, Claimed{ID: got[i], Due: int64(due)})
		recs = append(recs, recsByID[got[i]])
		taken[got[i]] = true
	}
	if len(taken) < len(plain) {
		rem := []any{ik}
		for _, id := range plain {
			if !taken[id] {
				rem = append(rem, id)
			}
		}
		if _, err := pipe(ctx, c, []cmd{{"ZREM", rem}}); err != nil {
			return nil, nil, fmt.Errorf("claim partition %d: drop entries of ids not claimed: %w", p, err)
		}
	}
	if len(segs) == 0 {
		return claimed, recs, nil
	}
	fromSegs, err := s.explode(ctx, topic, p, segs, nil, maxDueMS, limit-len(claimed))
	if err != nil {
		return nil, nil, err
	}
	if len(fromSegs) == 0 {
		return claimed, recs, nil
	}
	ids := make([]string, len(fromSegs))
	deadlines := make([]int64, len(fromSegs))
	for i, m := range fromSegs {
		ids[i], deadlines[i] = m.ID, deadline(m.Due)
	}
	segRecs, err := s.Begin(ctx, topic, p, ids, deadlines)
	if err != nil {
		return nil, nil, err
	}
	return append(claimed, fromSegs...), append(recs, segRecs...), nil
}
