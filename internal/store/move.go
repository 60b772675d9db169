package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
)

// MovePass is what one MoveScan did.
type MovePass struct {
	Next  string // the cursor to go on from; "0" when the sweep of the records ended
	Moved int    // messages moved to their partition in the new count
	// Left counts what this pass found to move later: messages of other
	// partitions in flight, due soon or in no index, and segments it
	// turned into records. A sweep with none left anywhere is complete.
	Left int
	// Conflicts are ids whose partition in the new count holds another
	// record of the same id; they stay where they are.
	Conflicts []string
}

// moving is one message a pass moves.
type moving struct {
	id    string
	rec   []byte // the record's bytes, as read
	score int64  // its due (scheduled) or when it died (dead)
	dead  bool
	to    int // its partition in the new count
	// finish: the message has no index entry in its old partition and
	// one in its new (a move cut short after its third step): only its
	// old record is left to remove.
	finish bool
}

// MoveSweep is a sweep of a source partition's records in a change of
// the partition count, as MoveScan runs it, a pass at a time.
type MoveSweep struct {
	Layout Layout // the change (see Layout.Next)
	Token  int64  // the owner's fencing token
	Cursor string // the HSCAN cursor to go on from ("0" begins a sweep)
	Count  int    // about how many fields of the records a pass scans
	// HorizonMS (unix ms): messages due before it, scheduled or in no
	// index, stay.
	HorizonMS int64
	// Skip reports the ids to leave (the owner's own deliveries). It may
	// be nil.
	Skip func(id string) bool
}

// MoveScan runs one pass of sw, a sweep of source partition tp in the
// change sw.Layout runs, as its owner under sw.Token: it scans about
// sw.Count fields of the records from sw.Cursor (HSCAN) and moves each
// message that belongs to another partition in sw.Layout.Next there, if
// it is scheduled due at or after sw.HorizonMS, dead, or in no index and
// due then, in four steps, destination first (see docs/architecture.md,
// Changing the partition count). A record rewritten or deleted meanwhile
// (a reschedule, a delete) keeps its old place and its copy is removed.
// When the change is no longer sw.Layout's (cancelled or ended), as read
// again before the old index entries go, the copies are removed and the
// pass fails with ErrChangeReplaced. Messages in flight, due before
// sw.HorizonMS or in no index and due sooner stay, counted as Left: their
// deliveries end here. Segments are turned into records first. Ids for
// which sw.Skip reports true are left too.
//
// A process killed between two steps leaves the message in both places
// or in its old one: the next pass moves it again, each step being
// idempotent. It returns a *FencedError if another owner took the old
// partition.
func (s *Store) MoveScan(ctx context.Context, tp TopicPartition, sw MoveSweep) (MovePass, error) {
	l, horizonMS := sw.Layout, sw.HorizonMS
	pass := MovePass{Next: sw.Cursor}
	r, err := s.do(ctx, cmd{"HSCAN", []any{keys.Records(s.ns, tp.Topic, tp.P), sw.Cursor, "COUNT", sw.Count}})
	if err != nil {
		return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
	}
	next, kv, err := scanPage(r[0])
	if err != nil {
		return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
	}
	b := sortMoveBatch(kv, tp.P, l, sw.Skip)
	pass.Left += b.skipped
	if len(b.marks) > 0 {
		n, err := s.moveMarks(ctx, tp, b.marks)
		if err != nil {
			return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
		}
		pass.Left += n
	}
	if len(b.dones) > 0 {
		n, err := s.moveDones(ctx, tp, b.dones)
		if err != nil {
			return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
		}
		pass.Left += n
	}
	if len(b.segs) > 0 {
		n, err := s.explodeAll(ctx, tp, b.segs)
		if err != nil {
			return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
		}
		pass.Left += n
	}
	if len(b.ids) == 0 {
		pass.Next = next
		return pass, nil
	}
	ms, unindexed, left, err := s.whereMoving(ctx, tp, l, b, horizonMS)
	if err != nil {
		return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
	}
	pass.Left += left
	if len(unindexed) > 0 {
		more, left, err := s.sortUnindexed(ctx, tp, unindexed, horizonMS)
		if err != nil {
			return pass, fmt.Errorf("move from partition %d: %w", tp.P, err)
		}
		ms, pass.Left = append(ms, more...), pass.Left+left
	}
	moved, left, conflicts, err := s.move(ctx, tp, sw.Token, l, ms)
	pass.Moved, pass.Left, pass.Conflicts = moved, pass.Left+left, conflicts
	if err != nil {
		return pass, err
	}
	pass.Next = next
	return pass, nil
}

