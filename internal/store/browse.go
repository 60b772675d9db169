package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// The reads of this file serve the web dashboard (internal/ui). Each is a
// bounded number of pipelined one-key commands of the portable set: no
// scan of a whole ZSET or HASH, so that reading a topic of millions of
// messages does not block Redis.

// TopicHead is what the overview shows of a topic besides its partitions.
type TopicHead struct {
	Name       string
	Partitions int // the partitions that may hold messages (both counts' during a change); 0 if the topic has no metadata
	Layout     Layout
	Live       int64 // consumers whose heartbeat has not expired
	Leaving    int64 // consumers handing their partitions over, not expired yet
}

// TopicsRange returns up to limit topic names, oldest first, and how many
// topics there are in all.
func (s *Store) TopicsRange(ctx context.Context, limit int) ([]string, int64, error) {
	k := keys.Topics(s.ns)
	r, err := s.do(ctx, cmd{"ZRANGE", []any{k, 0, limit - 1}}, cmd{"ZCARD", []any{k}})
	if err != nil {
		return nil, 0, fmt.Errorf("topics: %w", err)
	}
	names, _ := redis.Strings(r[0], nil)
	total, _ := redis.Int64(r[1], nil)
	return names, total, nil
}

// TopicHeads reads the partition count and the live and leaving consumers
// of each topic at nowMS, in one pipelined round trip.
func (s *Store) TopicHeads(ctx context.Context, topics []string, nowMS int64) ([]TopicHead, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	const per = 3
	cmds := make([]cmd, 0, per*len(topics))
	for _, t := range topics {
		mk := keys.Members(s.ns, t)
		cmds = append(cmds,
			layoutReads(keys.Meta(s.ns, t)),
			cmd{"ZCOUNT", []any{mk, nowMS, "+inf"}},
			// A leaving member is scored minus its expiry.
			cmd{"ZCOUNT", []any{mk, "-inf", "(" + itoa(-nowMS)}},
		)
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return nil, fmt.Errorf("topic heads: %w", err)
	}
	out := make([]TopicHead, len(topics))
	for i, t := range topics {
		h := &out[i]
		h.Name = t
		if l, err := layoutOf(r[per*i]); err == nil {
			h.Layout, h.Partitions = l, l.Span()
		}
		h.Live, _ = redis.Int64(r[per*i+1], nil)
		h.Leaving, _ = redis.Int64(r[per*i+2], nil)
	}
	return out, nil
}

// Member is one consumer of a topic's members ZSET.
type Member struct {
	ID      string
	Expires int64 // unix ms its heartbeat expires at
	Leaving bool  // it is handing its partitions over
}

// Members returns up to limit members of topic, expired ones included.
func (s *Store) Members(ctx context.Context, topic string, limit int) ([]Member, error) {
	r, err := s.do(ctx, cmd{"ZRANGE", []any{keys.Members(s.ns, topic), 0, limit - 1, "WITHSCORES"}})
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", topic, err)
	}
	vals, _ := redis.Strings(r[0], nil)
	var out []Member
	for i := 0; i+1 < len(vals); i += 2 {
		f, _ := strconv.ParseFloat(vals[i+1], 64)
		m := Member{ID: vals[i], Expires: int64(f)}
		if m.Expires < 0 {
			m.Expires, m.Leaving = -m.Expires, true
		}
		out = append(out, m)
	}
	return out, nil
}

// LeaseTTLs returns the remaining time to live, in ms, of the lease of
// each partition 0..n-1 of topic: -2 when no one holds it.
func (s *Store) LeaseTTLs(ctx context.Context, topic string, n int) ([]int64, error) {
	cmds := make([]cmd, n)
	for p := range n {
		cmds[p] = cmd{"PTTL", []any{keys.Lease(s.ns, topic, p)}}
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return nil, fmt.Errorf("leases of %s: %w", topic, err)
	}
	out := make([]int64, n)
	for p := range n {
		out[p], _ = redis.Int64(r[p], nil)
	}
	return out, nil
}

