package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// What runs again, and where. Under WithRetry, a dial that fails is
// tried again (conn), and so is a round trip whose connection broke
// under it, on a read as on a write (redo): a proxy restarting, a backend
// restarting behind a proxy, a timeout. A broken round trip may or may
// not have run, in whole or in part, so only round trips that are safe
// to run twice go through redo: reads; writes that leave the same state
// however often they run (HSETNX and ZADD NX of a topic's meta, the ZADD
// of an index entry at its due, whose record decides whether it is a
// message or a tombstone); AddMany's first round trip, which, run
// again, tells the records its lost run stored from another writer's
// (see AddMany); and the round trips of Puts, whose script, run again,
// leaves the records its lost run wrote as they are, with that run's
// outcome (see putScript). The rest (the scripts of a delivery, a change
// of the count) is not repeated here: its callers decide, at their next
// turn.
//
// A Redis Cluster router belongs beside redo: a MOVED, ASK, TRYAGAIN or
// CLUSTERDOWN reply is another reason to run the round trip again, on
// the node the reply names, and the same f (which gets the connection)
// runs there.

// broke reports whether err, the failure of a round trip, is its
// connection's (it may have run, or not) rather than an answer.
func broke(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		(errors.Is(err, ErrUnreachable) || isNetErr(err))
}

// redo runs f, a round trip, on a connection of its own; under
// WithRetry, when the connection broke under it, it runs f again on a
// new connection, with backoff, until f succeeds, fails with an answer,
// or the WithRetry bound passes. again tells f it runs again: what its
// lost run did may be there. Without WithRetry, f runs once.
func (s *Store) redo(ctx context.Context, f func(c redis.Conn, again bool) error) error {
	r, retrying := ctx.Value(retryKey{}).(retry)
	var done func()
	defer func() {
		if done != nil {
			done()
		}
	}()
	wait := retryDialMin
	for tries := 1; ; tries++ {
		c, err := s.conn(ctx)
		if err != nil {
			return err
		}
		err = f(c, tries > 1)
		c.Close()
		if !retrying || !broke(err) || ctx.Err() != nil {
			return err
		}
		left := time.Until(r.start.Add(r.d))
		if left <= 0 {
			return fmt.Errorf("%w (tried %d times in %v)", err, tries, time.Since(r.start).Round(time.Millisecond))
		}
		if done == nil {
			done = s.proxies.outage.Wait(0)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (then %w, after %d tries)", err, ctx.Err(), tries)
		case <-t.C:
		}
		wait = min(2*wait, retryDialMax)
	}
}

// doAgain is do through redo: for round trips safe to run twice.
func (s *Store) doAgain(ctx context.Context, cmds ...cmd) ([]any, error) {
	var out []any
	err := s.redo(ctx, func(c redis.Conn, _ bool) (err error) {
		out, err = roundTrip(ctx, c, cmds)
		return err
	})
	return out, err
}
