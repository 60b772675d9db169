package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

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

// raiseScript raises the partition's fence to the caller's token.
// KEYS[1]: scheduled ZSET. ARGV[1]: fence member, ARGV[2]: token.
// Returns the fence's token after the call (the caller's token unless a
// newer one was already there).
var raiseScript = newScript(`
local f = redis.call('ZSCORE', KEYS[1], ARGV[1])
local cur = 0
if f then cur = -tonumber(f) end
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
var claimScript = newScript(`
local f = redis.call('ZSCORE', KEYS[1], ARGV[1])
local cur = 0
if f then cur = -tonumber(f) end
if cur ~= tonumber(ARGV[2]) then
  return redis.error_reply('FENCED ' .. string.format('%d', cur))
end
local r = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[3], 'WITHSCORES', 'LIMIT', 0, ARGV[4])
local ids = {}
for i = 1, #r, 2 do ids[#ids + 1] = r[i] end
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return r
`)

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

// updateScript overwrites records that still exist, and only those: a
// message deleted (or acked) meanwhile must not come back.
// KEYS[1]: records HASH. ARGV: id1, record1, id2, record2, ...
// Returns one integer per id: 1 written, 0 gone.
var updateScript = newScript(`
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)

// update overwrites the records of ids that still exist and reports, per
// id, whether it did.
func (s *Store) update(ctx context.Context, topic string, p int, ids []string, recs []*Record) ([]bool, error) {
	args := make([]any, 0, 1+2*len(ids))
	args = append(args, keys.Records(s.ns, topic, p))
	for i, id := range ids {
		args = append(args, id, recs[i].Encode())
	}
	r, err := s.script(ctx, updateScript, args...)
	if err != nil {
		return nil, fmt.Errorf("update records in partition %d: %w", p, err)
	}
	vals, err := intsOf(r, len(ids))
	if err != nil {
		return nil, fmt.Errorf("update records in partition %d: %w", p, err)
	}
	ok := make([]bool, len(ids))
	for i, v := range vals {
		ok[i] = v == 1
	}
	return ok, nil
}

// addScript adds records that are not there yet, neither as a record of
// their own nor in a segment (an id of 26 characters, the first 22 the
// segment's prefix: see SegmentIDLen).
// KEYS[1]: records HASH. ARGV: id1, record1, id2, record2, ...
// Returns one integer per id: 1 added, 0 already there (a duplicate).
var addScript = newScript(segLua + `
local out = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local held = false
  if #id == 26 then
    local v = redis.call('HGET', KEYS[1], '\1' .. string.sub(id, 1, 22))
    held = v and segFind(v, string.sub(id, 23))
  end
  if held then
    out[#out + 1] = 0
  else
    out[#out + 1] = redis.call('HSETNX', KEYS[1], id, ARGV[i + 1])
  end
end
return out
`)

// NextToken returns a new fencing token for the partition (INCR of its
// epoch key).
func (s *Store) NextToken(ctx context.Context, topic string, p int) (int64, error) {
	r, err := s.do(ctx, cmd{"INCR", []any{keys.Epoch(s.ns, topic, p)}})
	if err != nil {
		return 0, fmt.Errorf("token of partition %d: %w", p, err)
	}
	return redis.Int64(r[0], nil)
}

func (s *Store) script(ctx context.Context, sc *redis.Script, keysAndArgs ...any) (any, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return sc.DoContext(ctx, c, keysAndArgs...)
}

// RaiseFence raises partition p's fence to token. A *FencedError means a
// newer token holds the fence: the caller's lease is superseded.
func (s *Store) RaiseFence(ctx context.Context, topic string, p int, token int64) error {
	r, err := s.script(ctx, raiseScript, keys.Scheduled(s.ns, topic, p), keys.Fence, token)
	if err != nil {
		return fmt.Errorf("raise fence of partition %d: %w", p, err)
	}
	cur, err := redis.Int64(r, nil)
	if err != nil {
		return fmt.Errorf("raise fence of partition %d: %w", p, err)
	}
	if cur != token {
		return &FencedError{Token: token, Newest: cur}
	}
	return nil
}

