package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// NextDue returns the due time (unix ms) of partition tp's earliest
// scheduled entry, and false when it has none: one plain command (the
// fence and handover marks, scored below zero, are not counted). It is
// the look of a partition that was idle at its last poll, before the
// claim's fenced scripts, and tells the owner when to look next.
func (s *Store) NextDue(ctx context.Context, tp TopicPartition) (dueMS int64, ok bool, err error) {
	r, err := s.do(ctx, cmd{"ZRANGEBYSCORE", []any{keys.Scheduled(s.ns, tp.Topic, tp.P), 0, "+inf", "WITHSCORES", "LIMIT", 0, 1}})
	if err != nil {
		return 0, false, fmt.Errorf("look at partition %d: %w", tp.P, err)
	}
	vals, err := redis.Strings(r[0], nil)
	if err != nil || len(vals) < 2 {
		return 0, false, err
	}
	due, err := strconv.ParseFloat(vals[1], 64)
	if err != nil {
		return 0, false, fmt.Errorf("look at partition %d: score %q: %w", tp.P, vals[1], err)
	}
	return int64(due), true, nil
}

// Claimed is an id the claim script removed from the scheduled ZSET.
type Claimed struct {
	ID  string
	Due int64 // unix ms
	// Started: the claim started its delivery (see Claim.StartByMS), its
	// record as returned is the one claimed, before the start.
	Started bool
}

// Claim is what a ClaimBegin takes: up to Limit ids due by MaxDueMS,
// under the fencing token Token, each put in flight at the visibility
// deadline Deadline(due) gives; those of its messages due by StartByMS
// (0: none) are started in the read of their records (see StartMany).
// Held (nil: none) names the ids the caller holds or runs already: their
// entries and marks are theirs. Shared says that deliveries of the
// partition's messages may run elsewhere: at the consumers that handed
// it over (see claimCmds).
type Claim struct {
	Token     int64
	MaxDueMS  int64
	StartByMS int64
	Limit     int
	Deadline  func(dueMS int64) int64
	Held      func(id string) bool
	Shared    bool
}

func (cl Claim) held(id string) bool { return cl.Held != nil && cl.Held(id) }

// splitClaimed reads the reply of the peek and claim scripts, {id1, due1,
// id2, due2, ...}: the ids with their due times, and apart the fields of
// the segments among them.
func splitClaimed(vals []string) (plain []Claimed, segs []string) {
	plain = make([]Claimed, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		if keys.IsSegmentField(vals[i]) {
			segs = append(segs, vals[i])
			continue
		}
		due, _ := strconv.ParseFloat(vals[i+1], 64)
		plain = append(plain, Claimed{ID: vals[i], Due: int64(due)})
	}
	return plain, segs
}

