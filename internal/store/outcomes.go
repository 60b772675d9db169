package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Acked is a delivery that succeeded, for Ack.
type Acked struct {
	ID string
	// Header is the header of the record as claimed (see Record.Header).
	Header []byte
	// KeepFor is the message's uniqueness window (ms, Record.UniqueFor):
	// when positive, the ack leaves a Done in place of the record, and the
	// id stays taken for that long (at most MaxWindow).
	KeepFor int64
	// Token is the fencing token the delivery was started under (0: not
	// known). An ack whose record still carries the running mark of its
	// token removes it without reading it; the others compare the record
	// with Header.
	Token int64
}

// Ack removes delivered messages: records, running marks and in-flight
// entries, in one pipelined round trip. A record is removed only while it
// is the one delivered: still marked with the delivery's Token (no write
// rewrote or removed it since its start), or else still beginning with
// its Header as claimed. Acks of one owner send their ids alone
// (ackOwnScript), and the headers of only those whose mark another write
// changed, in a second round trip (ackScript): a burst's acks carry no
// headers. Acks of several owners (kept after a lost lease) go in one
// script per owner. A record a send replaced meanwhile (see Puts) is the
// newer event's, and stays: it goes back to scheduled at its own due, in
// a round trip more, and Ack returns how many did. An ack with a KeepFor
// leaves a Done (finished at nowMS) where the record was, in a script of
// its own (ackKeepScript). Should only the ZREM land (a backend failed
// in between), the record is found in no index and re-indexed by the
// reconciler: a duplicate delivery after a fault, never a loss.
func (s *Store) Ack(ctx context.Context, tp TopicPartition, acks []Acked, nowMS int64) (kept int, err error) {
	if len(acks) == 0 {
		return 0, nil
	}
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	ids := make([]any, len(acks)) // each id converted once, for the scripts and the ZREM
	for i, a := range acks {
		ids[i] = a.ID
	}
	groups := ackGroups(acks)
	cmds := make([]cmd, 0, len(groups)+1)
	for _, g := range groups {
		switch {
		case g.keep:
			args := scriptCall(ackKeepScript, mk, 2+3*len(g.pos))
			args = append(args, tokenArg(g.token), nowMS)
			for _, i := range g.pos {
				args = append(args, ids[i], acks[i].Header, min(acks[i].KeepFor, MaxWindow))
			}
			cmds = append(cmds, cmd{"EVALSHA", args})
		case g.token != 0:
			args := scriptCall(ackOwnScript, mk, 1+len(g.pos))
			args = append(args, g.token)
			for _, i := range g.pos {
				args = append(args, ids[i])
			}
			cmds = append(cmds, cmd{"EVALSHA", args})
		default:
			cmds = append(cmds, compareAck(mk, acks, ids, g.pos, 0))
		}
	}
	rem := append(append(make([]any, 0, 1+len(acks)), keys.InFlight(s.ns, tp.Topic, tp.P)), ids...)
	cmds = append(cmds, cmd{"ZREM", rem})
	c, err := s.conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("ack %d in partition %d: %w", len(acks), tp.P, err)
	}
	defer c.Close()
	r, err := roundTrip(ctx, c, cmds)
	if err != nil {
		return 0, fmt.Errorf("ack %d in partition %d: %w", len(acks), tp.P, err)
	}
	index := []any{}
	var again []cmd     // the compares of the records an owner's mark did not hold
	var againAt [][]int // and their positions in acks
	for gi, g := range groups {
		if g.keep || g.token == 0 {
			if index, err = replacedIndex(r[gi], acks, g.pos, index); err != nil {
				return 0, fmt.Errorf("ack %d in partition %d: %w", len(acks), tp.P, err)
			}
			continue
		}
		rest, err := unmarked(r[gi], g.pos)
		if err != nil {
			return 0, fmt.Errorf("ack %d in partition %d: %w", len(acks), tp.P, err)
		}
		if len(rest) > 0 {
			again = append(again, compareAck(mk, acks, ids, rest, g.token))
			againAt = append(againAt, rest)
		}
	}
	if len(again) > 0 {
		ra, err := roundTrip(ctx, c, again)
		if err != nil {
			return 0, fmt.Errorf("ack %d in partition %d: compare the records rewritten since their start: %w", len(acks), tp.P, err)
		}
		for i, pos := range againAt {
			if index, err = replacedIndex(ra[i], acks, pos, index); err != nil {
				return 0, fmt.Errorf("ack %d in partition %d: %w", len(acks), tp.P, err)
			}
		}
	}
	if len(index) == 0 {
		return 0, nil
	}
	if _, err := roundTrip(ctx, c, []cmd{s.indexCmd(tp, index)}); err != nil {
		return 0, fmt.Errorf("ack %d in partition %d: schedule %d replaced meanwhile: %w", len(acks), tp.P, len(index)/2, err)
	}
	return len(index) / 2, nil
}

