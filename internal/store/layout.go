package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
)

// Layout is where a topic's messages are: its partition count and the
// count it is being changed to, if a change runs (see ChangeScript).
type Layout struct {
	Count int   // the partitions messages were placed in before the change
	Next  int   // the count being changed to; 0 when no change runs
	Since int64 // when the change began (unix ms)
	// Reversed: the change is the reverse of a cancelled one (see
	// CancelChange); its moves start only once the cancelled change's
	// have ended.
	Reversed bool
	// UniqueFor is the topic's default uniqueness window (ms, 0 for
	// none): the window of a message sent with an id of its own and no
	// window (see Record.UniqueFor). It is read with the layout, so that
	// a send pays no round trip for it.
	UniqueFor int64
}

// Changing reports whether a change of the count runs.
func (l Layout) Changing() bool { return l.Next > 0 && l.Next != l.Count }

// Span is the number of partitions that may hold messages: both counts'
// during a change.
func (l Layout) Span() int { return max(l.Count, l.Next) }

// PlaceCount is the count new messages are placed by: the count being
// changed to, during a change.
func (l Layout) PlaceCount() int {
	if l.Changing() {
		return l.Next
	}
	return l.Count
}

// Place returns the partition a new message of id goes to.
func (l Layout) Place(id string) int { return partition.For(id, l.PlaceCount()) }

// Old returns the partition id had before the change (Place's when none
// runs). A message is there or in Place(id).
func (l Layout) Old(id string) int { return partition.For(id, l.Count) }

// IsSource reports whether partition p may hold messages the change must
// move: when growing, each old partition; when shrinking, those beyond
// the new count.
func (l Layout) IsSource(p int) bool {
	if !l.Changing() {
		return false
	}
	if l.Next > l.Count {
		return p < l.Count
	}
	return p >= l.Next && p < l.Count
}

// Sources returns the partitions IsSource holds for, in order.
func (l Layout) Sources() []int {
	var out []int
	for p := range l.Span() {
		if l.IsSource(p) {
			out = append(out, p)
		}
	}
	return out
}

// layoutReads are the commands that read the layout from the meta
// HASH; layoutOf reads their reply (an HMGET).
func layoutReads(meta string) cmd {
	return cmd{"HMGET", []any{meta, keys.MetaPartitions, keys.MetaNext, keys.MetaSince, keys.MetaReversed, keys.MetaUniqueFor}}
}

func layoutOf(r any) (Layout, error) {
	vals, err := redis.Values(r, nil)
	if err != nil || len(vals) != 5 {
		return Layout{}, fmt.Errorf("bad layout reply %v: %v", r, err)
	}
	var l Layout
	for i, dst := range []*int{&l.Count, &l.Next} {
		if vals[i] != nil {
			n, err := redis.Int(vals[i], nil)
			if err != nil {
				return Layout{}, fmt.Errorf("bad layout reply %v: %v", r, err)
			}
			*dst = n
		}
	}
	if vals[2] != nil {
		l.Since, _ = redis.Int64(vals[2], nil)
	}
	l.Reversed = vals[3] != nil && l.Changing()
	if vals[4] != nil {
		if l.UniqueFor, err = redis.Int64(vals[4], nil); err != nil || l.UniqueFor < 0 {
			return Layout{}, fmt.Errorf("bad layout reply %v: unique_for: %v", r, err)
		}
	}
	return l, nil
}

// ReadLayout returns topic's layout; its Count is 0 when the topic does
// not exist.
func (s *Store) ReadLayout(ctx context.Context, topic string) (Layout, error) {
	r, err := s.doAgain(ctx, layoutReads(keys.Meta(s.ns, topic)))
	if err != nil {
		return Layout{}, fmt.Errorf("topic %s layout: %w", topic, err)
	}
	return layoutOf(r[0])
}
