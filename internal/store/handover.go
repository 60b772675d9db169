package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// A partition changes owner in one of two ways, and the new owner must
// tell them apart at once:
//
//   - after a fault (the old owner died, paused or lost its Redis), every
//     message still in flight was claimed by an owner that will never
//     finish it: the new owner returns them all to scheduled as its first
//     act (see the poller);
//   - after a graceful handover the giver returned what it held, and its
//     in-flight messages are deliveries still running there, which it will
//     ack. The giver says so with a mark in the scheduled ZSET (keys.Gave
//     of its id, scored minus its token), written only while its token is
//     the fence's; the new owner leaves those messages alone for as long
//     as the consumers the mark names stay members of the topic.
//
// A mark counts only when its token is the fence's previous one: a mark
// left by an older owner means a fault happened since.

// The new owner runs takeOverScript, the giver handOverScript (see
// scripts.go).

// Takeover is what a new owner learns when it raises the fence.
type Takeover struct {
	// Previous is the fence's token before: 0 for a partition never owned.
	Previous int64
	// Graceful is true when the previous owner handed the partition over:
	// its in-flight messages are deliveries still running at Givers.
	Graceful bool
	// Givers are the consumers whose deliveries may still be running.
	Givers []string
}

// TakeOver raises partition tp's fence to token and reads how the previous
// owner left. A *FencedError means a newer token holds the fence.
func (s *Store) TakeOver(ctx context.Context, tp TopicPartition, token int64) (Takeover, error) {
	r, err := s.script(ctx, takeOverScript, keys.Scheduled(s.ns, tp.Topic, tp.P), keys.Fence, token, keys.GavePrefix)
	if err != nil {
		return Takeover{}, fmt.Errorf("take over partition %d: %w", tp.P, err)
	}
	vals, err := redis.Strings(r, nil)
	if err != nil || len(vals) < 2 {
		return Takeover{}, fmt.Errorf("take over partition %d: bad reply %v (%v)", tp.P, r, err)
	}
	after, _ := strconv.ParseInt(vals[0], 10, 64)
	prev, _ := strconv.ParseInt(vals[1], 10, 64)
	if after != token {
		return Takeover{}, &FencedError{Token: token, Newest: after}
	}
	return Takeover{Previous: prev, Graceful: len(vals) > 2, Givers: vals[2:]}, nil
}

// HandOver marks partition tp as given up gracefully by the owner holding
// token, naming the consumers whose deliveries of it may still be running
// (the giver, and the givers it was still watching). A *FencedError means
// the token is no longer the fence's: nothing was written.
func (s *Store) HandOver(ctx context.Context, tp TopicPartition, token int64, givers []string) error {
	args := []any{keys.Scheduled(s.ns, tp.Topic, tp.P), keys.Fence, token}
	for _, g := range givers {
		args = append(args, keys.Gave(g))
	}
	if _, err := s.script(ctx, handOverScript, args...); err != nil {
		if fe, ok := fencedErr(err, token); ok {
			return fe
		}
		return fmt.Errorf("hand over partition %d: %w", tp.P, err)
	}
	return nil
}

// Givers reports whether every consumer of ids is still a member of the
// topic (leaving ones count: their deliveries still run), and how many
// messages partition tp has in flight, in one round trip.
func (s *Store) Givers(ctx context.Context, tp TopicPartition, ids []string, nowMS int64) (alive bool, inFlight int, err error) {
	mk := keys.Members(s.ns, tp.Topic)
	cmds := make([]cmd, 0, len(ids)+1)
	for _, id := range ids {
		cmds = append(cmds, cmd{"ZSCORE", []any{mk, id}})
	}
	cmds = append(cmds, cmd{"ZCARD", []any{keys.InFlight(s.ns, tp.Topic, tp.P)}})
	r, err := s.do(ctx, cmds...)
	if err != nil {
		return false, 0, fmt.Errorf("givers of partition %d: %w", tp.P, err)
	}
	alive = true
	for i := range ids {
		if r[i] == nil {
			alive = false
			continue
		}
		exp, _ := redis.Float64(r[i], nil)
		if exp < 0 {
			exp = -exp // leaving: alive until then
		}
		if int64(exp) <= nowMS {
			alive = false
		}
	}
	inFlight, _ = redis.Int(r[len(ids)], nil)
	return alive, inFlight, nil
}

// InFlightIDs returns up to count in-flight ids of partition tp in
// deadline order, from rank offset on.
func (s *Store) InFlightIDs(ctx context.Context, tp TopicPartition, offset, count int) ([]string, error) {
	r, err := s.do(ctx, cmd{"ZRANGE", []any{keys.InFlight(s.ns, tp.Topic, tp.P), offset, offset + count - 1}})
	if err != nil {
		return nil, fmt.Errorf("in flight in partition %d: %w", tp.P, err)
	}
	ids, _ := redis.Strings(r[0], nil)
	return ids, nil
}
