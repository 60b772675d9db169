package store

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// TestAck acks two started deliveries: one whose record is still the one
// claimed, and one a send replaced while it ran. The first goes for good
// (record, running mark and in-flight entry); the replaced one keeps its
// newer record, loses its mark and entry, and goes back to scheduled at
// its own due, which Ack counts as kept. The claim marks both with its
// token, and the send sets the replaced one's mark to RunningReplaced.
func TestAck(t *testing.T) {
	ctx := context.Background()
	const topic, token, now, deadline = "ack", 7, int64(1_800_000_000_000), int64(1_800_000_040_000)
	s := dueMessages(t, topic, token, now-10, "done", "sent")
	recs := claimDue(t, s, topic, token, now, now, func(int64) int64 { return deadline })
	for _, id := range []string{"done", "sent"} {
		if m := markOf(t, s, topic, id); m != "7" {
			t.Fatalf("%s's running mark after the claim: %q, want the token", id, m)
		}
	}
	send(t, s, topic, now+1, Put{ID: "sent", Policy: PolicyReplace, Due: now + 5000, Body: []byte("newer")}, PutReplaced)
	if m := markOf(t, s, topic, "sent"); m != keys.RunningReplaced {
		t.Fatalf("sent's running mark after the send: %q, want %q", m, keys.RunningReplaced)
	}
	// The send's index entry is taken away, as if its second round trip
	// had been lost: only the ack can put the message back.
	if _, err := s.do(ctx, cmd{"ZREM", []any{keys.Scheduled(s.ns, topic, 0), "sent"}}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Ack(ctx, TopicPartition{Topic: topic, P: 0}, []Acked{{ID: "done", Header: recs["done"].Header(), Token: token}, {ID: "sent", Header: recs["sent"].Header(), Token: token}}, 0)
	if err != nil || kept != 1 {
		t.Fatalf("ack: kept %d, %v; want 1", kept, err)
	}
	if st := stateOf(t, s, topic, "done"); !st.nowhere() {
		t.Errorf("done after the ack: %+v, want nothing left", st)
	}
	st := stateOf(t, s, topic, "sent")
	if st.sched != now+5000 || st.flight != -1 || st.dead != -1 || st.running {
		t.Errorf("sent after the ack: %+v, want scheduled at %d alone, no mark", st, now+5000)
	}
	if rec := st.record(t); rec == nil || string(rec.Body) != "newer" {
		t.Errorf("sent after the ack: record %+v, want the newer one", rec)
	}
}

// TestAckOtherOwner acks a delivery whose message another owner started
// again: its first owner (token 7) stopped while it ran, a send replaced
// the record, and the next owner (token 8) claimed and started the newer
// one. The late ack of the first owner finds the mark of another token:
// it compares the record with the one it delivered, and leaves the newer
// one and the new owner's mark: a Delete meanwhile is told the delivery
// runs (and removes the record). The new owner's ack then finds nothing
// to remove, and fails on none.
func TestAckOtherOwner(t *testing.T) {
	ctx := context.Background()
	const topic, now = "ackother", int64(1_800_000_000_000)
	deadline := func(int64) int64 { return now + 40000 }
	s := dueMessages(t, topic, 7, now-10, "m")
	first := claimDue(t, s, topic, 7, now, now, deadline)["m"]
	send(t, s, topic, now+1, Put{ID: "m", Policy: PolicyReplace, Due: now + 2, Body: []byte("newer")}, PutReplaced)
	if err := s.RaiseFence(ctx, TopicPartition{Topic: topic, P: 0}, 8); err != nil {
		t.Fatal(err)
	}
	// The first owner's in-flight entry is the one its stop left: the
	// next owner's claim (not shared) keeps it and takes the message.
	second := claimDue(t, s, topic, 8, now+2, now+2, deadline)["m"]
	if second == nil || string(second.Body) != "newer" {
		t.Fatalf("second claim: %+v, want the newer record", second)
	}
	if m := markOf(t, s, topic, "m"); m != "8" {
		t.Fatalf("mark after the second start: %q, want the second token", m)
	}
	tp := TopicPartition{Topic: topic, P: 0}
	if _, err := s.Ack(ctx, tp, []Acked{{ID: "m", Header: first.Header(), Token: 7}}, 0); err != nil {
		t.Fatal(err)
	}
	if rec := stateOf(t, s, topic, "m").record(t); rec == nil || string(rec.Body) != "newer" {
		t.Fatalf("after the first owner's ack: record %+v, want the newer one", rec)
	}
	if m := markOf(t, s, topic, "m"); m != "8" {
		t.Fatalf("mark after the first owner's ack: %q, want the second owner's", m)
	}
	if err := s.Delete(ctx, tp, "m"); !errors.Is(err, ErrRunning) {
		t.Fatalf("delete while the second owner's delivery runs: %v, want ErrRunning", err)
	}
	if _, err := s.Ack(ctx, tp, []Acked{{ID: "m", Header: second.Header(), Token: 8}}, 0); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, s, topic, "m"); st.rec != nil || st.running {
		t.Errorf("after the second owner's ack: %+v, want no record and no mark", st)
	}
}

