package store

import (
	"context"
	"fmt"
)

// Progress is how far a running change of a topic's partition count went.
type Progress struct {
	Sources []int // the partitions the change moves messages out of
	Marked  []int // those of them with nothing left to move
	// Moved counts the messages the change moved (the movers add to it
	// after each pass; a cancel starts it again).
	Moved int64
	// Left counts the messages in the sources not marked moved, those
	// that stay in their partition included.
	Left int64
	// ToMove is how many of Left are to move: all of them when
	// shrinking (every message beyond the new count moves), and when
	// growing an estimate: the messages the sources held (there now, or
	// moved) times the share of ids whose partition changes (1 -
	// Count/Next), less those moved, at most Left.
	ToMove      int64
	ToMoveExact bool
	// Owned counts the sources not marked moved that a consumer holds the
	// lease of: with none, nothing moves until a consumer runs.
	Owned int
}

// ChangeProgress returns the progress of the change l runs, from st, the
// stats of topic's partitions 0..l.Span()-1 (Stats), and the moved marks
// and count it reads (one HMGET). It returns nil when l runs no change.
func (s *Store) ChangeProgress(ctx context.Context, topic string, l Layout, st []PartitionStats) (*Progress, error) {
	if !l.Changing() {
		return nil, nil
	}
	if len(st) < l.Span() {
		return nil, fmt.Errorf("progress of %s: stats of %d partitions, want %d", topic, len(st), l.Span())
	}
	marks, moved, err := s.MovedMarks(ctx, topic, l)
	if err != nil {
		return nil, err
	}
	pr := &Progress{Sources: l.Sources(), Moved: moved, ToMoveExact: l.Next < l.Count}
	var all int64 // the messages in every source, marked or not
	for _, p := range pr.Sources {
		n := st[p].Scheduled + st[p].InFlight + st[p].Dead
		all += n
		if marks[p] {
			pr.Marked = append(pr.Marked, p)
			continue
		}
		if st[p].Owner != "" {
			pr.Owned++
		}
		pr.Left += n
	}
	pr.ToMove = pr.Left
	if !pr.ToMoveExact {
		// Growing from c to n = k*c, an id of a source goes to another
		// partition with chance 1 - c/n: of the messages the sources
		// held (those there now and those moved out), that many move,
		// less those moved already.
		est := (all+moved)*int64(l.Next-l.Count)/int64(l.Next) - moved
		pr.ToMove = min(max(est, 0), pr.Left)
	}
	return pr, nil
}
