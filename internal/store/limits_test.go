package store

import (
	"context"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// The rate limit's bucket follows no single clock: a taker an hour
// behind the one that took last learns its offset from one reply, is
// granted on its own clock (not an hour later) and refills from its
// next take; once no taker on its own clock moved the timeline for
// timelineReset, a taker starts it again from its own clock, and the
// offsets go back to zero.
func TestTakeTokensClocks(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const topic = "clocks"
	T := time.UnixMilli(1_800_000_000_000)
	take := func(now time.Time, off time.Duration, ep int64) Tokens {
		t.Helper()
		g, err := s.TakeTokens(ctx, topic, TokenTake{Rate: 10, Burst: 1, Want: 1, Min: 1, Now: now, From: now, Offset: off, Epoch: ep})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// A clock an hour ahead takes the burst.
	if g := take(T.Add(time.Hour), 0, 0); g.N != 1 {
		t.Fatalf("the first take got %d, want the burst of 1", g.N)
	}
	// One on time is behind: nothing to refill yet, but its times are on
	// its own clock, and it learns the hour.
	g := take(T.Add(time.Millisecond), 0, 0)
	learned := g.Learn(T.Add(2 * time.Millisecond))
	if g.N != 0 || learned < time.Hour-time.Second || learned > time.Hour {
		t.Fatalf("behind by an hour: granted %d, learned %v; want 0 and about an hour", g.N, learned)
	}
	if next := g.Next(); next.Sub(T) > time.Second {
		t.Fatalf("behind by an hour: next take at T+%v, want within the rate's 100 ms on its own clock", next.Sub(T))
	}
	off := g.Offset + learned
	// Its next take, 200 ms on, refills: 2 tokens' worth, the burst of 1.
	if g := take(T.Add(200*time.Millisecond), off, g.Epoch); g.N != 1 || g.Base.Sub(T) > time.Second {
		t.Fatalf("200 ms later with its offset: granted %d at T+%v, want 1 at once", g.N, g.Base.Sub(T))
	}
	// The clock ahead stops (or is set right): a minute on, the timeline
	// starts again from the one on time.
	g = take(T.Add(time.Minute+time.Second), off, g.Epoch)
	if g.Offset != 0 || g.Epoch != 1 || g.Learn(T.Add(time.Minute+time.Second)) != 0 {
		t.Fatalf("a minute with no taker on its own clock: offset %v epoch %d, want 0 and a new epoch", g.Offset, g.Epoch)
	}
	// The clock set right, with its offset of the old epoch (none): on
	// the new timeline, nothing to learn.
	if g := take(T.Add(time.Minute+1100*time.Millisecond), 0, 0); g.Offset != 0 || g.Learn(T.Add(time.Minute+1100*time.Millisecond)) != 0 {
		t.Fatalf("set right: offset %v, want 0", g.Offset)
	}
}