// TestAckOtherOwnerSameRecord: a first owner (token 7) started a
// message, and a next owner (token 8) returned it and started the same
// record again. The first owner's late ack removes the record (it was
// delivered) and the next owner's mark with it: a message sent anew
// under the id must not meet a mark that the next owner's ack would
// take for its own, and remove unread.
func TestAckOtherOwnerSameRecord(t *testing.T) {
	ctx := context.Background()
	const topic, now = "ackothersame", int64(1_800_000_000_000)
	deadline := func(int64) int64 { return now + 40000 }
	s := dueMessages(t, topic, 7, now-10, "m")
	first := claimDue(t, s, topic, 7, now, now, deadline)["m"]
	tp := TopicPartition{Topic: topic, P: 0}
	if err := s.RaiseFence(ctx, tp, 8); err != nil {
		t.Fatal(err)
	}
	// The next owner's takeover returns the message to scheduled.
	if _, err := s.Moves(ctx, tp, []Move{{ID: "m", Score: now - 10}}); err != nil {
		t.Fatal(err)
	}
	second := claimDue(t, s, topic, 8, now, now, deadline)["m"]
	if second == nil || !bytes.Equal(second.Header(), first.Header()) {
		t.Fatalf("second claim: %+v, want the same record", second)
	}
	if _, err := s.Ack(ctx, tp, []Acked{{ID: "m", Header: first.Header(), Token: 7}}, 0); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, s, topic, "m"); st.rec != nil || st.running {
		t.Fatalf("after the first owner's late ack: %+v, want no record and no mark", st)
	}
	anew := &Record{Due: now + 5000, Created: now + 3, Updated: now + 3, Body: []byte("anew")}
	if _, err := s.Add(ctx, tp, []NewMessage{{ID: "m", Record: anew}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack(ctx, tp, []Acked{{ID: "m", Header: second.Header(), Token: 8}}, 0); err != nil {
		t.Fatal(err)
	}
	if rec := stateOf(t, s, topic, "m").record(t); rec == nil || string(rec.Body) != "anew" {
		t.Errorf("after the next owner's ack: record %+v, want the one sent anew", rec)
	}
}

// markOf returns the running mark of id in partition 0 of topic, "" for
// none.
func markOf(t *testing.T, s *Store, topic, id string) string {
	t.Helper()
	r, err := s.do(context.Background(), cmd{"HGET", []any{keys.Records(s.ns, topic, 0), keys.RunningField(id)}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := redis.String(r[0], nil)
	return m
}

// TestMoves returns five started deliveries: a retry, written over the
// record it was claimed with and scheduled at its score; a retry and a
// death of messages a send replaced meanwhile, which keep the newer
// record and go back to scheduled at its due (not at the move's score,
// not to dead); a death, in the dead ZSET with its record; and a retry of
// a message deleted meanwhile, counted gone and not brought back. None
// is left in flight or marked running.
func TestMoves(t *testing.T) {
	ctx := context.Background()
	const topic, token, now, deadline = "moves", 7, int64(1_800_000_000_000), int64(1_800_000_040_000)
	ids := []string{"retry", "replaced", "dies", "diesReplaced", "gone"}
	s := dueMessages(t, topic, token, now-10, ids...)
	recs := claimDue(t, s, topic, token, now, now, func(int64) int64 { return deadline })
	send(t, s, topic, now+1, Put{ID: "replaced", Policy: PolicyReplace, Due: now + 50000, Body: []byte("newer")}, PutReplaced)
	send(t, s, topic, now+1, Put{ID: "diesReplaced", Policy: PolicyReplace, Due: now + 60000, Body: []byte("newer")}, PutReplaced)
	if err := s.Delete(ctx, TopicPartition{Topic: topic, P: 0}, "gone"); !errors.Is(err, ErrRunning) {
		t.Fatalf("delete of a started delivery: %v, want ErrRunning", err)
	}
	failed := func(id string, attempts int) *Record {
		r := *recs[id]
		r.Attempts, r.LastError, r.Updated = attempts, "boom", now+2
		return &r
	}
	retried, died := failed("retry", 1), failed("dies", 3)
	moves := []Move{
		{ID: "retry", Score: now + 30000, Record: retried, Was: recs["retry"].Header()},
		{ID: "replaced", Score: now + 1000, Record: failed("replaced", 1), Was: recs["replaced"].Header()},
		{ID: "dies", Dead: true, Score: now + 2, Record: died, Was: recs["dies"].Header()},
		{ID: "diesReplaced", Dead: true, Score: now + 2, Record: failed("diesReplaced", 3), Was: recs["diesReplaced"].Header()},
		{ID: "gone", Score: now + 30000, Record: failed("gone", 1), Was: recs["gone"].Header()},
	}
	gone, err := s.Moves(ctx, TopicPartition{Topic: topic, P: 0}, moves)
	if err != nil || gone != 1 {
		t.Fatalf("moves: gone %d, %v; want 1", gone, err)
	}
	for _, tc := range []struct {
		id          string
		sched, dead int64
		rec         []byte // nil: the newer record, body "newer"
		gone        bool
	}{
		{id: "retry", sched: now + 30000, dead: -1, rec: retried.Encode()},
		{id: "replaced", sched: now + 50000, dead: -1},
		{id: "dies", sched: -1, dead: now + 2, rec: died.Encode()},
		{id: "diesReplaced", sched: now + 60000, dead: -1},
		{id: "gone", sched: -1, dead: -1, gone: true},
	} {
		st := stateOf(t, s, topic, tc.id)
		if st.sched != tc.sched || st.dead != tc.dead || st.flight != -1 || st.running {
			t.Errorf("%s: %+v, want scheduled at %d, dead at %d, not in flight, no mark", tc.id, st, tc.sched, tc.dead)
		}
		switch {
		case tc.gone:
			if st.rec != nil {
				t.Errorf("%s: deleted meanwhile, its record is back", tc.id)
			}
		case tc.rec != nil:
			if !bytes.Equal(st.rec, tc.rec) {
				t.Errorf("%s: record %x, want the move's %x", tc.id, st.rec, tc.rec)
			}
		default:
			if rec := st.record(t); rec == nil || string(rec.Body) != "newer" || rec.Attempts != 0 {
				t.Errorf("%s: record %+v, want the newer one, untouched", tc.id, rec)
			}
		}
	}
}

// TestDrop drops two in-flight messages, one a tombstone (a delete that
// removed the record but not yet its index entries): their entries and
// running marks go, and the record there is stays, in no index.
func TestDrop(t *testing.T) {
	ctx := context.Background()
	const topic, token, now, deadline = "drop", 7, int64(1_800_000_000_000), int64(1_800_000_040_000)
	s := dueMessages(t, topic, token, now-10, "tomb", "kept")
	recs := claimDue(t, s, topic, token, now, now, func(int64) int64 { return deadline })
	mk := keys.Records(s.ns, topic, 0)
	if _, err := s.do(ctx, cmd{"HDEL", []any{mk, "tomb", keys.RunningField("tomb")}}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, s, topic, "kept"); st.flight != deadline || !st.running {
		t.Fatalf("kept before the drop: %+v, want in flight and marked", st)
	}
	if err := s.Drop(ctx, TopicPartition{Topic: topic, P: 0}, []string{"tomb", "kept"}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, s, topic, "tomb"); !st.nowhere() {
		t.Errorf("tomb after the drop: %+v, want nothing left", st)
	}
	st := stateOf(t, s, topic, "kept")
	if st.sched != -1 || st.flight != -1 || st.dead != -1 || st.running || !bytes.Equal(st.rec, recs["kept"].Encode()) {
		t.Errorf("kept after the drop: %+v, want its record alone, as claimed", st)
	}
}

// TestAckAndMoveUnreadableReplacement: a record rewritten during its
// delivery into bytes no header can be read from does not fail the ack
// or the move of the batch it is in: the other messages are acked and
// moved, and the unreadable record stays where it is, in no index, for
// the reconciler (whose claim sends it to dead).
func TestAckAndMoveUnreadableReplacement(t *testing.T) {
	ctx := context.Background()
	const topic, token, now, deadline = "unreadable", 7, int64(1_800_000_000_000), int64(1_800_000_040_000)
	s := dueMessages(t, topic, token, now-10, "ok", "bad", "retry", "badRetry")
	recs := claimDue(t, s, topic, token, now, now, func(int64) int64 { return deadline })
	mk := keys.Records(s.ns, topic, 0)
	if _, err := s.do(ctx, cmd{"HMSET", []any{mk, "bad", "\x02x", "badRetry", "\x02x"}}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Ack(ctx, TopicPartition{Topic: topic, P: 0}, []Acked{{ID: "ok", Header: recs["ok"].Header()}, {ID: "bad", Header: recs["bad"].Header()}}, 0)
	if err != nil || kept != 0 {
		t.Fatalf("ack beside an unreadable replacement: kept %d, %v; want 0, nil", kept, err)
	}
	if st := stateOf(t, s, topic, "ok"); !st.nowhere() {
		t.Errorf("ok after the ack: %+v, want nothing left", st)
	}
	retried := *recs["retry"]
	retried.Attempts = 1
	gone, err := s.Moves(ctx, TopicPartition{Topic: topic, P: 0}, []Move{
		{ID: "retry", Score: now + 30000, Record: &retried, Was: recs["retry"].Header()},
		{ID: "badRetry", Score: now + 30000, Record: &retried, Was: recs["badRetry"].Header()},
	})
	if err != nil {
		t.Fatalf("moves beside an unreadable replacement: %v", err)
	}
	if st := stateOf(t, s, topic, "retry"); st.sched != now+30000 || st.flight != -1 || st.running {
		t.Errorf("retry after the move: %+v, want scheduled at %d", st, now+30000)
	}
	for _, id := range []string{"bad", "badRetry"} {
		st := stateOf(t, s, topic, id)
		if st.sched != -1 || st.flight != -1 || st.dead != -1 || st.running || string(st.rec) != "\x02x" {
			t.Errorf("%s after its outcome: %+v, want the unreadable record alone, in no index", id, st)
		}
	}
	if gone != 1 {
		t.Errorf("moves: gone %d, want 1 (the unreadable replacement)", gone)
	}
}

// msgState is where a message of partition 0 is: its scores in the
// scheduled, in-flight and dead ZSETs (-1 when it is not a member), its
// stored record (nil when none) and whether its running mark is set.
type msgState struct {
	sched, flight, dead int64
	rec                 []byte
	running             bool
}

// stateOf reads where id is in partition 0 of topic, in one round trip.
func stateOf(t *testing.T, s *Store, topic, id string) msgState {
	t.Helper()
	mk := keys.Records(s.ns, topic, 0)
	r, err := s.do(context.Background(),
		cmd{"ZSCORE", []any{keys.Scheduled(s.ns, topic, 0), id}},
		cmd{"ZSCORE", []any{keys.InFlight(s.ns, topic, 0), id}},
		cmd{"ZSCORE", []any{keys.Dead(s.ns, topic, 0), id}},
		cmd{"HGET", []any{mk, id}},
		cmd{"HGET", []any{mk, keys.RunningField(id)}})
	if err != nil {
		t.Fatalf("state of %s: %v", id, err)
	}
	score := func(v any) int64 {
		if v == nil {
			return -1
		}
		f, err := redis.Float64(v, nil)
		if err != nil {
			t.Fatalf("state of %s: score %v: %v", id, v, err)
		}
		return int64(f)
	}
	st := msgState{sched: score(r[0]), flight: score(r[1]), dead: score(r[2]), running: r[4] != nil}
	if r[3] != nil {
		st.rec, _ = redis.Bytes(r[3], nil)
	}
	return st
}

// nowhere reports whether nothing is left of the message: no index
// entry, no record, no running mark.
func (st msgState) nowhere() bool {
	return st.sched == -1 && st.flight == -1 && st.dead == -1 && st.rec == nil && !st.running
}

// record decodes the stored record of st, nil when there is none.
func (st msgState) record(t *testing.T) *Record {
	t.Helper()
	if st.rec == nil {
		return nil
	}
	rec, err := DecodeRecord(st.rec)
	if err != nil {
		t.Fatalf("stored record %x: %v", st.rec, err)
	}
	return rec
}

// claimDue claims every message of partition 0 of topic due by maxDue
// under token, starting those due by startBy, each in flight at
// deadline(due), and returns their records as claimed, by id.
func claimDue(t *testing.T, s *Store, topic string, token, maxDue, startBy int64, deadline func(int64) int64) map[string]*Record {
	t.Helper()
	claimed, recs, err := s.ClaimBegin(context.Background(), TopicPartition{Topic: topic, P: 0}, Claim{Token: token, MaxDueMS: maxDue, StartByMS: startBy, Limit: 100, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*Record, len(claimed))
	for i, c := range claimed {
		if recs[i] == nil {
			t.Fatalf("claimed %s without its record", c.ID)
		}
		out[c.ID] = recs[i]
	}
	return out
}

// send sends p to partition 0 of topic at nowMS and checks its outcome.
func send(t *testing.T, s *Store, topic string, nowMS int64, p Put, want int) {
	t.Helper()
	res, err := s.Puts(context.Background(), []PutGroup{{Topic: topic, P: 0, Puts: []Put{p}}}, nowMS)
	if err != nil {
		t.Fatal(err)
	}
	if res[0][0].Outcome != want {
		t.Fatalf("send of %s: outcome %d, want %d", p.ID, res[0][0].Outcome, want)
	}
}

// TestMarksFollowRecords checks the writes that keep a running mark
// true to its record (see keys.RunningField) beyond the sends and acks
// TestAck covers: a compare-and-delete (a move's source, the reconciler's
// ended Dones) and a purge of dead messages remove the marks of the
// records they remove, and a requeue of a dead message, which rewrites
// its record, sets its mark to RunningReplaced. Each record carries a
// mark as a start by owner 7 leaves it.
func TestMarksFollowRecords(t *testing.T) {
	ctx := context.Background()
	const topic = "marks"
	ids := []string{"cas", "purged", "requeued"}
	s := dueMessages(t, topic, 7, 1000, ids...)
	mk, dk := keys.Records(s.ns, topic, 0), keys.Dead(s.ns, topic, 0)
	tp := TopicPartition{Topic: topic, P: 0}
	r, err := s.do(ctx, cmd{"HGET", []any{mk, "cas"}},
		cmd{"HMSET", []any{mk, keys.RunningField("cas"), "7", keys.RunningField("purged"), "7", keys.RunningField("requeued"), "7"}},
		cmd{"ZADD", []any{dk, 1000, "purged", 1000, "requeued"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := redis.Bytes(r[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := redis.Ints(s.script(ctx, casDeleteScript, mk, "cas", rec)); err != nil || len(n) != 1 || n[0] != 1 {
		t.Fatalf("compare-and-delete: %v, %v; want [1]", n, err)
	}
	if n, err := s.PurgeDead(ctx, tp, []string{"purged"}, 10); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1", n, err)
	}
	if n, err := s.RequeueDead(ctx, tp, []string{"requeued"}, 2000, 10); err != nil || n != 1 {
		t.Fatalf("requeue: %d, %v; want 1", n, err)
	}
	for _, id := range []string{"cas", "purged"} {
		if st := stateOf(t, s, topic, id); st.rec != nil || st.running {
			t.Errorf("%s after its removal: %+v, want no record and no mark", id, st)
		}
	}
	if m := markOf(t, s, topic, "requeued"); m != keys.RunningReplaced {
		t.Errorf("requeued's mark after its record was rewritten: %q, want %q", m, keys.RunningReplaced)
	}
}

// TestAckTwoOwners acks, in one call, deliveries two owners started (as
// acks kept after a lost lease are written beside a new owner's): each
// owner's marks hold its token, so each record goes unread, whatever
// header the ack carries.
func TestAckTwoOwners(t *testing.T) {
	ctx := context.Background()
	const topic, now = "acktwo", int64(1_800_000_000_000)
	deadline := func(int64) int64 { return now + 40000 }
	s := dueMessages(t, topic, 7, now-10, "a")
	claimDue(t, s, topic, 7, now, now, deadline)
	tp := TopicPartition{Topic: topic, P: 0}
	if err := s.RaiseFence(ctx, tp, 8); err != nil {
		t.Fatal(err)
	}
	rec := &Record{Due: now - 5, Created: now - 5, Updated: now - 5, Body: []byte("b")}
	if _, err := s.Add(ctx, tp, []NewMessage{{ID: "b", Record: rec}}); err != nil {
		t.Fatal(err)
	}
	claimDue(t, s, topic, 8, now, now, deadline)
	if m := markOf(t, s, topic, "b"); m != "8" {
		t.Fatalf("b's mark: %q, want the second owner's", m)
	}
	unread := []byte("not a header")
	if _, err := s.Ack(ctx, tp, []Acked{{ID: "a", Header: unread, Token: 7}, {ID: "b", Header: unread, Token: 8}}, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if st := stateOf(t, s, topic, id); !st.nowhere() {
			t.Errorf("%s after the ack: %+v, want nothing left", id, st)
		}
	}
}
