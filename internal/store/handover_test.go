package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/lease"
	"github.com/gomodule/redigo/redis"
)

// TestTakeOverAfterFault raises the fence of a partition never owned,
// then of one whose owner left without a handover, then of one whose
// only mark is an older owner's: each takeover raises the fence to its
// token, reports the previous one, and is not graceful; the stale mark
// is removed.
func TestTakeOverAfterFault(t *testing.T) {
	ctx := context.Background()
	s := freshStore(t)
	const topic = "fault"
	take, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 10)
	if err != nil || take.Previous != 0 || take.Graceful || len(take.Givers) != 0 {
		t.Fatalf("first takeover: %+v, %v; want previous 0, not graceful", take, err)
	}
	checkFence(t, s, topic, 10)
	take, err = s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 11)
	if err != nil || take.Previous != 10 || take.Graceful || len(take.Givers) != 0 {
		t.Fatalf("takeover after a fault: %+v, %v; want previous 10, not graceful", take, err)
	}
	checkFence(t, s, topic, 11)
	// A mark left by the owner of token 10: a fault happened since.
	sk := keys.Scheduled(s.ns, topic, 0)
	if _, err := s.do(ctx, cmd{"ZADD", []any{sk, -10, keys.Gave("old")}}); err != nil {
		t.Fatal(err)
	}
	take, err = s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 12)
	if err != nil || take.Previous != 11 || take.Graceful || len(take.Givers) != 0 {
		t.Fatalf("takeover over an older owner's mark: %+v, %v; want previous 11, not graceful", take, err)
	}
	checkFence(t, s, topic, 12)
	if r, err := s.do(ctx, cmd{"ZSCORE", []any{sk, keys.Gave("old")}}); err != nil || r[0] != nil {
		t.Errorf("older owner's mark after the takeover: %v, %v; want removed", r, err)
	}
}

// TestHandOverGraceful hands a partition over from the fence's owner,
// naming two givers, beside a mark an older owner left: the next
// takeover is graceful, names the two givers and not the older owner's,
// and removes every mark.
func TestHandOverGraceful(t *testing.T) {
	ctx := context.Background()
	s := freshStore(t)
	const topic = "graceful"
	sk := keys.Scheduled(s.ns, topic, 0)
	if _, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.do(ctx, cmd{"ZADD", []any{sk, -9, keys.Gave("older")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.HandOver(ctx, TopicPartition{Topic: topic, P: 0}, 10, []string{"c1", "c2"}); err != nil {
		t.Fatal(err)
	}
	r, err := s.do(ctx, cmd{"ZSCORE", []any{sk, keys.Gave("c1")}}, cmd{"ZSCORE", []any{sk, keys.Gave("c2")}})
	if err != nil || r[0] == nil || r[1] == nil {
		t.Fatalf("marks after the handover: %v, %v", r, err)
	}
	take, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 10)
	if err != nil || take.Previous != 10 || take.Graceful || len(take.Givers) != 0 {
		t.Fatalf("takeover with the fence's own token: %+v, %v; want accepted, previous 10, not graceful", take, err)
	}
	if r, err := s.do(ctx, cmd{"ZSCORE", []any{sk, keys.Gave("c1")}}); err != nil || r[0] == nil {
		t.Fatalf("handover mark after a takeover with the fence's token: %v, %v; want kept", r, err)
	}
	take, err = s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 11)
	if err != nil || take.Previous != 10 || !take.Graceful || !slices.Equal(take.Givers, []string{"c1", "c2"}) {
		t.Fatalf("takeover after a handover: %+v, %v; want previous 10, graceful, givers c1 c2", take, err)
	}
	checkFence(t, s, topic, 11)
	r, err = s.do(ctx, cmd{"ZCARD", []any{sk}})
	if err != nil || r[0] != int64(1) {
		t.Errorf("scheduled after the takeover: %v members (%v), want the fence alone", r, err)
	}
}

// TestTakeOverFenced tries takeovers around a handover by the owner of
// token 10. A lower token gets a *FencedError naming the fence; the
// fence's own token is accepted and is not graceful; neither changes
// anything, the marks left for the next owner. The next owner's takeover
// (11) is graceful; made again with the same token, as after a lost
// reply, it is accepted, reports its own token as previous and, the
// marks taken by the first run, is not graceful. The old owner's token
// is then refused.
func TestTakeOverFenced(t *testing.T) {
	ctx := context.Background()
	s := freshStore(t)
	const topic = "fenced"
	sk := keys.Scheduled(s.ns, topic, 0)
	if _, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.HandOver(ctx, TopicPartition{Topic: topic, P: 0}, 10, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 9)
	var fe *FencedError
	if !errors.As(err, &fe) || fe.Token != 9 || fe.Newest != 10 {
		t.Fatalf("takeover with a lower token: %v, want a *FencedError at 10", err)
	}
	checkFence(t, s, topic, 10)
	take, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 10)
	if err != nil || take.Previous != 10 || take.Graceful || len(take.Givers) != 0 {
		t.Fatalf("takeover with the fence's own token: %+v, %v; want accepted, previous 10, not graceful", take, err)
	}
	if r, err := s.do(ctx, cmd{"ZSCORE", []any{sk, keys.Gave("c1")}}); err != nil || r[0] == nil {
		t.Fatalf("handover mark after a takeover with the fence's token: %v, %v; want kept", r, err)
	}
	take, err = s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 11)
	if err != nil || take.Previous != 10 || !take.Graceful || !slices.Equal(take.Givers, []string{"c1"}) {
		t.Fatalf("takeover with a newer token: %+v, %v; want previous 10, graceful, giver c1", take, err)
	}
	take, err = s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 11)
	if err != nil || take.Previous != 11 || take.Graceful || len(take.Givers) != 0 {
		t.Fatalf("takeover made again: %+v, %v; want accepted, previous 11, not graceful", take, err)
	}
	checkFence(t, s, topic, 11)
	if _, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 10); !errors.As(err, &fe) || fe.Token != 10 || fe.Newest != 11 {
		t.Errorf("takeover with the old owner's token: %v, want a *FencedError at 11", err)
	}
	checkFence(t, s, topic, 11)
}