// moveBatch is what a move pass's HSCAN batch of source partition p holds
// to move: the records of other partitions in the new count (their ids
// and bytes), the segments, to turn into records first, and the
// schedules' marks of other partitions; and how many records it skipped
// (the owner's own deliveries).
type moveBatch struct {
	ids     []string
	recs    [][]byte
	segs    []string
	marks   []markMove
	dones   []markMove // Dones of other partitions (see moveDones)
	skipped int
}

// sortMoveBatch sorts the fields and values kv of an HSCAN batch of source
// partition p by what a move pass does with them, in the change l runs
// (see moveBatch); skip, which may be nil, reports the ids to leave.
func sortMoveBatch(kv [][]byte, p int, l Layout, skip func(id string) bool) moveBatch {
	var b moveBatch
	for i := 0; i+1 < len(kv); i += 2 {
		switch f := string(kv[i]); {
		case strings.HasPrefix(f, keys.ScheduleMark):
			if to := partition.For(keys.ScheduleIDPrefix+f[len(keys.ScheduleMark):], l.Next); to != p {
				b.marks = append(b.marks, markMove{field: f, mark: kv[i+1], to: to})
			}
		case keys.IsIDField(f) && isDone(kv[i+1]):
			if to := partition.For(f, l.Next); to != p {
				b.dones = append(b.dones, markMove{field: f, mark: kv[i+1], to: to})
			}
		case keys.IsIDField(f):
			if partition.For(f, l.Next) == p {
				continue // stays
			}
			if skip != nil && skip(f) {
				b.skipped++
				continue
			}
			b.ids = append(b.ids, f)
			b.recs = append(b.recs, kv[i+1])
		case keys.IsSegmentField(f):
			b.segs = append(b.segs, f)
		}
	}
	return b
}

// whereMoving reads where each record of b is in partition tp (scheduled,
// in flight or dead: one scoresScript an index, in one pipeline) and
// returns the moves to make now: those dead, and those scheduled due at
// or after horizonMS (at the later of their entry's and their record's
// due: an entry earlier than its record is a stale one). It returns
// apart those in no index (cut short after unindexing, or by a crash
// elsewhere: see sortUnindexed), and counts as left those in flight or
// due sooner.
func (s *Store) whereMoving(ctx context.Context, tp TopicPartition, l Layout, b moveBatch, horizonMS int64) (ms, unindexed []moving, left int, err error) {
	sk, ik, dk := keys.Scheduled(s.ns, tp.Topic, tp.P), keys.InFlight(s.ns, tp.Topic, tp.P), keys.Dead(s.ns, tp.Topic, tp.P)
	ids := strs(b.ids)
	r, err := s.do(ctx, scoresCmd(sk, ids), scoresCmd(ik, ids), scoresCmd(dk, ids))
	if err != nil {
		return nil, nil, 0, err
	}
	var scores [3][]int64
	var in [3][]bool
	for k := range r {
		if scores[k], in[k], err = scoresOf(r[k], len(ids)); err != nil {
			return nil, nil, 0, err
		}
	}
	for i, id := range b.ids {
		sc, inS := scores[0][i], in[0][i]
		inI := in[1][i]
		died, inD := scores[2][i], in[2][i]
		due := int64(-1)
		if rec, err := DecodeRecord(b.recs[i]); err == nil {
			due = rec.Due
		}
		m := moving{id: id, rec: b.recs[i], to: partition.For(id, l.Next)}
		switch {
		case inI:
			left++
			continue
		case inS:
			m.score = max(sc, due) // a stale entry: the record's due is the message's
		case inD:
			m.score, m.dead = died, true
		default:
			m.score = due
			unindexed = append(unindexed, m)
			continue
		}
		if !m.dead && m.score < horizonMS {
			left++
			continue
		}
		ms = append(ms, m)
	}
	return ms, unindexed, left, nil
}