// DueCounts counts the scheduled index entries of partitions 0..n-1 of
// topic due before fromMS (overdue) and in each of buckets intervals of
// stepMS from fromMS: buckets ZCOUNTs and one more per partition, all in
// one pipeline. A segment counts once, at its earliest due time.
func (s *Store) DueCounts(ctx context.Context, topic string, n int, fromMS, stepMS int64, buckets int) (overdue int64, counts []int64, err error) {
	per := buckets + 1
	cmds := make([]cmd, 0, per*n)
	for p := range n {
		sk := keys.Scheduled(s.ns, topic, p)
		cmds = append(cmds, cmd{"ZCOUNT", []any{sk, 0, "(" + itoa(fromMS)}})
		for b := range int64(buckets) {
			lo := fromMS + b*stepMS
			cmds = append(cmds, cmd{"ZCOUNT", []any{sk, lo, "(" + itoa(lo+stepMS)}})
		}
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return 0, nil, fmt.Errorf("due counts of %s: %w", topic, err)
	}
	counts = make([]int64, buckets)
	for p := range n {
		v, _ := redis.Int64(r[per*p], nil)
		overdue += v
		for b := range buckets {
			v, _ := redis.Int64(r[per*p+1+b], nil)
			counts[b] += v
		}
	}
	return overdue, counts, nil
}

// ScheduledCursor is a position in the due order of a topic's scheduled
// messages: after every entry due before Due, and after the first Skip[p]
// entries of partition p due exactly at Due (those a previous page
// showed). The zero value is the start.
type ScheduledCursor struct {
	Due  int64
	Skip map[int]int
}

// ScheduledEntry is one scheduled message.
type ScheduledEntry struct {
	ID      string
	P       int
	Due     int64   // unix ms
	Record  *Record // nil when the index entry has no record (a tombstone)
	Segment bool    // held in a segment (see keys.SegmentField)
}

// indexEntry is a member of a scheduled ZSET with its score.
type indexEntry struct {
	member string
	p      int
	score  int64
}

// ScheduledPage returns the next scheduled messages of partitions 0..n-1
// of topic after cursor, in due order (partition and id order among equal
// due times), and the cursor after them. It reads at most limit index
// entries per partition (ZRANGEBYSCORE ... LIMIT), merges them and keeps
// the first limit, then reads their records (one HMGET per partition): two
// pipelined round trips. A segment is one index entry, at its earliest due
// time, and is listed as all the messages it holds. more says a next page
// may have entries.
func (s *Store) ScheduledPage(ctx context.Context, topic string, n int, after ScheduledCursor, limit int) (page []ScheduledEntry, next ScheduledCursor, more bool, err error) {
	cmds := make([]cmd, n)
	for p := range n {
		cmds[p] = cmd{"ZRANGEBYSCORE", []any{keys.Scheduled(s.ns, topic, p), max(after.Due, 0), "+inf",
			"WITHSCORES", "LIMIT", after.Skip[p], limit}}
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return nil, after, false, fmt.Errorf("scheduled of %s: %w", topic, err)
	}
	var all []indexEntry
	for p := range n {
		vals, _ := redis.Strings(r[p], nil)
		if len(vals) == 2*limit {
			more = true
		}
		for i := 0; i+1 < len(vals); i += 2 {
			f, _ := strconv.ParseFloat(vals[i+1], 64)
			all = append(all, indexEntry{member: vals[i], p: p, score: int64(f)})
		}
	}
	slices.SortFunc(all, func(a, b indexEntry) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.p, b.p), cmp.Compare(a.member, b.member))
	})
	if len(all) > limit {
		all, more = all[:limit], true
	}
	next = nextCursor(after, all)
	page, err = s.scheduledRecords(ctx, topic, n, all)
	return page, next, more, err
}

// nextCursor returns the cursor after the entries shown, which follow after.
func nextCursor(after ScheduledCursor, shown []indexEntry) ScheduledCursor {
	if len(shown) == 0 {
		return after
	}
	last := shown[len(shown)-1].score
	next := ScheduledCursor{Due: last, Skip: map[int]int{}}
	if last == after.Due {
		for p, k := range after.Skip {
			next.Skip[p] = k
		}
	}
	for _, e := range shown {
		if e.score == last {
			next.Skip[e.p]++
		}
	}
	return next
}

