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
	first := take(T.Add(time.Hour), 0, 0)
	if first.N != 1 {
		t.Fatalf("the first take got %d, want the burst of 1", first.N)
	}
	// One on time is behind: nothing to refill yet, but its times are on
	// its own clock, and it learns the hour.
	g := take(T.Add(time.Millisecond), 0, first.Epoch)
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
	if g.Offset != 0 || g.Epoch != first.Epoch+1 || g.Learn(T.Add(time.Minute+time.Second)) != 0 {
		t.Fatalf("a minute with no taker on its own clock: offset %v epoch %d, want 0 and a new epoch", g.Offset, g.Epoch)
	}
	// The clock set right, with its offset of the old epoch (none): on
	// the new timeline, nothing to learn.
	if g := take(T.Add(time.Minute+1100*time.Millisecond), 0, 0); g.Offset != 0 || g.Learn(T.Add(time.Minute+1100*time.Millisecond)) != 0 {
		t.Fatalf("set right: offset %v, want 0", g.Offset)
	}
}

// Limits set anew start a new bucket: tokens a burst of 50 left, and its
// timeline, do not carry over a change to a burst of 1.
func TestSetLimitsNewBucket(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const topic = "rebucket"
	now := time.Now()
	if _, err := s.EnsureTopic(ctx, topic, 2, now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetLimits(ctx, topic, Limits{Rate: 5, Burst: 50}, false); err != nil {
		t.Fatal(err)
	}
	if g, err := s.TakeTokens(ctx, topic, TokenTake{Rate: 5, Burst: 50, Want: 1, Min: 1, Now: now.Add(time.Hour)}); err != nil || g.Before != 50 {
		t.Fatalf("a take of the burst of 50: %+v, %v", g, err)
	}
	for _, l := range []Limits{{}, {Rate: 5}} {
		if _, err := s.SetLimits(ctx, topic, l, false); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.TakeTokens(ctx, topic, TokenTake{Rate: 5, Burst: 1, Want: 30, Min: 1, Now: now})
	if err != nil || g.N != 1 || g.Before != 1 {
		t.Fatalf("after clear and 5/s: granted %d of a bucket of %v (%v), want the burst of 1", g.N, g.Before, err)
	}
	if g.Learn(now) != 0 {
		t.Fatalf("after clear and 5/s: the old timeline (an hour ahead) carried over: %+v", g)
	}
}