// markMove is a schedule's mark a pass moves: its field and value in
// the source partition, and the schedule's partition in the new count.
type markMove struct {
	field string
	mark  []byte
	to    int
}

// moveMarks moves schedules' marks out of source partition tp into their
// partitions in the new count: each is merged there (mergeMarkScript:
// the newer stays), then removed from tp if it is still the one read
// (casDeleteScript). It returns how many changed meanwhile and stay for
// a later pass. A chain step during the change reads the mark in the old
// place too (see ChainSchedule), so an occurrence written before the
// change is not written again after it.
func (s *Store) moveMarks(ctx context.Context, tp TopicPartition, marks []markMove) (left int, err error) {
	var merges []cmd
	del := []any{}
	for _, m := range marks {
		merges = append(merges, cmd{"EVALSHA", append(scriptCall(mergeMarkScript, keys.Records(s.ns, tp.Topic, m.to), 2), m.field, m.mark)})
		del = append(del, m.field, m.mark)
	}
	if _, err := s.do(ctx, merges...); err != nil {
		return 0, fmt.Errorf("move %d schedule marks: %w", len(marks), err)
	}
	r, err := s.script(ctx, casDeleteScript, append([]any{keys.Records(s.ns, tp.Topic, tp.P)}, del...)...)
	if err != nil {
		return 0, fmt.Errorf("move %d schedule marks: %w", len(marks), err)
	}
	done, _ := redis.Ints(r, nil)
	for _, d := range done {
		if d == 0 {
			left++
		}
	}
	return left, nil
}

// moveDones moves Dones (see Ack) out of source partition tp into their
// partitions in the new count: each is written there unless its id has a
// field there already (a message sent since, or the same Done: either
// way the destination's stands; moveInScript), then removed from tp if
// it is still the one read (casDeleteScript). It returns how many it
// left, changed meanwhile: the next pass moves them.
func (s *Store) moveDones(ctx context.Context, tp TopicPartition, dones []markMove) (left int, err error) {
	var writes []cmd
	del := []any{}
	for _, d := range dones {
		writes = append(writes, cmd{"EVALSHA", append(scriptCall(moveInScript, keys.Records(s.ns, tp.Topic, d.to), 2), d.field, d.mark)})
		del = append(del, d.field, d.mark)
	}
	if _, err := s.do(ctx, writes...); err != nil {
		return 0, fmt.Errorf("move %d finished ids: %w", len(dones), err)
	}
	r, err := s.script(ctx, casDeleteScript, append([]any{keys.Records(s.ns, tp.Topic, tp.P)}, del...)...)
	if err != nil {
		return 0, fmt.Errorf("move %d finished ids: %w", len(dones), err)
	}
	gone, _ := redis.Ints(r, nil)
	for _, g := range gone {
		if g == 0 {
			left++
		}
	}
	return left, nil
}

// sortUnindexed decides what to do with messages of other partitions
// found in no index of partition tp: a message indexed in its new
// partition is a move cut short between its last two steps, to finish;
// another is moved as scheduled at its record's due if that is at or
// after horizonMS, or else indexed here again, to be delivered here (what
// the reconciler would do; it leaves such records to the moves). It
// returns the moves and how many it left.
func (s *Store) sortUnindexed(ctx context.Context, tp TopicPartition, ms []moving, horizonMS int64) ([]moving, int, error) {
	dst := partitionsOf(ms)
	var reads []cmd
	for _, q := range dst.order {
		var ids []any
		for _, i := range dst.byTo[q] {
			ids = append(ids, ms[i].id)
		}
		reads = append(reads, scoresCmd(keys.Scheduled(s.ns, tp.Topic, q), ids), scoresCmd(keys.Dead(s.ns, tp.Topic, q), ids))
	}
	r, err := s.do(ctx, reads...)
	if err != nil {
		return nil, 0, err
	}
	inS, inD := make([]bool, len(ms)), make([]bool, len(ms))
	for j, q := range dst.order {
		_, sched, err := scoresOf(r[2*j], len(dst.byTo[q]))
		if err != nil {
			return nil, 0, err
		}
		_, dead, err := scoresOf(r[2*j+1], len(dst.byTo[q]))
		if err != nil {
			return nil, 0, err
		}
		for k, i := range dst.byTo[q] {
			inS[i], inD[i] = sched[k], dead[k]
		}
	}
	var out []moving
	zadd := []any{keys.Scheduled(s.ns, tp.Topic, tp.P), "NX"}
	for i, m := range ms {
		switch {
		case inS[i] || inD[i]:
			m.finish, m.dead = true, inD[i]
			out = append(out, m)
		case m.score >= horizonMS:
			out = append(out, m)
		default:
			zadd = append(zadd, max(m.score, 0), m.id)
		}
	}
	if len(zadd) > 2 {
		if _, err := s.do(ctx, cmd{"ZADD", zadd}); err != nil {
			return nil, 0, err
		}
	}
	return out, (len(zadd) - 2) / 2, nil
}

