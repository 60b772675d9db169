package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Reconcile scans up to about count records of partition tp from cursor
// (HSCAN) and re-indexes, into the scheduled ZSET at their recorded due
// time, those found in no index. It returns the next cursor ("0" when the
// scan wrapped around) and the ids it repaired. Only the partition's owner
// runs it, between its own claims, so an id it finds in no index is not
// one of its claims in progress; ids for which skip reports true (the
// owner's deliveries, whose in-flight entry a previous owner's late
// write may have removed) are left alone. skip may be nil. It also counts
// the segments a crashed write left uncounted, and removes the Dones
// whose window ended by nowMS (compared with their bytes as scanned: one
// a send replaced meanwhile stays); a Done within its window is left
// alone, in no index.
func (s *Store) Reconcile(ctx context.Context, tp TopicPartition, cursor string, count int, skip func(id string) bool, nowMS int64) (string, []string, error) {
	r, err := s.do(ctx, cmd{"HSCAN", []any{keys.Records(s.ns, tp.Topic, tp.P), cursor, "COUNT", count}})
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", tp.P, err)
	}
	next, kv, err := scanPage(r[0])
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", tp.P, err)
	}
	b := sortBatch(kv, skip, nowMS)
	if len(b.ids) == 0 && len(b.segs) == 0 && len(b.pending) == 0 && len(b.ended) == 0 {
		return next, nil, nil
	}
	checks, segAt := s.reconcileChecks(tp, b)
	r, err = s.do(ctx, checks...)
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", tp.P, err)
	}
	zadd := []any{keys.Scheduled(s.ns, tp.Topic, tp.P), "NX"}
	var repaired []string
	if len(b.ids) > 0 {
		if zadd, repaired, err = b.lostRecords(r[:3], zadd, repaired); err != nil {
			return cursor, nil, fmt.Errorf("reconcile partition %d: %w", tp.P, err)
		}
	}
	if len(b.segs) > 0 {
		if zadd, repaired, err = b.lostSegments(r[segAt], zadd, repaired); err != nil {
			return cursor, nil, fmt.Errorf("reconcile partition %d: %w", tp.P, err)
		}
	}
	if len(zadd) > 2 {
		if _, err := s.do(ctx, cmd{"ZADD", zadd}); err != nil {
			return cursor, nil, fmt.Errorf("reconcile partition %d: %w", tp.P, err)
		}
	}
	return next, repaired, nil
}

// reconcileBatch is what a reconciler's HSCAN batch holds: records (their
// ids and bytes), segments (their fields and bytes) and segments' pending
// fields.
type reconcileBatch struct {
	ids     []string
	recs    [][]byte
	segs    []string
	segVals [][]byte
	pending []string
	ended   []any // Dones whose window ended: id1, bytes1, ...
}

// sortBatch sorts the fields and values kv of an HSCAN batch of the
// records HASH by kind, leaving out the records of ids for which skip
// (which may be nil) reports true, the Dones still in their window at
// nowMS, and every other field.
func sortBatch(kv [][]byte, skip func(id string) bool, nowMS int64) reconcileBatch {
	var b reconcileBatch
	for i := 0; i+1 < len(kv); i += 2 {
		switch f := string(kv[i]); {
		case keys.IsIDField(f) && isDone(kv[i+1]):
			if d, _ := DecodeDone(kv[i+1]); d.Until <= nowMS {
				b.ended = append(b.ended, f, kv[i+1])
			}
		case keys.IsIDField(f):
			if skip != nil && skip(f) {
				continue
			}
			b.ids = append(b.ids, f)
			b.recs = append(b.recs, kv[i+1])
		case keys.IsSegmentField(f):
			b.segs = append(b.segs, f)
			b.segVals = append(b.segVals, kv[i+1])
		case keys.IsSegmentPendingField(f):
			b.pending = append(b.pending, f)
		}
	}
	return b
}

// reconcileChecks returns the pipeline of a reconciler's batch b: which
// of its ids are in each index of partition tp (memberScript on the
// scheduled, in-flight and dead ZSETs), which of its segments are in the
// scheduled ZSET (their only index; the ids a segment holds are checked
// with the others, since moving out of it gives them a record of their
// own), from reply segAt on, the counting of the segments a crashed
// write left uncounted (segHealScript), and the removal of the Dones
// whose window ended (casDeleteScript).
func (s *Store) reconcileChecks(tp TopicPartition, b reconcileBatch) (checks []cmd, segAt int) {
	sk := keys.Scheduled(s.ns, tp.Topic, tp.P)
	run := func(sc *redis.Script, k string, names []string) {
		checks = append(checks, cmd{"EVALSHA", append(scriptCall(sc, k, len(names)), strs(names)...)})
	}
	if len(b.ids) > 0 {
		for _, k := range []string{sk, keys.InFlight(s.ns, tp.Topic, tp.P), keys.Dead(s.ns, tp.Topic, tp.P)} {
			run(memberScript, k, b.ids)
		}
	}
	segAt = len(checks)
	if len(b.segs) > 0 {
		run(memberScript, sk, b.segs)
	}
	if len(b.pending) > 0 {
		run(segHealScript, keys.Records(s.ns, tp.Topic, tp.P), b.pending)
	}
	if len(b.ended) > 0 {
		checks = append(checks, cmd{"EVALSHA", append(scriptCall(casDeleteScript, keys.Records(s.ns, tp.Topic, tp.P), len(b.ended)), b.ended...)})
	}
	return checks, segAt
}

// lostRecords adds to zadd, the arguments of the ZADD that re-indexes
// them, the records of b in no index, from the replies r of their checks
// in the scheduled, in-flight and dead ZSETs, each due at its record's
// due (at once when the record cannot be decoded: the claim that meets
// it moves it to the dead set); and their ids to repaired.
func (b reconcileBatch) lostRecords(r []any, zadd []any, repaired []string) ([]any, []string, error) {
	var in [3][]int
	for j := range in {
		var err error
		if in[j], err = intsOf(r[j], len(b.ids)); err != nil {
			return nil, nil, err
		}
	}
	for i, id := range b.ids {
		if in[0][i] == 1 || in[1][i] == 1 || in[2][i] == 1 {
			continue
		}
		due := int64(0)
		if rec, err := DecodeRecord(b.recs[i]); err == nil {
			due = rec.Due
		}
		zadd = append(zadd, due, id)
		repaired = append(repaired, id)
	}
	return zadd, repaired, nil
}

// lostSegments adds to zadd the segments of b in no index, from the reply
// r of their check in the scheduled ZSET, each due at its earliest
// message's due (an emptied one, its messages deleted or moved out, at
// once: the claim that meets it removes it); and the ids they hold to
// repaired. A segment that cannot be decoded is left alone.
func (b reconcileBatch) lostSegments(r any, zadd []any, repaired []string) ([]any, []string, error) {
	in, err := intsOf(r, len(b.segs))
	if err != nil {
		return nil, nil, err
	}
	for i, f := range b.segs {
		if in[i] == 1 {
			continue
		}
		entries, err := decodeSegment(b.segVals[i])
		if err != nil {
			continue
		}
		due := int64(0)
		for j, e := range entries {
			if j == 0 || e.due < due {
				due = e.due
			}
			repaired = append(repaired, f[1:]+e.suffix)
		}
		zadd = append(zadd, due, f)
	}
	return zadd, repaired, nil
}
