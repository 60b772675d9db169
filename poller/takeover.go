package poller

import (
	"context"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// recoverPage is how many in-flight ids one step of a recovery reads, and
// recoverPages how many steps one turn of the loop takes at most.
const (
	recoverPage  = 256
	recoverPages = 64
)

// TakeoverStore is what a change of owner needs from storage: the
// takeover that starts a loop (Run), the watch on the consumers that
// handed the partition over (watchGivers), the return of a lost owner's
// in-flight messages (recoverLost) and the mark of a graceful handover
// (handOver).
type TakeoverStore interface {
	TakeOver(ctx context.Context, tp store.TopicPartition, token int64) (store.Takeover, error)
	HandOver(ctx context.Context, tp store.TopicPartition, token int64, givers []string) error
	Givers(ctx context.Context, tp store.TopicPartition, ids []string, nowMS int64) (alive bool, inFlight int, err error)
	InFlightIDs(ctx context.Context, tp store.TopicPartition, offset, count int) ([]string, error)
	Records(ctx context.Context, tp store.TopicPartition, ids []string) ([]*store.Record, error)
}

// takeOverRetry is the pause between tries of a takeover that failed
// for want of Redis (a proxy restarting, an outage), at most.
const takeOverRetry = 250 * time.Millisecond

// takeOver is a loop's first act: it raises the fence and takes the
// marks of a graceful handover (store.TakeOver). After a graceful
// handover the loop watches the givers (see watchGivers); otherwise it
// returns every in-flight message to scheduled as its first act (see
// recoverLost). A try that fails for want of Redis is logged (an
// outage's failures fold into its lines) and made again while the lease
// holds: a proxy blip does not cost the partition. It reports whether
// stop closed first; its error is ErrFenced when the fence holds a newer
// token, ErrExpired when the lease ran out, or ctx's cause.
func (p *part) takeOver(ctx context.Context, stop <-chan struct{}) (stopped bool, err error) {
	cfg := p.cfg
	for {
		take, err := cfg.Store.TakeOver(ctx, cfg.tp(), cfg.Token)
		if err == nil {
			if take.Graceful {
				p.givers = take.Givers
			} else {
				p.recovering = true // as the loop's first act
			}
			cfg.Logger.Debug("partition started", "previous", take.Previous, "graceful", take.Graceful, "givers", take.Givers)
			return false, nil
		}
		if ferr := p.fenced(err); ferr != nil {
			return false, ferr
		}
		if ctx.Err() == nil {
			p.logErr("take over", err)
		}
		t := time.NewTimer(clock.Jitter(min(cfg.PollInterval, takeOverRetry)))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, context.Cause(ctx)
		case <-stop:
			t.Stop()
			return true, nil
		case <-t.C:
		}
		if !cfg.Valid() {
			return false, ErrExpired
		}
	}
}

// watchGivers runs the recovery of a lost owner's messages when one is
// pending, and otherwise checks, every poll interval, the consumers that
// handed the partition over with deliveries still running: when one of
// them is no longer a member (it died, or left without finishing them),
// every in-flight message not this loop's own goes back to scheduled at
// once, as after a fault. When no such message is left the watch ends.
// It reports whether messages were returned.
func (p *part) watchGivers(ctx context.Context, now time.Time) bool {
	cfg := p.cfg
	if !p.recovering && len(p.givers) > 0 && !now.Before(p.nextWatch) {
		p.nextWatch = now.Add(clock.Jitter(cfg.PollInterval))
		alive, inFlight, err := cfg.Store.Givers(ctx, cfg.tp(), p.givers, now.UnixMilli())
		switch {
		case err != nil:
			p.logErr("watch givers", err)
		case !alive:
			cfg.Logger.Info("a consumer that handed the partition over is gone: returning its messages", "givers", p.givers)
			p.recovering = true
		case inFlight <= len(p.mine):
			p.givers = nil // every delivery of theirs ended
		}
	}
	if !p.recovering || !cfg.Valid() {
		return false
	}
	n, done := p.recoverLost(ctx, now)
	if done {
		p.recovering = false
		p.givers = nil
	}
	return n > 0
}