// move carries out the moves of MoveScan, in its four steps, on one
// connection: the records into their new partitions (moveIn), their index
// entries there (indexMoved), then, once the change is known to be still
// l's (sameChange; else the copies are undone: unmoveWritten), the old
// index entries (unindexSources, fenced) and last the old records
// (removeSources); the copies of those whose source changed meanwhile are
// undone (unmoveAll). It returns how many messages moved, how many stay
// for a later pass and the ids in conflict.
func (s *Store) move(ctx context.Context, tp TopicPartition, token int64, l Layout, ms []moving) (moved, left int, conflicts []string, err error) {
	if len(ms) == 0 {
		return 0, 0, nil, nil
	}
	c, err := s.conn(ctx)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("move from partition %d: %w", tp.P, err)
	}
	defer c.Close()
	fail := func(step string, err error) (int, int, []string, error) {
		return moved, left, conflicts, fmt.Errorf("move from partition %d: %s: %w", tp.P, step, err)
	}
	dst := partitionsOf(ms)
	// 1. The records, into their new partitions.
	written, conflicts, err := s.moveIn(ctx, c, tp.Topic, ms, dst)
	left = len(conflicts)
	if err != nil {
		return fail("write records", err)
	}
	// 2. Their index entries there.
	if err := s.indexMoved(ctx, c, tp.Topic, ms, dst, written); err != nil {
		return fail("index", err)
	}
	// The change must still be l's: once cancelled, the reverse moves out
	// of the new partitions (they begin a settle time later, see
	// docs/architecture.md) and must not meet this pass's removals.
	if err := s.sameChange(ctx, c, tp.Topic, l); err != nil {
		if undoErr := s.unmoveWritten(ctx, c, tp.Topic, ms, written); undoErr != nil {
			return fail("undo", undoErr)
		}
		return moved, len(ms), conflicts, err
	}
	var done []int // the moves written
	for i := range ms {
		if written[i] {
			done = append(done, i)
		}
	}
	// 3. The old index entries (the scheduled ones only by the owner).
	if err := s.unindexSources(ctx, c, tp, token, ms, done); err != nil {
		if fe, ok := fencedErr(err, token); ok {
			return moved, left, conflicts, fe
		}
		return fail("unindex", err)
	}
	if len(done) == 0 {
		return moved, left, conflicts, nil
	}
	// 4. The old records, unless rewritten or deleted meanwhile.
	gone, err := s.removeSources(ctx, c, tp, ms, done)
	if err != nil {
		return fail("remove records", err)
	}
	// A source changed meanwhile keeps its place: remove its copy.
	var changed []moving
	for k, i := range done {
		if gone[k] == 1 {
			moved++
			continue
		}
		left++
		changed = append(changed, ms[i])
	}
	if err := s.unmoveAll(ctx, c, tp.Topic, changed); err != nil {
		return fail("undo", err)
	}
	return moved, left, conflicts, nil
}

// destinations are moves grouped by their new partition (partitionsOf).
type destinations struct {
	order []int         // the new partitions, in the order of their first move
	byTo  map[int][]int // the indexes of each one's moves
}

// partitionsOf groups the moves ms by their new partition.
func partitionsOf(ms []moving) destinations {
	dst := destinations{byTo: map[int][]int{}}
	for i, m := range ms {
		if dst.byTo[m.to] == nil {
			dst.order = append(dst.order, m.to)
		}
		dst.byTo[m.to] = append(dst.byTo[m.to], i)
	}
	return dst
}