// replacedIndex adds to index (due1, id1, ...) the records an ack script
// found replaced, from its reply r: {i, due, ...}, i the 1-based place
// among the acks at pos.
func replacedIndex(r any, acks []Acked, pos []int, index []any) ([]any, error) {
	replaced, err := redis.Int64s(r, nil)
	if err != nil || len(replaced)%2 != 0 {
		return nil, fmt.Errorf("bad reply %v (%v)", r, err)
	}
	for i := 0; i < len(replaced); i += 2 {
		at, due := replaced[i], replaced[i+1]
		if at < 1 || at > int64(len(pos)) || due <= 0 {
			return nil, fmt.Errorf("bad reply %v", r)
		}
		index = append(index, due, acks[pos[at-1]].ID)
	}
	return index, nil
}

// compareAck is the ackScript call for the acks at pos, of the owner
// whose token is token (0: not known): their ids (ids, converted once)
// and headers as claimed.
func compareAck(mk string, acks []Acked, ids []any, pos []int, token int64) cmd {
	args := scriptCall(ackScript, mk, 1+2*len(pos))
	args = append(args, tokenArg(token))
	for _, i := range pos {
		args = append(args, ids[i], acks[i].Header)
	}
	return cmd{"EVALSHA", args}
}

// tokenArg is the ack scripts' ARGV[1] for the owner token: "" when it
// is not known (0).
func tokenArg(token int64) any {
	if token == 0 {
		return ""
	}
	return token
}

// ackGroup is the acks of one script call: those at pos in acks, of one
// owner (token, 0 for not known), with a uniqueness window (keep) or
// without.
type ackGroup struct {
	token int64
	keep  bool
	pos   []int
}

// ackGroups splits acks by owner and window, in the order each group
// first appears: one group in a partition loop's acks, more only in acks
// kept after a lost lease (see poller.Config.Keep).
func ackGroups(acks []Acked) []ackGroup {
	var gs []ackGroup
	for i, a := range acks {
		keep := a.KeepFor > 0
		at := -1
		for j := range gs {
			if gs[j].token == a.Token && gs[j].keep == keep {
				at = j
				break
			}
		}
		if at < 0 {
			at = len(gs)
			gs = append(gs, ackGroup{token: a.Token, keep: keep})
		}
		gs[at].pos = append(gs[at].pos, i)
	}
	return gs
}

// unmarked returns the positions among pos (in acks) that ackOwnScript's
// reply r names: {i, ...}, i the 1-based place among pos.
func unmarked(r any, pos []int) ([]int, error) {
	places, err := redis.Int64s(r, nil)
	if err != nil {
		return nil, fmt.Errorf("bad reply %v (%v)", r, err)
	}
	out := make([]int, 0, len(places))
	for _, at := range places {
		if at < 1 || at > int64(len(pos)) {
			return nil, fmt.Errorf("bad reply %v", r)
		}
		out = append(out, pos[at-1])
	}
	return out, nil
}

// ackOwnScript removes, from their ids alone, the records of acks that
// one owner started whose running mark still holds its token, with
// their marks (see Store.Ack): a mark that holds the token says the
// record is the one delivered (see keys.RunningField). The others'
// records are left for ackScript to compare with their headers as
// claimed: those a send replaced (RunningReplaced, whose mark goes),
// deleted ones, and deliveries whose mark another owner wrote over, or
// that began without one. A mark that holds another owner's token is
// left for ackScript, which keeps it while that owner's newer record
// stays (see ackLua). A write between the two scripts finds each of
// those messages as it would just before or just after a single script.
// KEYS[1]: records HASH. ARGV[1]: the owner's token; then id1, id2, ...
// Returns {i, ...}: the 1-based places of the ids whose mark did not
// hold the token.
var ackOwnScript = newScript(runningLua + `
local out = {}
for from = 2, #ARGV, 1000 do
  local last = math.min(from + 999, #ARGV)
  local fields, del = {}, {}
  for i = from, last do fields[#fields + 1] = RUNNING .. ARGV[i] end
  local marks = redis.call('HMGET', KEYS[1], unpack(fields))
  for i = from, last do
    local k = i - from + 1
    if marks[k] == ARGV[1] then
      del[#del + 1] = fields[k]
      del[#del + 1] = ARGV[i]
    else
      if marks[k] == REPLACED then del[#del + 1] = fields[k] end
      out[#out + 1] = i - 1
    end
  end
  if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
end
return out
`)

