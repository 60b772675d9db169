package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

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
	next, kv, err := scanPage(r[0])
	if err != nil {
		return cursor, nil, fmt.Errorf("reconcile partition %d: %w", p, err)
	}
	var ids, segs, pending []string
	var recs, segVals [][]byte
	for i := 0; i+1 < len(kv); i += 2 {
		switch f := string(kv[i]); {
		case keys.IsIDField(f):
			if skip != nil && skip(f) {
				continue
			}
			ids = append(ids, f)
			recs = append(recs, kv[i+1])
		case keys.IsSegmentField(f):
			segs = append(segs, f)
			segVals = append(segVals, kv[i+1])
		case keys.IsSegmentPendingField(f):
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
	r, err = s.do(ctx, checks...)
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