// moveIn writes the records of ms (grouped in dst) into their new
// partitions, one moveInScript a partition (step 1 of a move), and
// reports which it wrote; the ids of the others are conflicts: their new
// partition holds another record of the id. On an error, conflicts are
// those read before it.
func (s *Store) moveIn(ctx context.Context, c redis.Conn, topic string, ms []moving, dst destinations) (written []bool, conflicts []string, err error) {
	var ins []cmd
	for _, q := range dst.order {
		args := scriptCall(moveInScript, keys.Records(s.ns, topic, q), 2*len(dst.byTo[q]))
		for _, i := range dst.byTo[q] {
			args = append(args, ms[i].id, ms[i].rec)
		}
		ins = append(ins, cmd{"EVALSHA", args})
	}
	r, err := roundTrip(ctx, c, ins)
	if err != nil {
		return nil, nil, err
	}
	written = make([]bool, len(ms))
	for j, q := range dst.order {
		ok, err := intsOf(r[j], len(dst.byTo[q]))
		if err != nil {
			return written, conflicts, err
		}
		for k, i := range dst.byTo[q] {
			if ok[k] == 1 {
				written[i] = true
			} else {
				conflicts = append(conflicts, ms[i].id)
			}
		}
	}
	return written, conflicts, nil
}

// indexMoved adds the index entries of the records moveIn wrote (written,
// of ms grouped in dst) to their new partitions (step 2 of a move): a
// ZADD to the scheduled ZSET and one to the dead ZSET of each partition,
// where it has such moves. A move being finished has its entry there
// already.
func (s *Store) indexMoved(ctx context.Context, c redis.Conn, topic string, ms []moving, dst destinations, written []bool) error {
	var zadds []cmd
	for _, q := range dst.order {
		sched, dead := []any{keys.Scheduled(s.ns, topic, q)}, []any{keys.Dead(s.ns, topic, q)}
		for _, i := range dst.byTo[q] {
			if !written[i] || ms[i].finish {
				continue
			}
			if ms[i].dead {
				dead = append(dead, ms[i].score, ms[i].id)
			} else {
				sched = append(sched, ms[i].score, ms[i].id)
			}
		}
		for _, z := range [][]any{sched, dead} {
			if len(z) > 1 {
				zadds = append(zadds, cmd{"ZADD", z})
			}
		}
	}
	if len(zadds) == 0 {
		return nil
	}
	_, err := roundTrip(ctx, c, zadds)
	return err
}

// unindexSources removes the index entries of the moves done from source
// partition tp (step 3 of a move): the scheduled ones with moveOutScript,
// only while the fence holds token (a *FencedError's "FENCED" error
// otherwise), the dead ones with ZREM. A move being finished has none
// left there.
func (s *Store) unindexSources(ctx context.Context, c redis.Conn, tp TopicPartition, token int64, ms []moving, done []int) error {
	outS := scriptCall(moveOutScript, keys.Scheduled(s.ns, tp.Topic, tp.P), 2+len(ms))
	outS = append(outS, keys.Fence, token)
	outD := []any{keys.Dead(s.ns, tp.Topic, tp.P)}
	for _, i := range done {
		switch m := ms[i]; {
		case m.finish:
		case m.dead:
			outD = append(outD, m.id)
		default:
			outS = append(outS, m.id)
		}
	}
	var outs []cmd
	if len(outS) > 5 {
		outs = append(outs, cmd{"EVALSHA", outS})
	}
	if len(outD) > 1 {
		outs = append(outs, cmd{"ZREM", outD})
	}
	if len(outs) == 0 {
		return nil
	}
	_, err := roundTrip(ctx, c, outs)
	return err
}

// removeSources removes the records of the moves done from source
// partition tp (step 4 of a move), each only while it still holds the
// bytes read (casDeleteScript): a record rewritten or deleted meanwhile
// stays. It returns, per move done, 1 removed or 0 left.
func (s *Store) removeSources(ctx context.Context, c redis.Conn, tp TopicPartition, ms []moving, done []int) ([]int, error) {
	casOld := scriptCall(casDeleteScript, keys.Records(s.ns, tp.Topic, tp.P), 2*len(ms))
	for _, i := range done {
		casOld = append(casOld, ms[i].id, ms[i].rec)
	}
	r, err := roundTrip(ctx, c, []cmd{{"EVALSHA", casOld}})
	if err != nil {
		return nil, err
	}
	return intsOf(r[0], len(done))
}

