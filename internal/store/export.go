package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Exported is one message an export pass found.
type Exported struct {
	ID     string
	State  State // StateScheduled, StateInFlight, StateDead or StateDone
	DiedAt int64 // unix ms it died, when dead
	Record *Record
	// Done is a finished message's id (see Done), when StateDone: its
	// Record is nil. It is reported whether its window ended or not:
	// the caller compares Until with its clock.
	Done Done
}

// ExportPass is what one ExportScan read.
type ExportPass struct {
	Next string // the cursor to go on from; "0" when the scan of the records ended
	Msgs []Exported
	// LeftBefore and LeftAfter are the partition's keys.SegmentLeftField
	// counter as read just before the HSCAN (on a scan's first batch
	// only, cursor "0") and just after it: a message
	// present all along may be missed by a scan over which it changed
	// fields, which only a change of the counter tells.
	LeftBefore, LeftAfter int64
	// Corrupt names the fields (ids or segments) whose stored bytes could
	// not be decoded, with the reason: they are not in Msgs.
	Corrupt []string
}

// ExportScan reads one batch of partition tp's messages for an export: it
// scans about count fields of the records HASH from cursor (HSCAN) and
// returns the messages they hold, each with its state, read right after
// (two scripts in one pipeline: which ids are in flight, and which are
// dead with their time of death). Messages in segments are scheduled. A
// message in both the in-flight and the dead ZSET is dead (the move to
// dead adds its entry before it removes the in-flight one); one in no
// index is reported as scheduled at its recorded due, as Get does. A
// Done in place of a record (a message acked within its uniqueness
// window) is reported in StateDone, with its Done and no record.
//
// It only reads: four commands (five on a scan's first batch, cursor "0"),
// each bounded by count (plus the messages of the segments among the
// fields, 16 at most each).
func (s *Store) ExportScan(ctx context.Context, tp TopicPartition, cursor string, count int) (ExportPass, error) {
	pass := ExportPass{Next: cursor}
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	left := cmd{"HGET", []any{mk, keys.SegmentLeftField}}
	cmds := []cmd{{"HSCAN", []any{mk, cursor, "COUNT", count}}, left}
	if cursor == "0" { // the count before is only needed where a scan starts
		cmds = append([]cmd{left}, cmds...)
	}
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return pass, fmt.Errorf("export partition %d: %w", tp.P, err)
	}
	if cursor == "0" {
		pass.LeftBefore, _ = redis.Int64(r[0], nil)
		r = r[1:]
	}
	pass.LeftAfter, _ = redis.Int64(r[1], nil)
	next, kv, err := scanPage(r[0])
	if err != nil {
		return pass, fmt.Errorf("export partition %d: %w", tp.P, err)
	}
	var ids []string
	var recs []*Record
	for i := 0; i+1 < len(kv); i += 2 {
		switch f := string(kv[i]); {
		case keys.IsIDField(f):
			if d, ok := DecodeDone(kv[i+1]); ok {
				pass.Msgs = append(pass.Msgs, Exported{ID: f, State: StateDone, Done: d})
				continue
			}
			rec, err := DecodeRecord(kv[i+1])
			if err != nil {
				pass.Corrupt = append(pass.Corrupt, fmt.Sprintf("%q: %v", f, err))
				continue
			}
			ids = append(ids, f)
			recs = append(recs, rec)
		case keys.IsSegmentField(f):
			entries, err := decodeSegment(kv[i+1])
			if err != nil {
				pass.Corrupt = append(pass.Corrupt, fmt.Sprintf("segment %q: %v", f[1:], err))
				continue
			}
			for _, e := range entries {
				id := f[len(keys.SegmentMark):] + e.suffix
				rec, err := DecodeRecord(e.rec)
				if err != nil {
					pass.Corrupt = append(pass.Corrupt, fmt.Sprintf("%q: %v", id, err))
					continue
				}
				pass.Msgs = append(pass.Msgs, Exported{ID: id, State: StateScheduled, Record: rec})
			}
		}
	}
	if len(ids) > 0 {
		r, err := s.do(ctx,
			cmd{"EVALSHA", append(scriptCall(memberScript, keys.InFlight(s.ns, tp.Topic, tp.P), len(ids)), strs(ids)...)},
			scoresCmd(keys.Dead(s.ns, tp.Topic, tp.P), strs(ids)),
		)
		if err != nil {
			return pass, fmt.Errorf("export partition %d: %w", tp.P, err)
		}
		inFlight, err := intsOf(r[0], len(ids))
		if err != nil {
			return pass, fmt.Errorf("export partition %d: %w", tp.P, err)
		}
		died, dead, err := scoresOf(r[1], len(ids))
		if err != nil {
			return pass, fmt.Errorf("export partition %d: times of death: %w", tp.P, err)
		}
		for i, id := range ids {
			m := Exported{ID: id, State: StateScheduled, Record: recs[i]}
			switch {
			case dead[i]:
				m.State, m.DiedAt = StateDead, died[i]
			case inFlight[i] == 1:
				m.State = StateInFlight
			}
			pass.Msgs = append(pass.Msgs, m)
		}
	}
	pass.Next = next
	return pass, nil
}