// TestHandOverStale hands a partition over with a token the fence no
// longer holds: a *FencedError naming the fence, no mark written, and
// the next takeover is not graceful.
func TestHandOverStale(t *testing.T) {
	ctx := context.Background()
	s := freshStore(t)
	const topic = "stale"
	sk := keys.Scheduled(s.ns, topic, 0)
	for _, tok := range []int64{10, 11} {
		if _, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, tok); err != nil {
			t.Fatal(err)
		}
	}
	err := s.HandOver(ctx, TopicPartition{Topic: topic, P: 0}, 10, []string{"c1"})
	var fe *FencedError
	if !errors.As(err, &fe) || fe.Token != 10 || fe.Newest != 11 {
		t.Fatalf("handover with a stale token: %v, want a *FencedError at 11", err)
	}
	r, err := s.do(ctx, cmd{"ZCARD", []any{sk}}, cmd{"ZSCORE", []any{sk, keys.Gave("c1")}})
	if err != nil || r[0] != int64(1) || r[1] != nil {
		t.Fatalf("scheduled after the refused handover: %v, %v; want the fence alone", r, err)
	}
	checkFence(t, s, topic, 11)
	take, err := s.TakeOver(ctx, TopicPartition{Topic: topic, P: 0}, 12)
	if err != nil || take.Previous != 11 || take.Graceful {
		t.Errorf("takeover after the refused handover: %+v, %v; want previous 11, not graceful", take, err)
	}
}

// TestGivers checks the watch of the givers: alive while every one is a
// member whose heartbeat (or, leaving, whose announced end) is still
// ahead, not once one is missing or expired; and the partition's number
// of in-flight messages either way.
func TestGivers(t *testing.T) {
	ctx := context.Background()
	s := freshStore(t)
	const topic, now = "givers", int64(1_800_000_000_000)
	if _, _, err := s.Heartbeat(ctx, lease.Beat{Topic: topic, ID: "a", NowMS: now, ExpiresMS: now + 10000, GCMS: 60000}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Heartbeat(ctx, lease.Beat{Topic: topic, ID: "b", Leaving: true, NowMS: now, ExpiresMS: now + 5000, GCMS: 60000}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.do(ctx, cmd{"ZADD", []any{keys.InFlight(s.ns, topic, 0), now, "x", now, "y", now, "z"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ids   []string
		at    int64
		alive bool
	}{
		{nil, now, true},
		{[]string{"a", "b"}, now, true},
		{[]string{"a", "b"}, now + 4999, true},
		{[]string{"a", "b"}, now + 5000, false}, // b's end came
		{[]string{"a"}, now + 9999, true},
		{[]string{"a"}, now + 10000, false}, // a's heartbeat expired
		{[]string{"a", "c"}, now, false},    // c is no member
	} {
		alive, inFlight, err := s.Givers(ctx, TopicPartition{Topic: topic, P: 0}, tc.ids, tc.at)
		if err != nil || alive != tc.alive || inFlight != 3 {
			t.Errorf("givers %v at %d: alive %v, %d in flight (%v); want %v, 3", tc.ids, tc.at, alive, inFlight, err, tc.alive)
		}
	}
}

// freshStore opens a store on a server of the test's own, without a proxy.
func freshStore(t *testing.T) *Store {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	return openTest(t, env.Backends[0])
}

// checkFence checks that the fence of partition 0 of topic holds token.
func checkFence(t *testing.T, s *Store, topic string, token int64) {
	t.Helper()
	r, err := s.do(context.Background(), cmd{"ZSCORE", []any{keys.Scheduled(s.ns, topic, 0), keys.Fence}})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := redis.Float64(r[0], nil); err != nil || int64(f) != -token {
		t.Errorf("fence scored %v (%v), want %d (token %d)", r[0], err, -token, token)
	}
}
