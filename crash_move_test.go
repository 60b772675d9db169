package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
)

// The moves of a change of the partition count, crashed before each of
// their commands in turn (see crash_test.go for the hook): a scheduled
// message, a dead one and two held by a segment, each due in an hour, move
// from a topic of 2 partitions to one of 4. After the crash each message
// is found where a client looks during the change, with its due and
// state; then the next owner's sweep (the same pass, without a fault)
// leaves each in its new partition only, once, with its index entry, and
// the change can end.
func TestCrashMove(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		for _, kind := range []string{"scheduled", "dead", "segment"} {
			n := 0
			for k := 0; k == 0 || k <= n; k++ {
				topic := fmt.Sprintf("crash-move-%s-%s-%d", portOf(t, addr), kind, k)
				c := newClient(t, addr, Options{Partitions: 2})
				ids := moveSetup(t, c, topic, kind)
				p := partition.For(ids[0], 2)
				tok := takeFence(t, c.store, topic, p)
				l, err := c.store.BeginChange(ctx, topic, 4, time.Now().Add(-time.Minute).UnixMilli())
				if err != nil {
					t.Fatal(err)
				}
				// The client reads the layout again (within a second, before
				// any move, in a running system).
				c.mu.Lock()
				delete(c.topics, topic)
				c.mu.Unlock()
				horizon := time.Now().Add(30 * time.Second).UnixMilli()
				h := &crashHook{failAt: k}
				fs, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}, Hook: h.hook})
				if err != nil {
					t.Fatal(err)
				}
				// Sweeps until one finds nothing left (a segment takes two:
				// turned into records, then moved), as the owner runs them.
				sweep := func(s *store.Store) (moved int, err error) {
					for range 3 {
						cursor, left := "0", 0
						for {
							pass, err := s.MoveScan(ctx, store.TopicPartition{Topic: topic, P: p}, store.MoveSweep{Layout: l, Token: tok, Cursor: cursor, Count: 256, HorizonMS: horizon})
							moved, left = moved+pass.Moved, left+pass.Left
							if err != nil {
								return moved, err
							}
							if cursor = pass.Next; cursor == "0" {
								break
							}
						}
						if left == 0 {
							break
						}
					}
					return moved, nil
				}
				_, err = sweep(fs)
				fs.Close()
				name := fmt.Sprintf("%s/k=%d", kind, k)
				if k == 0 {
					var cmds []string
					n, cmds = h.count()
					t.Logf("move %s: N=%d commands: %s", kind, n, strings.Join(cmds, " "))
					if err != nil {
						t.Fatalf("%s without a fault: %v", name, err)
					}
				} else if !errors.Is(err, portable.ErrInjected) {
					t.Errorf("%s: crashed move returned %v, want the injected fault", name, err)
				}
				// Found during the change, as it was.
				for _, id := range ids {
					in, err := c.Get(ctx, topic, id)
					if err != nil {
						t.Errorf("%s: %s after the crash: %v", name, id, err)
						continue
					}
					if want := map[bool]State{true: StateDead, false: StateScheduled}[kind == "dead"]; in.State != want {
						t.Errorf("%s: %s is %s after the crash, want %s", name, id, in.State, want)
					}
				}
				// The next sweep completes the move, twice over (I2).
				for range 2 {
					if _, err := sweep(c.store); err != nil {
						t.Fatalf("%s: sweep after the crash: %v", name, err)
					}
				}
				for _, id := range ids {
					moveCheck(t, c, name, topic, id, kind)
				}
				pass, err := c.store.MoveScan(ctx, store.TopicPartition{Topic: topic, P: p}, store.MoveSweep{Layout: l, Token: tok, Cursor: "0", Count: 256, HorizonMS: horizon})
				if err != nil || pass.Left > 0 || pass.Moved > 0 {
					t.Errorf("%s: a last sweep found %+v (%v), want nothing left", name, pass, err)
				}
			}
		}
	})
}

// moveSetup puts the messages of a move's crash case on topic, all in
// one partition of 2, due in an hour, and returns their ids, whose
// partition in 4 is another.
func moveSetup(t *testing.T, c *Client, topic, kind string) []string {
	t.Helper()
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	if kind == "segment" {
		for {
			res, err := c.SendBatch(ctx, []Message{{Topic: topic, At: at, Body: []byte("a")}, {Topic: topic, At: at, Body: []byte("b")}})
			if err != nil {
				t.Fatal(err)
			}
			a, b := res[0].ID, res[1].ID
			if a[:store.SegmentPrefixLen] != b[:store.SegmentPrefixLen] {
				t.Fatalf("generated ids %s and %s share no segment", a, b)
			}
			if partition.For(a, 4) != partition.For(a, 2) && partition.For(b, 4) != partition.For(b, 2) {
				return []string{a, b}
			}
			if err := c.store.DropTopic(ctx, topic); err != nil { // try other ids
				t.Fatal(err)
			}
			c.mu.Lock()
			delete(c.topics, topic)
			c.mu.Unlock()
		}
	}
	id := ""
	for i := 0; ; i++ {
		id = fmt.Sprintf("mv%d", i)
		if partition.For(id, 4) != partition.For(id, 2) {
			break
		}
	}
	m := Message{Topic: topic, ID: id, At: at, Body: []byte("body")}
	if kind == "dead" {
		m.At, m.MaxAttempts = time.Time{}, 1
	}
	if _, err := c.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	if kind == "dead" {
		p := partition.For(id, 2)
		tok := takeFence(t, c.store, topic, p)
		cl, recs, err := c.store.ClaimBegin(ctx, store.TopicPartition{Topic: topic, P: p}, store.Claim{Token: tok, MaxDueMS: time.Now().Add(time.Second).UnixMilli(), Limit: 1,
			Deadline: func(int64) int64 { return time.Now().Add(time.Minute).UnixMilli() }})
		if err != nil || len(cl) != 1 {
			t.Fatalf("claim %s: %v %v", id, cl, err)
		}
		r := *recs[0]
		r.Attempts, r.LastError = 1, "boom"
		if _, err := c.store.Moves(ctx, store.TopicPartition{Topic: topic, P: p}, []store.Move{{ID: id, Dead: true, Score: time.Now().UnixMilli(), Record: &r}}); err != nil {
			t.Fatal(err)
		}
	}
	return []string{id}
}

