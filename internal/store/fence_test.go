package store

import (
	"context"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
)

// Fencing tokens only grow, and a counter taken back (a failover to a
// replica that lacked it, here its key deleted) still yields a token
// above the fence raised before: the next owner takes over at once
// instead of being refused until the counter catches up.
func TestTokensSurviveALostCounter(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	s := openTest(t, env.Proxy)
	now := time.Now().UnixMilli()
	t1, err := s.NextToken(ctx, "tok", 0, now)
	if err != nil || t1 < now {
		t.Fatalf("first token %d (%v), want at least the clock %d", t1, err, now)
	}
	t2, _ := s.NextToken(ctx, "tok", 0, now-5000) // a clock behind: the counter goes on
	if t2 != t1+1 {
		t.Errorf("token with a clock behind: %d, want %d", t2, t1+1)
	}
	if err := s.RaiseFence(ctx, TopicPartition{Topic: "tok", P: 0}, t2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.do(ctx, cmd{"DEL", []any{keys.Epoch(s.ns, "tok", 0)}}); err != nil {
		t.Fatal(err)
	}
	t3, err := s.NextToken(ctx, "tok", 0, now+1000) // a second later
	if err != nil || t3 <= t2 {
		t.Fatalf("token after the counter was lost: %d (%v), want above %d", t3, err, t2)
	}
	if _, err := s.TakeOver(ctx, TopicPartition{Topic: "tok", P: 0}, t3); err != nil {
		t.Errorf("takeover with the token drawn after the loss: %v", err)
	}
}