// recoverLost returns every in-flight message of the partition that is not
// this loop's own to scheduled, at its own due time and with its attempt
// count unchanged: they were claimed by an owner that will not finish
// them. (One that was running there may run twice: a duplicate after a
// fault, counted as recovered.) It reports how many it returned and
// whether it went through all of them.
func (p *part) recoverLost(ctx context.Context, now time.Time) (n int, done bool) {
	cfg := p.cfg
	offset := 0
	for range recoverPages {
		ids, err := cfg.Store.InFlightIDs(ctx, cfg.tp(), offset, recoverPage)
		if err != nil {
			p.logErr("recover in-flight messages", err)
			return n, false
		}
		var others []string
		for _, id := range ids {
			if p.mine[id] != nil {
				offset++
			} else {
				others = append(others, id)
			}
		}
		if len(others) > 0 {
			recs, err := cfg.Store.Records(ctx, cfg.tp(), others)
			if err != nil {
				p.logErr("recover in-flight messages", err)
				return n, false
			}
			var moves []store.Move
			var tomb []string
			for i, id := range others {
				switch r := recs[i]; {
				case r == nil:
					tomb = append(tomb, id) // acked or deleted meanwhile
				case r.Corrupt != nil:
					moves = append(moves, p.corruptMove(id, r, now))
				case r.Attempts >= p.maxAttempts(r):
					// Its last failure was written, its move to dead was not.
					moves = append(moves, store.Move{ID: id, Dead: true, Score: now.UnixMilli()})
				default:
					moves = append(moves, store.Move{ID: id, Score: r.Due})
				}
			}
			if !p.writeRecovered(ctx, tomb, moves) {
				return n, false
			}
			n += len(moves)
		}
		if len(ids) < recoverPage {
			if n > 0 {
				cfg.Logger.Info("returned the in-flight messages of a lost owner", "n", n)
			}
			return n, true
		}
	}
	return n, false
}

// writeRecovered drops the in-flight entries of tombstones and writes the
// moves of recovered messages; it reports whether both landed.
func (p *part) writeRecovered(ctx context.Context, tomb []string, moves []store.Move) bool {
	cfg := p.cfg
	if len(tomb) > 0 {
		if err := cfg.Store.Drop(ctx, cfg.tp(), tomb); err != nil {
			p.logErr("recover in-flight messages", err)
			return false
		}
		p.count(EventTombstone, len(tomb))
	}
	if len(moves) == 0 {
		return true
	}
	return p.writeReturns(ctx, moves, EventRecovered, "recover in-flight messages")
}

// corruptMove moves a message whose record cannot be decoded to the dead
// set, logs it and counts it.
func (p *part) corruptMove(id string, rec *store.Record, now time.Time) store.Move {
	p.cfg.Logger.Warn("undecodable record moved to the dead set", "id", id, "bytes", len(rec.Body), "err", rec.Corrupt)
	p.count(EventCorrupt, 1)
	return store.CorruptMove(id, rec, now.UnixMilli())
}

// handOver ends a graceful stop: with what the loop held returned, it
// marks the partition as handed over (naming this consumer and the givers
// it still watched, whose deliveries may still run), detaches the running
// handlers from the lease and calls Release. Without the mark (a write
// failed, or something held could not be returned) the next owner treats
// the change as a fault and returns every in-flight message.
func (p *part) handOver(ctx context.Context) {
	cfg := p.cfg
	if len(p.pending) == 0 && cfg.Valid() {
		givers := append([]string{cfg.Consumer}, p.givers...)
		if err := cfg.Store.HandOver(ctx, cfg.tp(), cfg.Token, givers); err != nil {
			cfg.Logger.Warn("hand over: the next owner will return the messages in flight", "err", err)
		}
	} else {
		cfg.Logger.Warn("hand over: held messages not returned; the next owner will return them", "unwritten", len(p.pending))
	}
	p.handedOver = true
	p.detach()
	if cfg.Release != nil {
		cfg.Release()
	}
}