// moveCheck checks that id is in its partition of 4 only, with its
// record and one index entry of its state there.
func moveCheck(t *testing.T, c *Client, name, topic, id, kind string) {
	t.Helper()
	ctx := context.Background()
	in, err := c.Get(ctx, topic, id)
	if err != nil {
		t.Errorf("%s: %s after the move: %v", name, id, err)
		return
	}
	to, from := partition.For(id, 4), partition.For(id, 2)
	if in.Partition != to {
		t.Errorf("%s: %s in partition %d, want %d", name, id, in.Partition, to)
	}
	if _, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: from}, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("%s: %s still in its old partition %d: %v", name, id, from, err)
	}
	wantDead := kind == "dead"
	idx := keys.Scheduled(DefaultNamespace, topic, to)
	if wantDead {
		idx = keys.Dead(DefaultNamespace, topic, to)
	}
	conn, err := c.store.Pool().GetContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r, err := redis.DoContext(conn, ctx, "ZSCORE", idx, id); err != nil || r == nil {
		t.Errorf("%s: %s has no entry in %s: %v", name, id, idx, err)
	}
	if !wantDead && time.Until(in.Due) < 50*time.Minute {
		t.Errorf("%s: %s due %v after the move, want in an hour", name, id, in.Due)
	}
}

// The pass of a change cancelled under it (the cancel lands when the
// pass reads the layout before removing its sources), crashed before
// each of its commands in turn, those that undo its copies included:
// the message is found after the crash, and the reverse change's sweeps
// leave it in its old partition only, once, indexed there.
func TestCrashMoveCancelled(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		n := 0
		for k := 0; k == 0 || k <= n; k++ {
			topic := fmt.Sprintf("crash-cancel-%s-%d", portOf(t, addr), k)
			c := newClient(t, addr, Options{Partitions: 2})
			id := moveSetup(t, c, topic, "scheduled")[0]
			p, q := partition.For(id, 2), partition.For(id, 4)
			tokP, tokQ := takeFence(t, c.store, topic, p), takeFence(t, c.store, topic, q)
			l, err := c.store.BeginChange(ctx, topic, 4, time.Now().Add(-time.Minute).UnixMilli())
			if err != nil {
				t.Fatal(err)
			}
			var rev store.Layout
			var once sync.Once
			cancel := func() {
				once.Do(func() {
					var cerr error
					if rev, cerr = c.store.CancelChange(ctx, topic, l, time.Now().UnixMilli()); cerr != nil {
						t.Errorf("cancel: %v", cerr)
					}
				})
			}
			h := &crashHook{failAt: k}
			fs, err := store.Open(store.Options{Conn: store.Conn{Addr: addr}, Hook: func(cmd string, args []any) error {
				if cmd == "HMGET" && len(args) == 6 && args[0] == keys.Meta(DefaultNamespace, topic) { // the layout's fields
					cancel()
				}
				return h.hook(cmd, args)
			}})
			if err != nil {
				t.Fatal(err)
			}
			horizon := time.Now().Add(30 * time.Second).UnixMilli()
			_, err = fs.MoveScan(ctx, store.TopicPartition{Topic: topic, P: p}, store.MoveSweep{Layout: l, Token: tokP, Cursor: "0", Count: 256, HorizonMS: horizon})
			fs.Close()
			cancel()
			name := fmt.Sprintf("k=%d", k)
			if k == 0 {
				var cmds []string
				n, cmds = h.count()
				t.Logf("cancelled pass: N=%d commands: %s", n, strings.Join(cmds, " "))
				if !errors.Is(err, store.ErrChangeReplaced) {
					t.Fatalf("%s: pass without a fault: %v, want ErrChangeReplaced", name, err)
				}
			} else if !errors.Is(err, portable.ErrInjected) {
				t.Errorf("%s: crashed pass returned %v, want the injected fault", name, err)
			}
			c.mu.Lock()
			delete(c.topics, topic)
			c.mu.Unlock()
			if in, err := c.Get(ctx, topic, id); err != nil || in.State != StateScheduled {
				t.Errorf("%s: %s after the crash: %+v, %v", name, id, in, err)
			}
			// The reverse change's sweeps of q, twice over (I2).
			for range 2 {
				for range 3 {
					pass, err := c.store.MoveScan(ctx, store.TopicPartition{Topic: topic, P: q}, store.MoveSweep{Layout: rev, Token: tokQ, Cursor: "0", Count: 256, HorizonMS: horizon})
					if err != nil {
						t.Fatalf("%s: reverse sweep: %v", name, err)
					}
					if pass.Left == 0 {
						break
					}
				}
			}
			in, err := c.Get(ctx, topic, id)
			if err != nil || in.Partition != p || in.State != StateScheduled || time.Until(in.Due) < 50*time.Minute {
				t.Errorf("%s: %s after the reverse sweeps: %+v, %v; want scheduled in partition %d, due in an hour", name, id, in, err, p)
			}
			if _, err := c.store.Get(ctx, store.TopicPartition{Topic: topic, P: q}, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: %s still in partition %d: %v", name, id, q, err)
			}
		}
	})
}