// ackScript removes the records that are still the ones delivered (see
// Store.Ack), and their running marks (see ackLua). Its reply names only
// the records a send replaced: an ack of a batch none of whose records
// changed gets an empty one. Ack sends it the acks whose mark
// ackOwnScript did not find holding their owner's token, and those of
// no known owner (token "": every record compared).
// KEYS[1]: records HASH. ARGV[1]: the token of the deliveries' owner
// (see ackLua); then id1, header1, id2, header2, ...
// Returns {i, due, ...}: for each record that replaced the one claimed,
// which stays, the 1-based position of its id and its due. A replacement
// that cannot be read stays too, unnamed: the reconciler finds it in no
// index, and its claim sends it to dead. A Done (the message acked by
// another delivery) stays as it is.
var ackScript = newScript(ackLua + `
local out = {}
eachPair(2, function(ids, headers, base) ackRun(ids, headers, base, out, nil) end)
return out
`)

// ackKeepScript is ackScript for acks with a uniqueness window: each
// record that is still the one delivered is replaced by a Done, finished
// now, for the window given.
// KEYS[1]: records HASH. ARGV[1]: the token (as ackScript's), ARGV[2]:
// now (unix ms); then id1, header1, window1 (ms), id2, ... Returns what
// ackScript returns.
var ackKeepScript = newScript(ackLua + `
local now, out = tonumber(ARGV[2]), {}
for from = 3, #ARGV, 3000 do
  local ids, headers, windows = {}, {}, {}
  for i = from, math.min(from + 2999, #ARGV), 3 do
    ids[#ids + 1] = ARGV[i]
    headers[#headers + 1] = ARGV[i + 1]
    windows[#windows + 1] = tonumber(ARGV[i + 2])
  end
  ackRun(ids, headers, (from - 3) / 3, out,
    function(j) return struct.pack(DONE_FMT, DONE, now, windows[j]) end)
end
return out
`)

// ackLua declares, for the ack scripts, ackRun(ids, headers, base, out,
// doneOf): for a run of acks, it removes each record that is still the
// one delivered, or, given doneOf, writes doneOf(j) (a Done) over it;
// appends to out the place (base + j) and due of each record a send
// replaced, which stays; and clears their running marks, but for one
// that holds another owner's token (ARGV[1] naming the acks' owner) over
// a record that stays: that owner's delivery of the newer record runs,
// and a write meanwhile must be told so. A mark never outlives its
// record here: a record sent again under the same id must not find one.
//
// A record is the one delivered when its running mark holds the token
// of ARGV[1]: the delivery's owner started it, and no write rewrote or
// removed it since (see keys.RunningField). Only the records of the
// other acks are read, and compared with the header as claimed: those a
// send replaced (RunningReplaced), deleted ones, and deliveries whose
// mark another owner wrote over, or that began without one.
var ackLua = recordLua + claimedLua + `
local function ackRun(ids, headers, base, out, doneOf)
  local fields, del, set, rest, other = {}, {}, {}, {}, {}
  for j, id in ipairs(ids) do fields[j] = RUNNING .. id end
  local marks = redis.call('HMGET', KEYS[1], unpack(fields))
  for j, id in ipairs(ids) do
    local m = marks[j]
    if m and ARGV[1] ~= '' and m ~= ARGV[1] and m ~= REPLACED then
      other[j] = true
    elseif m then
      del[#del + 1] = fields[j]
    end
    if m ~= ARGV[1] then
      rest[#rest + 1] = j
    elseif doneOf then
      set[#set + 1] = id
      set[#set + 1] = doneOf(j)
    else
      del[#del + 1] = id
    end
  end
  if #rest > 0 then
    local rids = {}
    for k, j in ipairs(rest) do rids[k] = ids[j] end
    local vals = redis.call('HMGET', KEYS[1], unpack(rids))
    for k, j in ipairs(rest) do
      local v, h = vals[k], headers[j]
      if other[j] and (not v or string.sub(v, 1, #h) == h) then
        del[#del + 1] = fields[j] -- no record of the other owner's delivery stays
      end
      if not v then
      elseif string.sub(v, 1, #h) ~= h then
        if not isDone(v) then
          local ok, due = pcall(readHeader, v)
          if ok then
            out[#out + 1] = base + j
            out[#out + 1] = due
          end
        end
      elseif doneOf then
        set[#set + 1] = ids[j]
        set[#set + 1] = doneOf(j)
      else
        del[#del + 1] = ids[j]
      end
    end
  end
  if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
  if #set > 0 then redis.call('HMSET', KEYS[1], unpack(set)) end
end
`

