package poller

import (
	"context"
	"errors"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// A change of a topic's partition count (see store.BeginChange) moves the
// messages of each source partition that belong to another partition in
// the new count. The owner of the source partition moves them, between
// its claims, in passes of about a reconciler batch (store.MoveScan),
// sweeping its records again and again until a sweep finds nothing left
// to move; it then marks the partition moved, and the last mark ends the
// change. A cancelled change becomes its reverse (store.CancelChange):
// the partitions that received messages are its sources, and their
// owners move the messages back, beginning a settle time after the
// cancel, when the cancelled change's passes have ended.
const (
	// moveDelay is how long after a change began its moves start: every
	// client reads the layout again within a second of using it, so by
	// then each writes new messages to the new count and looks for a
	// message in both.
	moveDelay = 2 * time.Second
	// DefaultMoveSettle is how long after a change began the sweep that
	// marks a partition moved may start (Config.MoveSettle): longer than a
	// client's longest write (a dial and three round trips at their
	// default timeouts, 20 s), so that a write begun with the layout from
	// before the change has landed, and been moved, when the change ends.
	DefaultMoveSettle = 30 * time.Second
	// moveHorizon: messages due sooner are left to be delivered where
	// they are, far beyond what any owner claims ahead, so that a message
	// is never claimed in both places while it moves.
	moveHorizon = 30 * time.Second
	// movePause is the rest between two sweeps of a partition.
	movePause = time.Second
	// A pass runs in the loop's turn, so a held message due to start
	// while it runs would start late: a pass waits for that start when
	// the message starts within the last pass's length (at least
	// passGuess), for up to passWaitMax; then it runs anyway.
	passGuess   = 50 * time.Millisecond
	passWaitMax = time.Second
)

// MoveStore is what the moves of a change of the partition count need
// from storage (move): the passes that move messages, the count of those
// moved, the mark of a partition moved and the signal of a change.
type MoveStore interface {
	MoveScan(ctx context.Context, tp store.TopicPartition, sw store.MoveSweep) (store.MovePass, error)
	CountMoved(ctx context.Context, topic string, l store.Layout, n int) error
	MarkMoved(ctx context.Context, tp store.TopicPartition, l store.Layout, nowMS int64) (bool, error)
	Changed(ctx context.Context, topic string) error
}

// mover is a partition loop's state in a change of the count.
type mover struct {
	change int64         // the since of the change the state below is for
	cursor string        // HSCAN cursor of the sweep under way ("" or "0": none)
	from   time.Time     // when the sweep under way began
	clean  bool          // the sweep under way found nothing left to move
	next   time.Time     // when to run the next pass
	marked bool          // this partition is marked moved for the change
	took   time.Duration // how long the last pass took
	waited time.Time     // when the pass began to wait for a start (zero: not waiting)
}

// move runs a pass of the moves of a running change when one is due,
// and returns when the loop should run the next (zero: no change
// concerns this partition). Its error is ErrFenced when another owner
// took the partition.
func (p *part) move(ctx context.Context, now time.Time) (time.Time, error) {
	cfg := p.cfg
	if cfg.Layout == nil {
		return time.Time{}, nil
	}
	l := cfg.Layout()
	m := &p.mv
	if m.change != l.Since {
		*m = mover{change: l.Since} // another change: a sweep of its own
	}
	if !l.IsSource(cfg.Partition) || m.marked {
		return time.Time{}, nil
	}
	settle := cfg.MoveSettle
	if settle <= 0 {
		settle = DefaultMoveSettle
	}
	since := time.UnixMilli(l.Since)
	start := since.Add(moveDelay)
	if l.Reversed {
		// The passes of the cancelled change, begun before the cancel,
		// end within a settle time (see docs/architecture.md).
		start = since.Add(settle)
	}
	if now.Before(start) {
		return start, nil
	}
	if now.Before(m.next) {
		return m.next, nil
	}
	if at, ok := p.waitForStart(now); ok {
		return at, nil
	}
	if !cfg.Valid() {
		return time.Time{}, nil
	}
	if m.cursor == "" || m.cursor == "0" {
		m.cursor, m.from, m.clean = "0", now, true
	}
	horizon := now.Add(moveHorizon).UnixMilli()
	began := cfg.Now()
	pass, err := cfg.Store.MoveScan(ctx, cfg.tp(), store.MoveSweep{
		Layout: l, Token: cfg.Token, Cursor: m.cursor, Count: cfg.ReconcileBatch, HorizonMS: horizon,
		Skip: func(id string) bool { return p.mine[id] != nil },
	})
	m.took = cfg.Now().Sub(began)
	p.count(EventMoved, pass.Moved)
	if pass.Moved > 0 {
		if err := cfg.Store.CountMoved(ctx, cfg.Topic, l, pass.Moved); err != nil {
			p.logErr("count messages moved", err)
		}
	}
	if err != nil {
		if ferr := p.fenced(err); ferr != nil {
			return time.Time{}, ferr
		}
		if errors.Is(err, store.ErrChangeReplaced) {
			// Cancelled or ended: the loop reads the layout again.
			cfg.Logger.Debug("move pass stopped", "err", err)
			m.cursor, m.next = "0", now.Add(movePause)
			return m.next, nil
		}
		p.logErr("move messages to their partitions in the new count", err)
		m.cursor, m.next = "0", now.Add(movePause) // the sweep starts again
		return m.next, nil
	}
	if len(pass.Conflicts) > 0 {
		cfg.Logger.Warn("messages not moved: their partition in the new count holds another message of the same id",
			"ids", pass.Conflicts, "to", l.Next)
	}
	if pass.Left > 0 {
		m.clean = false
	}
	m.cursor = pass.Next
	if m.cursor != "0" {
		m.next = now // go on at the loop's next turn
		return m.next, nil
	}
	if m.clean && !m.from.Before(since.Add(settle)) {
		ended, err := cfg.Store.MarkMoved(ctx, cfg.tp(), l, cfg.Now().UnixMilli())
		if err != nil {
			p.logErr("mark partition moved", err)
		} else {
			m.marked = true
			cfg.Logger.Info("partition moved", "to", l.Next, "change_ended", ended)
			if err := cfg.Store.Changed(ctx, cfg.Topic); err != nil {
				p.logErr("signal a change", err)
			}
			return time.Time{}, nil
		}
	}
	m.next = now.Add(clock.Jitter(movePause))
	return m.next, nil
}

// waitForStart reports whether the pass due at now waits, and until when:
// until the first held message's start when it comes within the last
// pass's length (at least passGuess), unless the pass has waited
// passWaitMax already.
func (p *part) waitForStart(now time.Time) (time.Time, bool) {
	m := &p.mv
	at, ok := p.startAt()
	// A start already past is held back (a pause, the limits): the pass
	// does not wait for it.
	if !ok || !at.After(now) || !at.Before(now.Add(max(m.took, passGuess))) {
		m.waited = time.Time{}
		return time.Time{}, false
	}
	if m.waited.IsZero() {
		m.waited = now
	}
	if now.Sub(m.waited) >= passWaitMax {
		m.waited = time.Time{}
		return time.Time{}, false
	}
	return at, true
}