// Claimed is an id the claim script removed from the scheduled ZSET.
type Claimed struct {
	ID  string
	Due int64 // unix ms
}

// Claim removes up to limit ids due at or before maxDueMS from partition
// p's scheduled ZSET under the caller's fencing token. The ids are then in
// no index: the caller must Begin them next. A *FencedError means the fence
// holds another token and nothing was claimed.
func (s *Store) Claim(ctx context.Context, topic string, p int, token, maxDueMS int64, limit int) ([]Claimed, error) {
	r, err := s.script(ctx, claimScript, keys.Scheduled(s.ns, topic, p), keys.Fence, token, maxDueMS, limit)
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.HasPrefix(string(re), "FENCED ") {
			newest, _ := strconv.ParseInt(strings.TrimPrefix(string(re), "FENCED "), 10, 64)
			return nil, &FencedError{Token: token, Newest: newest}
		}
		return nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	vals, err := redis.Strings(r, nil)
	if err != nil {
		return nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	out := make([]Claimed, 0, len(vals)/2)
	var segs []string
	for i := 0; i+1 < len(vals); i += 2 {
		if isSegField(vals[i]) {
			segs = append(segs, vals[i])
			continue
		}
		due, _ := strconv.ParseFloat(vals[i+1], 64)
		out = append(out, Claimed{ID: vals[i], Due: int64(due)})
	}
	if len(segs) == 0 {
		return out, nil
	}
	return s.explode(ctx, topic, p, segs, out, maxDueMS, limit)
}

// explode turns the claimed segments into records of their own (see
// explodeScript) and adds to claimed those of their messages due by maxDueMS,
// up to limit in all; the others go back to the scheduled ZSET, each under
// its own id. Should it fail midway, a segment whose script did not run
// is found by the reconciler (a segment in no index), and records written
// but not indexed are re-indexed by it.
func (s *Store) explode(ctx context.Context, topic string, p int, segs []string, claimed []Claimed, maxDueMS int64, limit int) ([]Claimed, error) {
	mk := keys.Records(s.ns, topic, p)
	cmds := make([]cmd, len(segs))
	for i, f := range segs {
		cmds[i] = cmd{"EVALSHA", append(scriptCall(explodeScript, mk, 2), f, f[1:])}
	}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := pipeScripts(ctx, c, cmds)
	if err == nil {
		err = firstErr(r)
	}
	if err != nil {
		return nil, fmt.Errorf("claim segments of partition %d: %w", p, err)
	}
	var rest []Claimed
	for _, v := range r {
		vals, err := redis.Strings(v, nil)
		if err != nil {
			return nil, fmt.Errorf("claim segments of partition %d: %w", p, err)
		}
		for i := 0; i+1 < len(vals); i += 2 {
			due, _ := strconv.ParseInt(vals[i+1], 10, 64)
			rest = append(rest, Claimed{ID: vals[i], Due: due})
		}
	}
	slices.SortFunc(rest, func(a, b Claimed) int { return cmp.Compare(a.Due, b.Due) })
	zadd := []any{keys.Scheduled(s.ns, topic, p)}
	for _, m := range rest {
		if m.Due <= maxDueMS && len(claimed) < limit {
			claimed = append(claimed, m)
		} else {
			zadd = append(zadd, m.Due, m.ID)
		}
	}
	if len(zadd) > 1 {
		r, err := pipe(ctx, c, []cmd{{"ZADD", zadd}})
		if err == nil {
			err = firstErr(r)
		}
		if err != nil {
			return nil, fmt.Errorf("claim segments of partition %d: %w", p, err)
		}
	}
	return claimed, nil
}

// Begin puts claimed ids into the in-flight ZSET with their visibility
// deadlines (unix ms) and reads their records. recs[i] is nil for an id
// whose record is gone (deleted meanwhile): a tombstone, whose in-flight
// entry the caller drops with Drop. A record that cannot be decoded comes
// back with Corrupt set (see CorruptMove).
func (s *Store) Begin(ctx context.Context, topic string, p int, ids []string, deadlines []int64) ([]*Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	zadd := make([]any, 0, 1+2*len(ids))
	hmget := make([]any, 0, 1+len(ids))
	zadd = append(zadd, keys.InFlight(s.ns, topic, p))
	hmget = append(hmget, keys.Records(s.ns, topic, p))
	for i, id := range ids {
		zadd = append(zadd, deadlines[i], id)
		hmget = append(hmget, id)
	}
	r, err := s.do(ctx, cmd{"ZADD", zadd}, cmd{"HMGET", hmget})
	if err != nil {
		return nil, fmt.Errorf("begin %d in partition %d: %w", len(ids), p, err)
	}
	raw, err := redis.ByteSlices(r[1], nil)
	if err != nil {
		return nil, fmt.Errorf("begin %d in partition %d: %w", len(ids), p, err)
	}
	return decodeAll(raw, len(ids)), nil
}

// decodeAll decodes an HMGET reply of n records: nil for missing ones,
// Corrupt set on undecodable ones.
func decodeAll(raw [][]byte, n int) []*Record {
	recs := make([]*Record, n)
	for i, b := range raw {
		if b == nil {
			continue
		}
		r, err := DecodeRecord(b)
		if err != nil {
			r = &Record{Body: b, Corrupt: err}
		}
		recs[i] = r
	}
	return recs
}

// CorruptMove returns the move of an in-flight message whose record could
// not be decoded (rec.Corrupt set) to the dead set, at nowMS: its record
// is replaced by one whose body is the stored bytes and whose last error
// is the decode error, so that it is listed, requeued and purged like any
// dead message, and nothing is lost.
func CorruptMove(id string, rec *Record, nowMS int64) Move {
	r := &Record{
		Due: nowMS, Created: nowMS, Updated: nowMS,
		LastError: fmt.Sprintf("undecodable record (%d bytes): %v", len(rec.Body), rec.Corrupt),
		Body:      rec.Body,
	}
	return Move{ID: id, Dead: true, Score: nowMS, Record: r}
}

// Ack removes delivered messages: records and in-flight entries, in one
// pipelined round trip. Should only the ZREM land (a backend failed in
// between), the record is found in no index and re-indexed by the
// reconciler: a duplicate delivery after a fault, never a loss.
func (s *Store) Ack(ctx context.Context, topic string, p int, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.do(ctx,
		cmd{"HDEL", append([]any{keys.Records(s.ns, topic, p)}, strs(ids)...)},
		cmd{"ZREM", append([]any{keys.InFlight(s.ns, topic, p)}, strs(ids)...)})
	if err != nil {
		return fmt.Errorf("ack %d in partition %d: %w", len(ids), p, err)
	}
	return nil
}

// Drop removes in-flight entries without touching records (tombstones).
func (s *Store) Drop(ctx context.Context, topic string, p int, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.do(ctx, cmd{"ZREM", append([]any{keys.InFlight(s.ns, topic, p)}, strs(ids)...)})
	if err != nil {
		return fmt.Errorf("drop %d in partition %d: %w", len(ids), p, err)
	}
	return nil
}

// Move is an in-flight message going back to scheduled or to dead.
type Move struct {
	ID     string
	Dead   bool    // to the dead ZSET (scored Score = time of death) instead of scheduled (Score = due)
	Score  int64   // unix ms
	Record *Record // written when not nil (and only if the record still exists)
}

// Moves writes the records that carry one (only where the record still
// exists: a message deleted meanwhile is not brought back), then the
// destinations (ZADD to scheduled and dead), then removes the in-flight
// entries. Used for retries, deaths, expired visibility deadlines and held
// messages returned at shutdown. It returns how many moves were skipped
// because their record was gone.
func (s *Store) Moves(ctx context.Context, topic string, p int, moves []Move) (gone int, err error) {
	if len(moves) == 0 {
		return 0, nil
	}
	var ids []string
	var recs []*Record
	for _, m := range moves {
		if m.Record != nil {
			ids = append(ids, m.ID)
			recs = append(recs, m.Record)
		}
	}
	alive := map[string]bool{}
	if len(ids) > 0 {
		ok, err := s.update(ctx, topic, p, ids, recs)
		if err != nil {
			return 0, fmt.Errorf("move %d in partition %d: %w", len(moves), p, err)
		}
		for i, id := range ids {
			alive[id] = ok[i]
		}
	}
	sched := []any{keys.Scheduled(s.ns, topic, p)}
	dead := []any{keys.Dead(s.ns, topic, p)}
	rem := []any{keys.InFlight(s.ns, topic, p)}
	for _, m := range moves {
		rem = append(rem, m.ID)
		if m.Record != nil && !alive[m.ID] {
			gone++
			continue
		}
		if m.Dead {
			dead = append(dead, m.Score, m.ID)
		} else {
			sched = append(sched, m.Score, m.ID)
		}
	}
	var first []cmd
	if len(sched) > 1 {
		first = append(first, cmd{"ZADD", sched})
	}
	if len(dead) > 1 {
		first = append(first, cmd{"ZADD", dead})
	}
	if _, err := s.steps(ctx, first, []cmd{{"ZREM", rem}}); err != nil {
		return gone, fmt.Errorf("move %d in partition %d: %w", len(moves), p, err)
	}
	return gone, nil
}

// Expired returns up to limit in-flight ids whose visibility deadline is at
// or before nowMS, with their records (nil for tombstones).
func (s *Store) Expired(ctx context.Context, topic string, p int, nowMS int64, limit int) ([]string, []*Record, error) {
	r, err := s.do(ctx, cmd{"ZRANGEBYSCORE", []any{keys.InFlight(s.ns, topic, p), 0, nowMS, "LIMIT", 0, limit}})
	if err != nil {
		return nil, nil, fmt.Errorf("expired in partition %d: %w", p, err)
	}
	ids, _ := redis.Strings(r[0], nil)
	if len(ids) == 0 {
		return nil, nil, nil
	}
	recs, err := s.Records(ctx, topic, p, ids)
	return ids, recs, err
}

// Records reads the records of ids (nil for missing ones, Corrupt set on
// undecodable ones).
func (s *Store) Records(ctx context.Context, topic string, p int, ids []string) ([]*Record, error) {
	r, err := s.do(ctx, cmd{"HMGET", append([]any{keys.Records(s.ns, topic, p)}, strs(ids)...)})
	if err != nil {
		return nil, fmt.Errorf("records in partition %d: %w", p, err)
	}
	raw, _ := redis.ByteSlices(r[0], nil)
	return decodeAll(raw, len(ids)), nil
}

// Reconcile scans up to about count records of partition p from cursor
// (HSCAN) and re-indexes, into the scheduled ZSET at their recorded due
// time, those found in no index. It returns the next cursor ("0" when the
// scan wrapped around) and the ids it repaired. Only the partition's owner
// runs it, between its own claims, so an id it finds in no index is not
// one of its claims in progress; ids for which skip reports true (the
// owner's deliveries, whose in-flight entry a previous owner's late
// write may have removed) are left alone. skip may be nil.
func (s *Store) Reconcile(ctx context.Context, topic string, p int, cursor string, count int, skip func(id string) bool) (string, []string, error) {
	r, err := s.do(ctx, cmd{"HSCAN", []any{keys.Records(s.ns, topic, p), cursor, "COUNT", count}})
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
	}
	parts, err := redis.Values(r[0], nil)
	if err != nil || len(parts) != 2 {
		return cursor, nil, fmt.Errorf("reconcile partition %d: bad HSCAN reply: %v", p, err)
	}
	next, _ := redis.String(parts[0], nil)
	kv, _ := redis.ByteSlices(parts[1], nil)
	var ids, segs, pending []string
	var recs, segVals [][]byte
	for i := 0; i+1 < len(kv); i += 2 {
		switch f := string(kv[i]); {
		case isIDField(f):
			if skip != nil && skip(f) {
				continue
			}
			ids = append(ids, f)
			recs = append(recs, kv[i+1])
		case isSegField(f):
			segs = append(segs, f)
			segVals = append(segVals, kv[i+1])
		case isSegPendingField(f):
			pending = append(pending, f)
		}
	}
	if len(ids) == 0 && len(segs) == 0 && len(pending) == 0 {
		return next, nil, nil
	}
	// Which ids are in an index, and which segments in the scheduled
	// ZSET (their only index; the ids a segment holds are checked with the
	// others, since moving out of it gives them a record of their own),
	// in one pipeline.
	sk := keys.Scheduled(s.ns, topic, p)
	var checks []cmd
	run := func(sc *redis.Script, k string, names []string) {
		checks = append(checks, cmd{"EVALSHA", append(scriptCall(sc, k, len(names)), strs(names)...)})
	}
	if len(ids) > 0 {
		for _, k := range []string{sk, keys.InFlight(s.ns, topic, p), keys.Dead(s.ns, topic, p)} {
			run(memberScript, k, ids)
		}
	}
	segAt := len(checks)
	if len(segs) > 0 {
		run(memberScript, sk, segs)
	}
	// Segments a crashed write left uncounted: count them (see
	// segHealScript), in the same pipeline.
	if len(pending) > 0 {
		run(segHealScript, keys.Records(s.ns, topic, p), pending)
	}
	c, err := s.conn(ctx)
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
	}
	r, err = pipeScripts(ctx, c, checks)
	c.Close()
	if err == nil {
		err = firstErr(r)
	}
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
	}
	zadd := []any{sk, "NX"}
	var repaired []string
	if len(ids) > 0 {
		var in [3][]int
		for j := range in {
			if in[j], err = intsOf(r[j], len(ids)); err != nil {
				return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
			}
		}
		for i, id := range ids {
			if in[0][i] == 1 || in[1][i] == 1 || in[2][i] == 1 {
				continue
			}
			// A record that cannot be decoded is indexed due at once:
			// the claim that meets it moves it to the dead set.
			due := int64(0)
			if rec, err := DecodeRecord(recs[i]); err == nil {
				due = rec.Due
			}
			zadd = append(zadd, due, id)
			repaired = append(repaired, id)
		}
	}
	if len(segs) > 0 {
		in, err := intsOf(r[segAt], len(segs))
		if err != nil {
			return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
		}
		for i, f := range segs {
			if in[i] == 1 {
				continue
			}
			entries, err := decodeSegment(segVals[i])
			if err != nil {
				continue
			}
			// An emptied segment (its messages deleted or moved out) is
			// indexed too, due at once: the claim that meets it removes it.
			due := int64(0)
			for j, e := range entries {
				if j == 0 || e.due < due {
					due = e.due
				}
				repaired = append(repaired, f[1:]+e.suffix)
			}
			zadd = append(zadd, due, f)
		}
	}
	if len(zadd) > 2 {
		if _, err := s.do(ctx, cmd{"ZADD", zadd}); err != nil {
			return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
		}
	}
	return next, repaired, nil
}

// intsOf reads a script's reply of one integer per id, n of them.
func intsOf(r any, n int) ([]int, error) {
	vals, err := redis.Ints(r, nil)
	if err != nil || len(vals) != n {
		return nil, fmt.Errorf("bad reply %v (%v), want %d integers", r, err, n)
	}
	return vals, nil
}

func strs(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
