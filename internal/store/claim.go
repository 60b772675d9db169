package store

import (
	"bytes"
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
// the segments among them. Only the ids are made strings.
func splitClaimed(vals [][]byte) (plain []Claimed, segs []string) {
	plain = make([]Claimed, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		if isSegmentField(vals[i]) {
			segs = append(segs, string(vals[i]))
			continue
		}
		plain = append(plain, Claimed{ID: string(vals[i]), Due: parseScore(vals[i+1])})
	}
	return plain, segs
}

// segmentMark is keys.SegmentMark, to compare a reply's bytes with.
var segmentMark = []byte(keys.SegmentMark)

// isSegmentField is keys.IsSegmentField of a reply's bytes.
func isSegmentField(b []byte) bool { return bytes.HasPrefix(b, segmentMark) }

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
	c, err := s.conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	defer c.Close()
	peeked, peekedSegs, err := s.peek(ctx, c, tp, token, maxDueMS, limit)
	if err != nil || len(peeked)+len(peekedSegs) == 0 {
		return nil, nil, err
	}
	ps := newPeekedState(peeked, peekedSegs)
	replies, err := roundTrip(ctx, c, s.claimCmds(tp, cl, ps))
	if err != nil {
		// A refused claim leaves its in-flight entries: removing them
		// could remove the newer owner's.
		if fe, ok := fencedErr(err, token); ok {
			return nil, nil, fe
		}
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	got, err := ps.readReplies(tp.P, cl.Shared, replies)
	if err != nil {
		return nil, nil, err
	}
	claimed, recs, places, segs, err := ps.toStart(got)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	if err := s.afterClaim(ctx, c, tp, cl.Deadline, ps, claimed, places); err != nil {
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

// peek lists what a claim of partition tp under token would take, on c:
// up to limit ids (with their due) and segments due by maxDueMS, in one
// round trip of two plain commands, the fence's score and the range. A
// *FencedError means the fence holds another token. The fence is read
// beside the range, not in one script with it: the claim that follows
// checks it again, atomically with its removals (claimIDsScript), so
// this read only spares a partition's former owner the claim's writes,
// which a change of owner between the peek and the claim leaves anyway;
// and a script's copy of the range through Lua cost as much as the range.
func (s *Store) peek(ctx context.Context, c redis.Conn, tp TopicPartition, token, maxDueMS int64, limit int) ([]Claimed, []string, error) {
	sk := keys.Scheduled(s.ns, tp.Topic, tp.P)
	r, err := roundTrip(ctx, c, []cmd{
		{"ZSCORE", []any{sk, keys.Fence}},
		{"ZRANGEBYSCORE", []any{sk, 0, maxDueMS, "WITHSCORES", "LIMIT", 0, limit}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	var fence int64
	if r[0] != nil {
		b, err := redis.Bytes(r[0], nil)
		if err != nil {
			return nil, nil, fmt.Errorf("claim partition %d: fence %v: %w", tp.P, r[0], err)
		}
		fence = -parseScore(b)
	}
	if fence != token {
		return nil, nil, &FencedError{Token: token, Newest: fence}
	}
	vals, err := redis.ByteSlices(r[1], nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	plain, segs := splitClaimed(vals)
	return plain, segs, nil
}

// claimDue runs claimScript on partition tp's scheduled ZSET under
// token, and returns the ids (with their due) and segments due by
// maxDueMS, up to limit, that it took. A *FencedError means the fence
// holds another token.
func (s *Store) claimDue(ctx context.Context, tp TopicPartition, token, maxDueMS int64, limit int) ([]Claimed, []string, error) {
	r, err := s.script(ctx, claimScript, keys.Scheduled(s.ns, tp.Topic, tp.P), keys.Fence, token, maxDueMS, limit)
	if err != nil {
		if fe, ok := fencedErr(err, token); ok {
			return nil, nil, fe
		}
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	vals, err := redis.ByteSlices(r, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim partition %d: %w", tp.P, err)
	}
	plain, segs := splitClaimed(vals)
	return plain, segs, nil
}

// peekedState is what a claim learns of each id it peeked, by the id's
// place in the peek (flags), and the records read (recs, by place).
// Places, not maps keyed by id: a claim of 256 ids made about 2,000 map
// operations, a fifth of the consumer's CPU in a claim.
type peekedState struct {
	peeked []Claimed
	segs   []string // the segments' fields peeked, claimed after the ids
	flags  []uint8
	recs   []*Record
	// entered and marked count the ids with those flags.
	entered, marked int
}

// Flags of a peeked id.
const (
	peekEntered uint8 = 1 << iota // given an in-flight entry (not held)
	peekMarked                    // its running mark written by the claim
	peekRunning                   // in flight with a mark: its delivery runs elsewhere
	peekStale                     // its in-flight entry is one no delivery will end
	peekTaken                     // the claim took it
	peekStarted                   // taken, and its delivery starts now
)

func newPeekedState(peeked []Claimed, segs []string) *peekedState {
	return &peekedState{peeked: peeked, segs: segs, flags: make([]uint8, len(peeked))}
}

func (ps *peekedState) has(i int, f uint8) bool { return ps.flags[i]&f != 0 }

// ids returns the ids of the places with flag f.
func (ps *peekedState) ids(f uint8, n int) []string {
	out := make([]string, 0, n)
	for i, m := range ps.peeked {
		if ps.has(i, f) {
			out = append(out, m.ID)
		}
	}
	return out
}

// claimCmds returns the pipeline of a ClaimBegin, from the ids
// (ps.peeked) and segments (ps.segs) it peeked: the in-flight entries of
// the ids at deadline(due), the claim of exactly those ids and segments
// (claimIDsScript, fenced), the running marks (cl.Token) of those due by
// cl.StartByMS (the start of their deliveries: see StartMany), and the
// read of the ids' records, after the marks. It flags the ids it starts
// (peekMarked) and those it gives entries (peekEntered): the peeked ids
// not held.
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
// its own: an id in flight with a mark runs elsewhere, and is skipped;
// its mark stays that delivery's (markNewScript writes only new ones).
func (s *Store) claimCmds(tp TopicPartition, cl Claim, ps *peekedState) []cmd {
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	n := len(ps.peeked)
	claimArgs := scriptCall(claimIDsScript, keys.Scheduled(s.ns, tp.Topic, tp.P), 3+n+len(ps.segs))
	claimArgs = append(claimArgs, keys.Fence, cl.Token, cl.MaxDueMS)
	entries := make([]any, 0, 2*n)
	hmget := append(make([]any, 0, 1+n), mk)
	marks := []any{mk}
	if cl.StartByMS > 0 {
		marks = append(make([]any, 0, 1+2*n), mk)
	}
	var lastDL int64
	var lastDLArg any
	token := any(cl.Token) // every mark's value, converted once
	for i, m := range ps.peeked {
		id := any(m.ID) // one conversion for the three lists
		claimArgs = append(claimArgs, id)
		hmget = append(hmget, id)
		if cl.held(m.ID) {
			continue
		}
		ps.flags[i] |= peekEntered
		ps.entered++
		// Ids due together share their deadline, and its conversion.
		if dl := cl.Deadline(m.Due); lastDLArg == nil || dl != lastDL {
			lastDL, lastDLArg = dl, dl
		}
		entries = append(entries, lastDLArg, id)
		if cl.StartByMS > 0 && m.Due <= cl.StartByMS {
			ps.flags[i] |= peekMarked
			ps.marked++
			marks = append(marks, keys.RunningField(m.ID), token)
		}
	}
	for _, f := range ps.segs {
		claimArgs = append(claimArgs, f)
	}
	ik := keys.InFlight(s.ns, tp.Topic, tp.P)
	var cmds []cmd
	switch {
	case ps.entered == 0:
	case cl.Shared:
		cmds = append(cmds, cmd{"EVALSHA", append(scriptCall(beginNewScript, ik, len(entries)), entries...)})
	default:
		cmds = append(cmds, cmd{"ZADD", append([]any{ik, "NX"}, entries...)})
	}
	cmds = append(cmds, cmd{"EVALSHA", claimArgs})
	if ps.entered > 0 && cl.Shared {
		cmds = append(cmds, cmd{"HMGET", runningFields([]any{mk}, ps.ids(peekEntered, ps.entered))})
	}
	switch {
	case len(marks) == 1:
	case cl.Shared:
		// A mark there already is a delivery's that runs elsewhere: it
		// stays that delivery's (see Ack).
		cmds = append(cmds, cmd{"EVALSHA", append(scriptCall(markNewScript, mk, len(marks)-1), marks[1:]...)})
	default:
		cmds = append(cmds, cmd{"HMSET", marks})
	}
	if n > 0 {
		cmds = append(cmds, cmd{"HMGET", hmget})
	}
	return cmds
}

// readReplies reads the replies of claimCmds' pipeline: it returns the
// places of the ids and segments the claim took (see claimIDsScript), keeps the records read
// (ps.recs, by place), and of the ids given entries, flags those in
// flight already whose delivery runs elsewhere (peekRunning: shared, an
// entry and a mark) and those whose entry no delivery will end
// (peekStale).
func (ps *peekedState) readReplies(p int, shared bool, replies []any) (got []int, err error) {
	bad := func(r any, err error) error { return fmt.Errorf("claim partition %d: bad reply %v (%v)", p, r, err) }
	at := 0
	var inFlight []int
	added := ps.entered
	if ps.entered > 0 {
		at = 1
		if shared {
			inFlight, err = redis.Ints(replies[0], nil)
			if err == nil && len(inFlight) != ps.entered {
				err = errors.New("one per id")
			}
		} else {
			added, err = redis.Int(replies[0], nil)
		}
		if err != nil {
			return nil, bad(replies[0], err)
		}
	}
	if got, err = redis.Ints(replies[at], nil); err != nil {
		return nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	at++
	switch {
	case inFlight != nil:
		marks, err := redis.Values(replies[at], nil)
		if err != nil || len(marks) != ps.entered {
			return nil, bad(replies[at], err)
		}
		at++
		k := 0
		for i := range ps.peeked {
			if !ps.has(i, peekEntered) {
				continue
			}
			switch {
			case inFlight[k] == 1 && marks[k] != nil:
				ps.flags[i] |= peekRunning
			case inFlight[k] == 1:
				ps.flags[i] |= peekStale
			}
			k++
		}
	case added < ps.entered:
		// Some had an entry already: which, ZADD NX does not say, and
		// the claim's deadline is as right for the others.
		for i := range ps.peeked {
			if ps.has(i, peekEntered) {
				ps.flags[i] |= peekStale
			}
		}
	}
	if len(ps.peeked) == 0 {
		return got, nil
	}
	if ps.marked > 0 {
		at++
	}
	raw, err := redis.ByteSlices(replies[at], nil)
	if err != nil {
		return nil, fmt.Errorf("claim partition %d: %w", p, err)
	}
	ps.recs = decodeAll(raw, len(ps.peeked))
	return got, nil
}

// toStart reads the reply of the claim script, the places of what it
// took (1 for the first id peeked, the segments after the ids): it
// returns the ids the claim took but those running elsewhere, with their
// records and their places in the peek, and apart the segments it took;
// it flags every id it took (peekTaken) and those that start now
// (peekStarted): those it marked whose record is the one the entry was
// due for. Each id's due is the one its peek read: the claim took it
// due by the same bound, and a write that moved its entry since wrote
// its record first (the record's due, when later, is the one held to).
// A place out of range, or named twice, is a bad reply.
func (ps *peekedState) toStart(got []int) (claimed []Claimed, recs []*Record, places []int, segs []string, err error) {
	claimed = make([]Claimed, 0, len(got))
	recs = make([]*Record, 0, len(got))
	places = make([]int, 0, len(got))
	n := len(ps.peeked)
	for _, at := range got {
		i := at - 1
		switch {
		case i >= n && i < n+len(ps.segs):
			segs = append(segs, ps.segs[i-n])
			continue
		case i < 0 || i >= n || ps.has(i, peekTaken):
			return nil, nil, nil, nil, fmt.Errorf("claim took place %d of %d ids and %d segments", at, n, len(ps.segs))
		}
		ps.flags[i] |= peekTaken
		if ps.has(i, peekRunning) {
			continue
		}
		m := Claimed{ID: ps.peeked[i].ID, Due: ps.peeked[i].Due}
		rec := ps.recs[i]
		// A record due later than its entry (a stale entry) is held to
		// its due, and started then.
		m.Started = ps.has(i, peekMarked) && rec != nil && rec.Corrupt == nil && rec.Due <= m.Due
		if m.Started {
			ps.flags[i] |= peekStarted
		}
		claimed = append(claimed, m)
		recs = append(recs, rec)
		places = append(places, i)
	}
	return claimed, recs, places, segs, nil
}

// parseScore reads a ZSET score of a due time (unix ms), which Redis
// writes as an integer, without the string ParseFloat needs; it falls
// back to ParseFloat for any other form.
func parseScore(b []byte) int64 {
	var n int64
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		f, _ := strconv.ParseFloat(string(b), 64)
		return int64(f)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			f, _ := strconv.ParseFloat(string(b), 64)
			return int64(f)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// afterClaim sends, when there is any, what a claim's pipeline leaves to
// do (ps, and claimed at their places): the removal of the running marks
// the claim wrote for deliveries that do not start now (not taken:
// deleted or claimed meanwhile, or held to a record due later than its
// entry; the ids running elsewhere had their marks before), and of the
// in-flight entries it wrote for ids it did not take (deleted or
// rescheduled meanwhile), and the claim's deadlines for the stale entries
// of ids it took (an entry that a claim refused by the fence left
// behind, which no delivery will end). The entries of ids running
// elsewhere are theirs, and stay.
func (s *Store) afterClaim(ctx context.Context, c redis.Conn, tp TopicPartition, deadline func(dueMS int64) int64, ps *peekedState, claimed []Claimed, places []int) error {
	var cmds []cmd
	var unmarked []string
	ik := keys.InFlight(s.ns, tp.Topic, tp.P)
	rem := []any{ik}
	for i, m := range ps.peeked {
		f := ps.flags[i]
		if f&peekRunning != 0 {
			continue
		}
		if f&peekMarked != 0 && f&peekStarted == 0 {
			unmarked = append(unmarked, m.ID)
		}
		if f&peekEntered != 0 && f&peekTaken == 0 {
			rem = append(rem, m.ID)
		}
	}
	if len(unmarked) > 0 {
		cmds = append(cmds, clearRunning(keys.Records(s.ns, tp.Topic, tp.P), unmarked))
	}
	if len(rem) > 1 {
		cmds = append(cmds, cmd{"ZREM", rem})
	}
	zadd := []any{ik, "XX"}
	for k, m := range claimed {
		if ps.has(places[k], peekStale) {
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
	out, segs, err := s.claimDue(ctx, tp, token, maxDueMS, limit)
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

// markNewScript writes running marks where the ids have none: a claim's
// marks, when deliveries of the partition's messages may run elsewhere
// (see claimCmds). KEYS[1]: records HASH. ARGV: field1, mark1, field2,
// ... Returns 1.
var markNewScript = newScript(`
for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
`)

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
