package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Segments keep queued messages compact. The messages of one write whose
// ids the client generated, due farther ahead than consumers claim (see
// Group.Fresh), share an id prefix: SegmentPrefixLen characters, then
// characters of their own. Two or more of them in one partition are
// stored as one segment: a single field of the records HASH holding all
// their records, indexed by a single member of the scheduled ZSET scored
// by the earliest due time among them. One field and one member per
// segment instead of one each per message saves the hash-table entry, the
// field name and the skiplist node of every message but one.
//
// The first claim that meets a segment's member explodes it: one script
// writes its messages as ordinary records (one field each) and removes the
// segment, after which they live as any message does. Until then:
//   - Get, Delete and Reschedule find a message by its id's prefix;
//   - Delete rewrites the segment without the message, and Reschedule
//     moves it out (its own record, the segment rewritten without it),
//     each with one script;
//   - enqueueing an id that a segment holds is ErrDuplicate.
//
// Stats counts a segment's messages with keys.SegmentExtraField, the
// messages held in segments minus the segments. A write does not pass
// its segments through a script to update it (Redis turns every byte of
// a script's arguments into a Lua string and back, which measured many
// times the cost of a plain HMSET: see docs/benchmarks.md, Measured
// design choices). The HMSET writes each segment together with a
// pending field (keys.SegmentPendingField), and a small script then
// removes the pending fields and adds their segments' counts, in one
// step: a segment is counted exactly once, by whoever removes its
// pending field. A crash between the two leaves the pending field, and
// the reconciler counts that segment (segHealScript); until then Stats
// counts it as one message. Exploding or cutting a segment adjusts the
// count only when the segment was counted.
//
// The names of segments and of their pending fields are built in
// internal/keys (keys.SegmentField); the scripts that handle segments are
// in scripts.go.
const (
	// SegmentIDLen is the length of ids that can belong to a segment.
	SegmentIDLen = 26
	// SegmentPrefixLen is the length of the prefix the ids of one segment share.
	SegmentPrefixLen = 22
)

// segEntry is one message of a segment.
type segEntry struct {
	suffix string // the id after the prefix
	due    int64
	rec    []byte
}

// encodeSegment packs msgs, whose ids share a prefix: per message, its
// id's suffix (SegmentIDLen-SegmentPrefixLen bytes), its due time
// (big-endian IEEE 754 double, exact for unix ms), the record's length
// (big-endian uint32) and the record. The scripts read it with
// struct.unpack('>c4dI4'). It returns the earliest due time too.
func encodeSegment(msgs []NewMessage) (seg []byte, due int64) {
	n := 0
	for _, m := range msgs {
		n += SegmentIDLen - SegmentPrefixLen + 12 + m.Record.encodedLen()
	}
	b := make([]byte, 0, n)
	due = msgs[0].Record.Due
	for _, m := range msgs {
		b = append(b, m.ID[SegmentPrefixLen:]...)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(float64(m.Record.Due)))
		at := len(b)
		b = m.Record.AppendEncode(append(b, 0, 0, 0, 0))
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
		due = min(due, m.Record.Due)
	}
	return b, due
}

var errBadSegment = errors.New("delayq: bad segment")

// decodeSegment parses what encodeSegment produced.
func decodeSegment(b []byte) ([]segEntry, error) {
	const sl = SegmentIDLen - SegmentPrefixLen
	var out []segEntry
	for len(b) > 0 {
		if len(b) < sl+12 {
			return nil, fmt.Errorf("%w: truncated entry", errBadSegment)
		}
		e := segEntry{suffix: string(b[:sl])}
		e.due = int64(math.Float64frombits(binary.BigEndian.Uint64(b[sl:])))
		n := binary.BigEndian.Uint32(b[sl+8:])
		b = b[sl+12:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: record of %d bytes past the end", errBadSegment, n)
		}
		e.rec, b = b[:n], b[n:]
		out = append(out, e)
	}
	return out, nil
}

// segLookup finds the entry of id in an encoded segment.
func segLookup(seg []byte, id string) (*segEntry, error) {
	entries, err := decodeSegment(seg)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		if entries[i].suffix == id[SegmentPrefixLen:] {
			return &entries[i], nil
		}
	}
	return nil, nil
}

// segReads are the commands that read the segment that may hold id:
// none when id cannot be in a segment. segHeld reads their replies.
func segReads(mk, id string) []cmd {
	if len(id) != SegmentIDLen {
		return nil
	}
	return []cmd{{"HGET", []any{mk, keys.SegmentField(id[:SegmentPrefixLen])}}}
}

// segHeld returns the entry of id in its segment, from the replies of
// segReads (none when id cannot be in a segment): nil if no segment holds
// it.
func segHeld(r []any, id string) (*segEntry, error) {
	if len(r) < 1 || r[0] == nil {
		return nil, nil
	}
	seg, _ := redis.Bytes(r[0], nil)
	return segLookup(seg, id)
}

// explodeSegments takes the segments segs of the records HASH mk apart,
// one explodeScript each, in one pipeline on c, and returns the records
// they wrote, {id1, due1, id2, due2, ...}.
func explodeSegments(ctx context.Context, c redis.Conn, mk string, segs []string) ([]string, error) {
	cmds := make([]cmd, len(segs))
	for i, f := range segs {
		cmds[i] = cmd{"EVALSHA", append(scriptCall(explodeScript, mk, 2), f, f[1:])}
	}
	r, err := roundTrip(ctx, c, cmds)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range r {
		vals, err := redis.Strings(v, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, nil
}