// sameChange reads topic's layout on c and fails with ErrChangeReplaced
// when its change is no longer l's.
func (s *Store) sameChange(ctx context.Context, c redis.Conn, topic string, l Layout) error {
	r, err := roundTrip(ctx, c, []cmd{layoutReads(keys.Meta(s.ns, topic))})
	if err != nil {
		return fmt.Errorf("read the layout: %w", err)
	}
	now, err := layoutOf(r[0])
	if err != nil {
		return err
	}
	if now.Next != l.Next || now.Since != l.Since || now.Count != l.Count {
		return fmt.Errorf("%w: moving from %d to %d partitions (since %d), the topic is now at %d changing to %d",
			ErrChangeReplaced, l.Count, l.Next, l.Since, now.Count, now.Next)
	}
	return nil
}

// unmoveWritten removes the copies steps 1 and 2 of move wrote (those
// written, except moves being finished: their copy is the message's
// only index entry), partition by partition.
func (s *Store) unmoveWritten(ctx context.Context, c redis.Conn, topic string, ms []moving, written []bool) error {
	var copies []moving
	for i, m := range ms {
		if written[i] && !m.finish {
			copies = append(copies, m)
		}
	}
	return s.unmoveAll(ctx, c, topic, copies)
}

// unmoveAll removes the copies of ms from their new partitions, one
// partition after the other (see unmove).
func (s *Store) unmoveAll(ctx context.Context, c redis.Conn, topic string, ms []moving) error {
	dst := partitionsOf(ms)
	for _, q := range dst.order {
		casArgs := scriptCall(casDeleteScript, keys.Records(s.ns, topic, q), 0)
		for _, i := range dst.byTo[q] {
			casArgs = append(casArgs, ms[i].id, ms[i].rec)
		}
		if err := s.unmove(ctx, c, topic, q, casArgs); err != nil {
			return err
		}
	}
	return nil
}

// unmove removes the copies of moves whose source changed meanwhile from
// partition q: the records that still hold the bytes written (casArgs,
// the arguments of a casDeleteScript call), then their index entries.
func (s *Store) unmove(ctx context.Context, c redis.Conn, topic string, q int, casArgs []any) error {
	r, err := roundTrip(ctx, c, []cmd{{"EVALSHA", casArgs}})
	if err != nil {
		return err
	}
	pairs := casArgs[3:]
	gone, err := intsOf(r[0], len(pairs)/2)
	if err != nil {
		return err
	}
	var ids []any
	for k := range gone {
		if gone[k] == 1 {
			ids = append(ids, pairs[2*k])
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err = s.do(ctx,
		cmd{"ZREM", append([]any{keys.Scheduled(s.ns, topic, q)}, ids...)},
		cmd{"ZREM", append([]any{keys.Dead(s.ns, topic, q)}, ids...)})
	return err
}

// explodeAll turns segments of partition tp into records of their own,
// each indexed in the scheduled ZSET at its due, and removes the
// segments' index entries. It returns how many records it wrote. A crash
// midway leaves records in no index, which the reconciler or the next
// move pass finds.
func (s *Store) explodeAll(ctx context.Context, tp TopicPartition, segs []string) (int, error) {
	sk := keys.Scheduled(s.ns, tp.Topic, tp.P)
	c, err := s.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	vals, err := explodeSegments(ctx, c, keys.Records(s.ns, tp.Topic, tp.P), segs)
	if err != nil {
		return 0, fmt.Errorf("explode segments: %w", err)
	}
	zadd := []any{sk, "NX"}
	for i := 0; i+1 < len(vals); i += 2 {
		zadd = append(zadd, vals[i+1], vals[i])
	}
	n := (len(zadd) - 2) / 2
	cmds := []cmd{{"ZREM", append([]any{sk}, strs(segs)...)}}
	if n > 0 {
		cmds = append([]cmd{{"ZADD", zadd}}, cmds...)
	}
	if _, err := roundTrip(ctx, c, cmds); err != nil {
		return 0, fmt.Errorf("explode segments: %w", err)
	}
	return n, nil
}