// scheduledRecords reads the records of index entries, one HMGET per
// partition, and expands segments into their messages.
func (s *Store) scheduledRecords(ctx context.Context, topic string, n int, entries []indexEntry) ([]ScheduledEntry, error) {
	fields := make([][]any, n)
	for _, e := range entries {
		fields[e.p] = append(fields[e.p], e.member)
	}
	var cmds []cmd
	slot := make([]int, n) // partition -> index of its HMGET in cmds, -1 if none
	for p := range n {
		slot[p] = -1
		if len(fields[p]) > 0 {
			slot[p] = len(cmds)
			cmds = append(cmds, cmd{"HMGET", append([]any{keys.Records(s.ns, topic, p)}, fields[p]...)})
		}
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return nil, fmt.Errorf("scheduled records of %s: %w", topic, err)
	}
	vals := make([][][]byte, n)
	for p := range n {
		if slot[p] >= 0 {
			vals[p], _ = redis.ByteSlices(r[slot[p]], nil)
		}
	}
	next := make([]int, n) // partition -> next unread value
	out := make([]ScheduledEntry, 0, len(entries))
	for _, e := range entries {
		var v []byte
		if i := next[e.p]; i < len(vals[e.p]) {
			v = vals[e.p][i]
		}
		next[e.p]++
		if !keys.IsSegmentField(e.member) {
			out = append(out, ScheduledEntry{ID: e.member, P: e.p, Due: e.score, Record: decodeOne(v)})
			continue
		}
		segs, err := decodeSegment(v)
		if err != nil || v == nil { // gone meanwhile (exploded by a claim) or corrupt: skip it
			continue
		}
		prefix := e.member[1:]
		for _, se := range segs {
			out = append(out, ScheduledEntry{ID: prefix + se.suffix, P: e.p, Due: se.due, Record: decodeOne(se.rec), Segment: true})
		}
	}
	return out, nil
}

// DeadItem is a dead message with its partition.
type DeadItem struct {
	DeadEntry
	P int
}

// DeadPage returns up to limit dead messages of partitions 0..n-1 of
// topic, most recent death first, with their records: one bounded
// ZREVRANGEBYSCORE per partition, then one HMGET per partition, two
// pipelined round trips.
func (s *Store) DeadPage(ctx context.Context, topic string, n int, limit int) ([]DeadItem, error) {
	cmds := make([]cmd, n)
	for p := range n {
		cmds[p] = cmd{"ZREVRANGEBYSCORE", []any{keys.Dead(s.ns, topic, p), "+inf", "-inf", "WITHSCORES", "LIMIT", 0, limit}}
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return nil, fmt.Errorf("dead of %s: %w", topic, err)
	}
	var all []DeadItem
	for p := range n {
		vals, _ := redis.Strings(r[p], nil)
		for i := 0; i+1 < len(vals); i += 2 {
			f, _ := strconv.ParseFloat(vals[i+1], 64)
			all = append(all, DeadItem{DeadEntry: DeadEntry{ID: vals[i], DiedAt: int64(f)}, P: p})
		}
	}
	slices.SortFunc(all, func(a, b DeadItem) int {
		return cmp.Or(cmp.Compare(b.DiedAt, a.DiedAt), cmp.Compare(a.P, b.P), cmp.Compare(a.ID, b.ID))
	})
	if len(all) > limit {
		all = all[:limit]
	}
	byP := make([][]any, n)
	for _, d := range all {
		byP[d.P] = append(byP[d.P], d.ID)
	}
	var reads []cmd
	var parts []int
	for p := range n {
		if len(byP[p]) > 0 {
			reads = append(reads, cmd{"HMGET", append([]any{keys.Records(s.ns, topic, p)}, byP[p]...)})
			parts = append(parts, p)
		}
	}
	if len(reads) == 0 {
		return nil, nil
	}
	rr, err := s.do(ctx, reads...)
	if err != nil {
		return nil, fmt.Errorf("dead records of %s: %w", topic, err)
	}
	recs := map[int][][]byte{}
	for i, p := range parts {
		recs[p], _ = redis.ByteSlices(rr[i], nil)
	}
	next := make([]int, n)
	for i := range all {
		p := all[i].P
		if k := next[p]; k < len(recs[p]) {
			all[i].Record = decodeOne(recs[p][k])
		}
		next[p]++
	}
	return all, nil
}