// ClaimBegin claims, from partition tp, up to cl.Limit ids due by
// cl.MaxDueMS under the caller's fencing token, puts them in flight with
// the visibility deadline cl.Deadline(due) gives, reads their records
// (see Begin for nil and Corrupt ones) and starts the deliveries of
// those due by cl.StartByMS (Claimed.Started). A *FencedError means the
// fence holds another token and nothing was claimed.
//
// An id is in flight before it leaves the scheduled set, so a consumer
// that dies at any point leaves it scheduled, in flight, or both, and
// the partition's next owner returns it (see docs/architecture.md, I1:
// nothing is lost). Entries put in flight for ids the claim did not take
// (deleted or rescheduled meanwhile) are removed. Ids of a segment are
// put in flight after it is taken apart, as ClaimIndexOnly does; should
// that fail midway, the reconciler finds them.
//
// On an error other than a *FencedError some ids may be in flight and
// not scheduled, without the caller knowing them: the caller returns
// them (with the other in-flight messages not its own) to scheduled.
func (s *Store) ClaimBegin(ctx context.Context, tp TopicPartition, cl Claim) ([]Claimed, []*Record, error) {
	token, maxDueMS, limit, deadline := cl.Token, cl.MaxDueMS, cl.Limit, cl.Deadline
	peeked, peekedSegs, err := s.listDue(ctx, peekScript, tp, token, maxDueMS, limit)
	if err != nil || len(peeked)+len(peekedSegs) == 0 {
		return nil, nil, err
	}
	cmds, starts, entered := s.claimCmds(tp, cl, peeked, peekedSegs)
	c, err := s.conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	defer c.Close()
	replies, err := roundTrip(ctx, c, cmds)
	if err != nil {
		// A refused claim leaves its in-flight entries: removing them
		// could remove the newer owner's.
		if fe, ok := fencedErr(err, token); ok {
			return nil, nil, fe
		}
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	got, recsByID, running, stale, err := claimReplies(tp.P, cl.Shared, peeked, entered, len(starts) > 0, replies)
	if err != nil {
		return nil, nil, err
	}
	all, segs := splitClaimed(got)
	claimed, recs, taken := toStart(all, starts, running, recsByID)
	done := claimDone{
		entered: entered, claimed: claimed, taken: taken, running: running, stale: stale,
		unmarked: unstarted(starts, running, claimed),
	}
	if err := s.afterClaim(ctx, c, tp, cl.Deadline, done); err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	if len(segs) == 0 {
		return claimed, recs, nil
	}
	fromSegs, segRecs, err := s.beginSegments(ctx, tp, segs, maxDueMS, limit-len(claimed), deadline)
	if err != nil {
		return nil, nil, err
	}
	return append(claimed, fromSegs...), append(recs, segRecs...), nil
}

// listDue runs sc, peekScript or claimScript, on partition tp's scheduled
// ZSET under token, and returns the ids (with their due) and segments due
// by maxDueMS, up to limit, that it listed (peekScript) or took
// (claimScript). A *FencedError means the fence holds another token.
func (s *Store) listDue(ctx context.Context, sc *redis.Script, tp TopicPartition, token, maxDueMS int64, limit int) ([]Claimed, []string, error) {
	r, err := s.script(ctx, sc, keys.Scheduled(s.ns, tp.Topic, tp.P), keys.Fence, token, maxDueMS, limit)
	if err != nil {
		if fe, ok := fencedErr(err, token); ok {
			return nil, nil, fe
		}
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	vals, err := redis.Strings(r, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	plain, segs := splitClaimed(vals)
	return plain, segs, nil
}

// claimCmds returns the pipeline of a ClaimBegin, from the ids and
// segments it peeked: the in-flight entries of the ids at deadline(due),
// the claim of exactly those ids and segments (claimIDsScript, fenced),
// the running marks of those due by cl.StartByMS (the start of their
// deliveries: see StartMany), and the read of the ids' records, after the
// marks. It returns which ids it starts, and those it gives entries: the
// peeked ids not held.
//
// Never two deliveries of one id at once. The ids the caller holds or
// runs (cl.Held) get neither an entry nor a mark: their claim only takes
// a second index entry of theirs (an enqueue of the id cut short, or a
// send that replaced the record), and the caller's delivery, or its
// start, decides the newer record's fate (see Ack, Move.Was and
// StartMany). The other ids get their entries with ZADD NX, which keeps
// an entry there already: one no delivery will end (stale, see
// afterClaim), unless cl.Shared says that deliveries of others may run.
// Then the entries go in with beginNewScript, which says which ids were
// in flight already, and their marks are read before the claim writes
// its own: an id in flight with a mark runs elsewhere, and is skipped.
func (s *Store) claimCmds(tp TopicPartition, cl Claim, peeked []Claimed, peekedSegs []string) (cmds []cmd, starts map[string]bool, ids []string) {
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	claimArgs := scriptCall(claimIDsScript, keys.Scheduled(s.ns, tp.Topic, tp.P), 3+len(peeked)+len(peekedSegs))
	claimArgs = append(claimArgs, keys.Fence, cl.Token, cl.MaxDueMS)
	var entries []any
	hmget := []any{mk}
	marks := []any{mk}
	starts = map[string]bool{}
	for _, m := range peeked {
		claimArgs = append(claimArgs, m.ID)
		hmget = append(hmget, m.ID)
		if cl.held(m.ID) {
			continue
		}
		ids = append(ids, m.ID)
		entries = append(entries, cl.Deadline(m.Due), m.ID)
		if cl.StartByMS > 0 && m.Due <= cl.StartByMS {
			starts[m.ID] = true
			marks = append(marks, keys.RunningField(m.ID), "1")
		}
	}
	for _, f := range peekedSegs {
		claimArgs = append(claimArgs, f)
	}
	ik := keys.InFlight(s.ns, tp.Topic, tp.P)
	switch {
	case len(ids) == 0:
	case cl.Shared:
		cmds = append(cmds, cmd{"EVALSHA", append(scriptCall(beginNewScript, ik, len(entries)), entries...)})
	default:
		cmds = append(cmds, cmd{"ZADD", append([]any{ik, "NX"}, entries...)})
	}
	cmds = append(cmds, cmd{"EVALSHA", claimArgs})
	if len(ids) > 0 && cl.Shared {
		cmds = append(cmds, cmd{"HMGET", runningFields([]any{mk}, ids)})
	}
	if len(marks) > 1 {
		cmds = append(cmds, cmd{"HMSET", marks})
	}
	if len(peeked) > 0 {
		cmds = append(cmds, cmd{"HMGET", hmget})
	}
	return cmds, starts, ids
}

// claimReplies reads the replies of claimCmds' pipeline: the ids the
// claim took ({id1, due1, ...}), the records read, by id, and of the ids
// given entries, those in flight already whose delivery runs elsewhere
// (running: shared, an entry and a mark) and those whose entry no
// delivery will end (stale).
func claimReplies(p int, shared bool, peeked []Claimed, ids []string, marked bool, replies []any) (got []string, recsByID map[string]*Record, running, stale map[string]bool, err error) {
	bad := func(r any, err error) error { return fmt.Errorf("claim partition %d: bad reply %v (%v)", p, r, err) }
	at := 0
	var inFlight []int
	added := len(ids)
	if len(ids) > 0 {
		at = 1
		if shared {
			inFlight, err = redis.Ints(replies[0], nil)
			if err == nil && len(inFlight) != len(ids) {
				err = errors.New("one per id")
			}
		} else {
			added, err = redis.Int(replies[0], nil)
		}
		if err != nil {
			return nil, nil, nil, nil, bad(replies[0], err)
		}
	}
	if got, err = redis.Strings(replies[at], nil); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	at++
	running, stale = map[string]bool{}, map[string]bool{}
	switch {
	case inFlight != nil:
		marks, err := redis.Values(replies[at], nil)
		if err != nil || len(marks) != len(ids) {
			return nil, nil, nil, nil, bad(replies[at], err)
		}
		at++
		for i, v := range inFlight {
			switch {
			case v == 1 && marks[i] != nil:
				running[ids[i]] = true
			case v == 1:
				stale[ids[i]] = true
			}
		}
	case added < len(ids):
		// Some had an entry already: which, ZADD NX does not say, and
		// the claim's deadline is as right for the others.
		for _, id := range ids {
			stale[id] = true
		}
	}
	if len(peeked) == 0 {
		return got, nil, running, stale, nil
	}
	if marked {
		at++
	}
	raw, err := redis.ByteSlices(replies[at], nil)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	recs := decodeAll(raw, len(peeked))
	recsByID = make(map[string]*Record, len(peeked))
	for i, m := range peeked {
		recsByID[m.ID] = recs[i]
	}
	return got, recsByID, running, stale, nil
}

// toStart returns the ids the claim took (all) but those running
// elsewhere, with their records, and which of them start now: those it
// marked (starts) whose record is the one the entry was due for. taken is
// every id it took.
func toStart(all []Claimed, starts, running map[string]bool, recsByID map[string]*Record) (claimed []Claimed, recs []*Record, taken map[string]bool) {
	claimed = all[:0:0]
	taken = make(map[string]bool, len(all))
	for _, m := range all {
		taken[m.ID] = true
		if running[m.ID] {
			continue
		}
		rec := recsByID[m.ID]
		// A record due later than its entry (a stale entry) is held to
		// its due, and started then.
		m.Started = starts[m.ID] && rec != nil && rec.Corrupt == nil && rec.Due <= m.Due
		claimed = append(claimed, m)
		recs = append(recs, rec)
	}
	return claimed, recs, taken
}

// unstarted returns the ids whose running marks the claim wrote and
// whose delivery does not start now: not taken (deleted or claimed
// meanwhile), or held to a record due later than its entry. The ids
// running elsewhere had their marks before.
func unstarted(starts, running map[string]bool, claimed []Claimed) []string {
	var out []string
	now := make(map[string]bool, len(claimed))
	for _, m := range claimed {
		now[m.ID] = m.Started
	}
	for id := range starts {
		if !now[id] && !running[id] {
			out = append(out, id)
		}
	}
	return out
}

// claimDone is what a claim's pipeline did, as its replies tell (see
// claimReplies, toStart and unstarted).
type claimDone struct {
	entered  []string        // the ids given in-flight entries
	claimed  []Claimed       // those taken, but those running elsewhere
	taken    map[string]bool // every id taken
	running  map[string]bool // ids whose delivery runs elsewhere
	stale    map[string]bool // ids whose entry no delivery will end
	unmarked []string        // ids whose running marks to remove (unstarted)
}

// afterClaim sends, when there is any, what a claim's pipeline leaves
// to do (done): the removal of the running marks of done.unmarked and of
// the in-flight entries it wrote (done.entered) for ids it did not take
// (deleted or rescheduled meanwhile), and the claim's deadlines for the
// stale entries of ids it took (an entry that a claim refused by the
// fence left behind, which no delivery will end). The entries of ids
// running elsewhere are theirs, and stay.
func (s *Store) afterClaim(ctx context.Context, c redis.Conn, tp TopicPartition, deadline func(dueMS int64) int64, done claimDone) error {
	var cmds []cmd
	if len(done.unmarked) > 0 {
		cmds = append(cmds, clearRunning(keys.Records(s.ns, tp.Topic, tp.P), done.unmarked))
	}
	ik := keys.InFlight(s.ns, tp.Topic, tp.P)
	rem := []any{ik}
	for _, id := range done.entered {
		if !done.taken[id] && !done.running[id] {
			rem = append(rem, id)
		}
	}
	if len(rem) > 1 {
		cmds = append(cmds, cmd{"ZREM", rem})
	}
	zadd := []any{ik, "XX"}
	for _, m := range done.claimed {
		if done.stale[m.ID] {
			zadd = append(zadd, deadline(m.Due), m.ID)
		}
	}
	if len(zadd) > 2 {
		cmds = append(cmds, cmd{"ZADD", zadd})
	}
	if len(cmds) == 0 {
		return nil
	}
	_, err := roundTrip(ctx, c, cmds)
	return err
}

// beginSegments takes apart the segments a claim took (explode), keeps
// those of their messages due by maxDueMS, up to limit (the others go
// back to scheduled), and puts them in flight at deadline(due) with
// their records read (Begin).
func (s *Store) beginSegments(ctx context.Context, tp TopicPartition, segs []string, maxDueMS int64, limit int, deadline func(dueMS int64) int64) ([]Claimed, []*Record, error) {
	fromSegs, err := s.explode(ctx, tp, segs, nil, maxDueMS, limit)
	if err != nil || len(fromSegs) == 0 {
		return nil, nil, err
	}
	ids := make([]string, len(fromSegs))
	deadlines := make([]int64, len(fromSegs))
	for i, m := range fromSegs {
		ids[i], deadlines[i] = m.ID, deadline(m.Due)
	}
	segRecs, err := s.Begin(ctx, tp, ids, deadlines)
	if err != nil {
		return nil, nil, err
	}
	return fromSegs, segRecs, nil
}

// ClaimIndexOnly removes up to limit ids due at or before maxDueMS from
// partition tp's scheduled ZSET under the caller's fencing token. The ids
// are then in no index, the opposite of I1's order (destination first):
// only Begin right after makes that good, and a crash between the two
// leaves them to the reconciler. Partition loops use ClaimBegin, which
// writes the in-flight entries in the same script; this half exists for
// the tests that cut a claim between its steps. A *FencedError means the
// fence holds another token and nothing was claimed.
func (s *Store) ClaimIndexOnly(ctx context.Context, tp TopicPartition, token, maxDueMS int64, limit int) ([]Claimed, error) {
	out, segs, err := s.listDue(ctx, claimScript, tp, token, maxDueMS, limit)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return out, nil
	}
	return s.explode(ctx, tp, segs, out, maxDueMS, limit)
}

// explode turns the claimed segments into records of their own (see
// explodeScript) and adds to claimed those of their messages due by maxDueMS,
// up to limit in all; the others go back to the scheduled ZSET, each under
// its own id. Should it fail midway, a segment whose script did not run
// is found by the reconciler (a segment in no index), and records written
// but not indexed are re-indexed by it.
func (s *Store) explode(ctx context.Context, tp TopicPartition, segs []string, claimed []Claimed, maxDueMS int64, limit int) ([]Claimed, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	vals, err := explodeSegments(ctx, c, keys.Records(s.ns, tp.Topic, tp.P), segs)
	if err != nil {
		return nil, fmt.Errorf("claim segments of partition %d: %w", tp.P, err)
	}
	var rest []Claimed
	for i := 0; i+1 < len(vals); i += 2 {
		due, _ := strconv.ParseInt(vals[i+1], 10, 64)
		rest = append(rest, Claimed{ID: vals[i], Due: due})
	}
	slices.SortFunc(rest, func(a, b Claimed) int { return cmp.Compare(a.Due, b.Due) })
	zadd := []any{keys.Scheduled(s.ns, tp.Topic, tp.P)}
	for _, m := range rest {
		if m.Due <= maxDueMS && len(claimed) < limit {
			claimed = append(claimed, m)
		} else {
			zadd = append(zadd, m.Due, m.ID)
		}
	}
	if len(zadd) > 1 {
		if _, err := roundTrip(ctx, c, []cmd{{"ZADD", zadd}}); err != nil {
			return nil, fmt.Errorf("claim segments of partition %d: %w", tp.P, err)
		}
	}
	return claimed, nil
}

// Begin puts claimed ids into the in-flight ZSET with their visibility
// deadlines (unix ms) and reads their records. recs[i] is nil for an id
// whose record is gone (deleted meanwhile): a tombstone, whose in-flight
// entry the caller drops with Drop. A record that cannot be decoded comes
// back with Corrupt set (see CorruptMove).
func (s *Store) Begin(ctx context.Context, tp TopicPartition, ids []string, deadlines []int64) ([]*Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	zadd := make([]any, 0, 1+2*len(ids))
	hmget := make([]any, 0, 1+len(ids))
	zadd = append(zadd, keys.InFlight(s.ns, tp.Topic, tp.P))
	hmget = append(hmget, keys.Records(s.ns, tp.Topic, tp.P))
	for i, id := range ids {
		zadd = append(zadd, deadlines[i], id)
		hmget = append(hmget, id)
	}
	r, err := s.do(ctx, cmd{"ZADD", zadd}, cmd{"HMGET", hmget})
	if err != nil {
		return nil, fmt.Errorf("begin %d in partition %d: %w", len(ids), tp.P, err)
	}
	raw, err := redis.ByteSlices(r[1], nil)
	if err != nil {
		return nil, fmt.Errorf("begin %d in partition %d: %w", len(ids), tp.P, err)
	}
	return decodeAll(raw, len(ids)), nil
}

// beginNewScript adds ids to the in-flight ZSET with their visibility
// deadlines, but those already there, which keep theirs (see claimCmds).
// KEYS[1]: in-flight ZSET. ARGV: deadline1, id1, deadline2, id2, ...
// Returns per id 1 (in flight already) or 0 (added).
var beginNewScript = newScript(`
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[1], ARGV[i + 1]) then
    out[#out + 1] = 1
  else
    redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
    out[#out + 1] = 0
  end
end
return out
`)