// Drop removes in-flight entries (and running marks) without touching
// records (tombstones).
func (s *Store) Drop(ctx context.Context, tp TopicPartition, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.do(ctx, clearRunning(keys.Records(s.ns, tp.Topic, tp.P), ids), cmd{"ZREM", append([]any{keys.InFlight(s.ns, tp.Topic, tp.P)}, strs(ids)...)})
	if err != nil {
		return fmt.Errorf("drop %d in partition %d: %w", len(ids), tp.P, err)
	}
	return nil
}

// Move is an in-flight message going back to scheduled or to dead.
type Move struct {
	ID     string
	Dead   bool    // to the dead ZSET (scored Score = time of death) instead of scheduled (Score = due)
	Score  int64   // unix ms
	Record *Record // written when not nil (and only if the record still exists)
	// Was, when set, is the header of the record as claimed (see
	// Record.Header): Record is written only over that record. One that
	// a send replaced meanwhile (see Puts) is the newer event's: it stays,
	// and the message goes back to scheduled at its due instead.
	Was []byte
}

// Moves writes the records that carry one (only where the record still
// exists: a message deleted meanwhile is not brought back), then the
// destinations (ZADD to scheduled and dead) and the removal of the
// running marks, then removes the in-flight entries. Used for retries, deaths, expired visibility deadlines and held
// messages returned at shutdown. It returns how many moves were skipped
// because their record was gone.
func (s *Store) Moves(ctx context.Context, tp TopicPartition, moves []Move) (gone int, err error) {
	if len(moves) == 0 {
		return 0, nil
	}
	var ids []string
	var recs []*Record
	var was [][]byte
	for _, m := range moves {
		if m.Record != nil {
			ids = append(ids, m.ID)
			recs = append(recs, m.Record)
			was = append(was, m.Was)
		}
	}
	status := map[string]int64{} // see updateIfScript
	if len(ids) > 0 {
		st, err := s.updateIf(ctx, tp, ids, recs, was)
		if err != nil {
			return 0, fmt.Errorf("move %d in partition %d: %w", len(moves), tp.P, err)
		}
		for i, id := range ids {
			status[id] = st[i]
		}
	}
	var sched []any
	dead := []any{keys.Dead(s.ns, tp.Topic, tp.P)}
	rem := []any{keys.InFlight(s.ns, tp.Topic, tp.P)}
	moved := make([]string, 0, len(moves))
	for _, m := range moves {
		rem = append(rem, m.ID)
		moved = append(moved, m.ID)
		st := status[m.ID]
		switch {
		case m.Record != nil && st < 0:
			gone++
		case m.Record != nil && st > 0:
			sched = append(sched, st, m.ID) // replaced meanwhile: the newer event at its due
		case m.Dead:
			dead = append(dead, m.Score, m.ID)
		default:
			sched = append(sched, m.Score, m.ID)
		}
	}
	// No delivery of a message moved runs: its running mark goes.
	first := []cmd{clearRunning(keys.Records(s.ns, tp.Topic, tp.P), moved)}
	if len(sched) > 0 {
		// Never later than an entry a send wrote meanwhile (see Puts).
		first = append(first, s.indexCmd(tp, sched))
	}
	if len(dead) > 1 {
		first = append(first, cmd{"ZADD", dead})
	}
	if _, err := s.steps(ctx, first, []cmd{{"ZREM", rem}}); err != nil {
		return gone, fmt.Errorf("move %d in partition %d: %w", len(moves), tp.P, err)
	}
	return gone, nil
}

// updateIfScript overwrites records that still exist and, where a header
// is given, still begin with it (see Move.Was).
// KEYS[1]: records HASH. ARGV: id1, record1, header1, ... (header ""
// for none). Returns per id -1 (gone, finished (a Done), or replaced by a record that
// cannot be read: left as it is, for the reconciler), 0 (written), or
// the due of the record that replaced the one claimed (left as it is).
var updateIfScript = newScript(recordLua + setRecordLua + `
local out = {}
for i = 1, #ARGV, 3 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if not v or isDone(v) then
    out[#out + 1] = -1
  elseif ARGV[i + 2] == '' or string.sub(v, 1, #ARGV[i + 2]) == ARGV[i + 2] then
    setRecord(ARGV[i], ARGV[i + 1])
    out[#out + 1] = 0
  else
    local ok, due = pcall(readHeader, v)
    if ok then out[#out + 1] = due else out[#out + 1] = -1 end
  end
end
return out
`)

// updateIf writes records as updateIfScript does, and returns its reply.
func (s *Store) updateIf(ctx context.Context, tp TopicPartition, ids []string, recs []*Record, was [][]byte) ([]int64, error) {
	args := make([]any, 0, 1+3*len(ids))
	args = append(args, keys.Records(s.ns, tp.Topic, tp.P))
	for i, id := range ids {
		args = append(args, id, recs[i].Encode(), was[i])
	}
	r, err := s.script(ctx, updateIfScript, args...)
	if err != nil {
		return nil, fmt.Errorf("update records in partition %d: %w", tp.P, err)
	}
	v, err := redis.Int64s(r, nil)
	if err != nil || len(v) != len(ids) {
		return nil, fmt.Errorf("update records in partition %d: bad reply %v (%v)", tp.P, r, err)
	}
	return v, nil
}

// update overwrites the records of ids that still exist and reports, per
// id, whether it did.
func (s *Store) update(ctx context.Context, tp TopicPartition, ids []string, recs []*Record) ([]bool, error) {
	st, err := s.updateIf(ctx, tp, ids, recs, make([][]byte, len(ids)))
	if err != nil {
		return nil, err
	}
	ok := make([]bool, len(ids))
	for i, v := range st {
		ok[i] = v == 0
	}
	return ok, nil
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

// Expired returns up to limit in-flight ids whose visibility deadline is at
// or before nowMS, with their records (nil for tombstones) and whether
// their deliveries had started (their running marks).
func (s *Store) Expired(ctx context.Context, tp TopicPartition, nowMS int64, limit int) ([]string, []*Record, []bool, error) {
	r, err := s.do(ctx, cmd{"ZRANGEBYSCORE", []any{keys.InFlight(s.ns, tp.Topic, tp.P), 0, nowMS, "LIMIT", 0, limit}})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("expired in partition %d: %w", tp.P, err)
	}
	ids, _ := redis.Strings(r[0], nil)
	if len(ids) == 0 {
		return nil, nil, nil, nil
	}
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	r, err = s.do(ctx, cmd{"HMGET", runningFields(append([]any{mk}, strs(ids)...), ids)})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("expired in partition %d: %w", tp.P, err)
	}
	raw, _ := redis.ByteSlices(r[0], nil)
	if len(raw) != 2*len(ids) {
		return nil, nil, nil, fmt.Errorf("expired in partition %d: bad reply of %d values", tp.P, len(raw))
	}
	started := make([]bool, len(ids))
	for i := range ids {
		started[i] = raw[len(ids)+i] != nil
	}
	return ids, decodeAll(raw[:len(ids)], len(ids)), started, nil
}

// Records reads the records of ids (nil for missing ones, Corrupt set on
// undecodable ones).
func (s *Store) Records(ctx context.Context, tp TopicPartition, ids []string) ([]*Record, error) {
	r, err := s.do(ctx, cmd{"HMGET", append([]any{keys.Records(s.ns, tp.Topic, tp.P)}, strs(ids)...)})
	if err != nil {
		return nil, fmt.Errorf("records in partition %d: %w", tp.P, err)
	}
	raw, _ := redis.ByteSlices(r[0], nil)
	return decodeAll(raw, len(ids)), nil
}
