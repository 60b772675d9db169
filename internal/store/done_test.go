package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// TestDoneCodec checks that a Done and a record with a window encode
// and decode to themselves, and that no record reads as a Done.
func TestDoneCodec(t *testing.T) {
	d := Done{Finished: 1_800_000_000_123, Until: 1_800_086_400_123}
	got, ok := DecodeDone(d.Encode())
	if !ok || got != d {
		t.Fatalf("Done %+v came back as %+v, %v", d, got, ok)
	}
	if _, err := DecodeRecord(d.Encode()); !errors.Is(err, ErrDoneRecord) {
		t.Errorf("DecodeRecord of a Done: %v, want ErrDoneRecord", err)
	}
	if decodeOne(d.Encode()) != nil {
		t.Error("decodeOne of a Done is not nil (no message)")
	}
	for _, r := range []Record{
		{Due: 5, Created: 1, Updated: 2, UniqueFor: 86_400_000, Body: []byte("b")},
		{Due: 5, Created: 1, Updated: 2, First: 3, UniqueFor: 1, Trace: "00-x", Body: []byte("0123456789abcd")},
		{Due: 1, Created: 1, Updated: 1, Body: make([]byte, doneLen-4)},
	} {
		enc := r.Encode()
		if _, ok := DecodeDone(enc); ok {
			t.Errorf("record %+v reads as a Done", r)
		}
		back, err := DecodeRecord(enc)
		if err != nil || back.UniqueFor != r.UniqueFor || back.Trace != r.Trace || string(back.Body) != string(r.Body) {
			t.Errorf("record %+v came back as %+v, %v", r, back, err)
		}
	}
}

// TestDones follows an id through a uniqueness window at the store's
// seam: an ack with KeepFor leaves a Done (and an ack without one
// removes the record as before); within the window every send of the id
// is refused as finished, whatever its policy and path, and leaves no
// index entry; Get reads it; after the window a send creates the
// message over it, and the reconciler removes the Dones whose window
// ended, indexing none.
func TestDones(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const now = int64(1_800_000_000_000)
	tp := TopicPartition{Topic: "t", P: 0}
	mk, sk := keys.Records(s.ns, "t", 0), keys.Scheduled(s.ns, "t", 0)
	rec := func(created int64, body string) *Record {
		return &Record{Due: created + 1000, Created: created, Updated: created, UniqueFor: 60_000, Body: []byte(body)}
	}
	ids := []string{"a", "b", "c", "plain"}
	var msgs []NewMessage
	for _, id := range ids {
		msgs = append(msgs, NewMessage{ID: id, Record: rec(now, id)})
	}
	msgs[3].Record.UniqueFor = 0
	if errs, err := s.Add(ctx, tp, msgs); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("add: %v %v", errs, err)
	}
	var acks []Acked
	for _, m := range msgs {
		acks = append(acks, Acked{ID: m.ID, Header: m.Record.Header(), KeepFor: m.Record.UniqueFor})
	}
	if _, err := s.do(ctx, cmd{"ZREM", []any{sk, "a", "b", "c", "plain"}}); err != nil { // claimed
		t.Fatal(err)
	}
	if kept, err := s.Ack(ctx, tp, acks, now+2000); err != nil || kept != 0 {
		t.Fatalf("ack: kept %d, %v", kept, err)
	}
	r, err := s.do(ctx, cmd{"HMGET", []any{mk, "a", "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := redis.ByteSlices(r[0], nil)
	if d, ok := DecodeDone(vals[0]); !ok || d != (Done{Finished: now + 2000, Until: now + 62_000}) {
		t.Errorf("after an ack with a window: %x, want a Done finished at the ack, until a minute later", vals[0])
	}
	if vals[1] != nil {
		t.Errorf("after an ack without a window the record is still there: %x", vals[1])
	}
	f, err := s.Get(ctx, tp, "a")
	if err != nil || f.State != StateDone || f.Done.Finished != now+2000 || f.Done.Until != now+62_000 {
		t.Errorf("get a finished id: %+v, %v", f, err)
	}

	// Within the window: refused on every path.
	within := now + 30_000
	for _, g := range []Group{
		{Topic: "t", P: 0, Msgs: []NewMessage{{ID: "a", Record: rec(within, "plain check")}}},
		{Topic: "t", P: 0, Msgs: []NewMessage{{ID: "a", Record: rec(within, "x")}, {ID: "b", Record: rec(within, "y")}, {ID: "new1", Record: rec(within, "z")}}},
		{Topic: "t", P: 0, Ahead: true, Msgs: []NewMessage{{ID: "c", Record: rec(within, "ahead")}, {ID: "new2", Record: rec(within, "ahead")}}},
	} {
		errs, err := s.AddMany(ctx, []Group{g})
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range g.Msgs {
			var fe *FinishedError
			isNew := strings.HasPrefix(m.ID, "new")
			switch {
			case isNew && errs[0][i] != nil:
				t.Errorf("add of new id %s beside finished ones: %v", m.ID, errs[0][i])
			case !isNew && (!errors.As(errs[0][i], &fe) || !errors.Is(errs[0][i], ErrDuplicate) || fe.Done.Until != now+62_000):
				t.Errorf("add of finished id %s within its window: %v, want a FinishedError", m.ID, errs[0][i])
			}
		}
	}
	res, err := s.Puts(ctx, []PutGroup{{Topic: "t", P: 0, Puts: []Put{
		{ID: "a", Policy: PolicyReplace, Due: within + 5000, Body: []byte("r")},
		{ID: "b", Policy: PolicyDebounce, Due: within + 5000, MaxWait: 10_000, Body: []byte("d")},
	}}, {Topic: "t", P: 0, Ahead: true, Puts: []Put{{ID: "c", Policy: PolicyReplace, Due: within + 5000, Body: []byte("r")}}}}, within)
	if err != nil {
		t.Fatal(err)
	}
	for g, rs := range res {
		for _, r := range rs {
			if r.Outcome != PutDone || r.Due != now+2000 {
				t.Errorf("put of a finished id within its window (group %d): %+v, want PutDone at its finish", g, r)
			}
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		if sc, err := s.do(ctx, cmd{"ZSCORE", []any{sk, id}}); err != nil || sc[0] != nil {
			t.Errorf("refused sends of %s left an index entry: %v, %v", id, sc, err)
		}
	}

	// After the window: a send creates the message over the Done.
	after := now + 62_000
	errs, err := s.AddMany(ctx, []Group{
		{Topic: "t", P: 0, Msgs: []NewMessage{{ID: "a", Record: rec(after, "again")}}},
		{Topic: "t", P: 0, Ahead: true, Msgs: []NewMessage{{ID: "b", Record: rec(after, "again")}}},
	})
	if err != nil || errs[0][0] != nil || errs[1][0] != nil {
		t.Fatalf("add after the window: %v, %v", errs, err)
	}
	res, err = s.Puts(ctx, []PutGroup{{Topic: "t", P: 0, Puts: []Put{{ID: "c", Policy: PolicyReplace, Due: after + 1000, Body: []byte("again")}}}}, after)
	if err != nil || res[0][0].Outcome != PutCreated {
		t.Fatalf("put after the window: %+v, %v", res, err)
	}
	for _, id := range []string{"a", "b", "c"} {
		f, err := s.Get(ctx, tp, id)
		if err != nil || f.State != StateScheduled || !f.Indexed || string(f.Record.Body) != "again" {
			t.Errorf("%s sent again after its window: %+v, %v", id, f, err)
		}
	}

	// Exists, the look into a partition a change moves ids out of: a
	// Done within its window is there, and says so; one past it is not.
	if _, err := s.do(ctx, cmd{"HSET", []any{mk, "ended", Done{Finished: now, Until: after - 1}.Encode()}},
		cmd{"HSET", []any{mk, "kept", Done{Finished: now, Until: after + 1}.Encode()}}); err != nil {
		t.Fatal(err)
	}
	pr, err := s.Exists(ctx, []Lookup{{TopicPartition: tp, IDs: []string{"ended", "kept", "a", "none"}}}, after)
	if err != nil {
		t.Fatal(err)
	}
	if got := pr[0]; got[0].There || !got[1].There || got[1].Done == nil || got[1].Done.Until != after+1 || !got[2].There || got[2].Done != nil || got[3].There {
		t.Errorf("Exists of an ended Done, a kept one, a message and nothing: %+v", got)
	}

	// The reconciler removes Dones whose window ended, and indexes none.
	for id, until := range map[string]int64{"old": after - 1, "live": after + 60_000} {
		if _, err := s.do(ctx, cmd{"HSET", []any{mk, id, Done{Finished: now, Until: until}.Encode()}}); err != nil {
			t.Fatal(err)
		}
	}
	cursor := "0"
	for {
		next, repaired, err := s.Reconcile(ctx, tp, cursor, 100, nil, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(repaired) > 0 {
			t.Errorf("the reconciler indexed %v", repaired)
		}
		if cursor = next; cursor == "0" {
			break
		}
	}
	r, err = s.do(ctx, cmd{"HMGET", []any{mk, "old", "live"}}, cmd{"ZSCORE", []any{sk, "live"}})
	if err != nil {
		t.Fatal(err)
	}
	vals, _ = redis.ByteSlices(r[0], nil)
	if vals[0] != nil || vals[1] == nil || r[1] != nil {
		t.Errorf("after a reconcile: ended Done %x, live Done %x (want it kept), its entry %v (want none)", vals[0], vals[1], r[1])
	}
}

// TestDoneGoneMeanwhile: the Done that refused a send is removed (by the
// reconciler, its window over) before the send reads the refused field,
// or between that read and the write over it: either way the id is free,
// and the send creates its message.
func TestDoneGoneMeanwhile(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	plain := openTest(t, env.Backends[0])
	ctx := context.Background()
	const now = int64(1_800_000_000_000)
	mk := keys.Records(plain.ns, "t", 0)
	for _, at := range []string{"HMGET", "EVALSHA"} { // the read of the refused field; the write over it
		var once bool
		s, err := Open(Options{Conn: Conn{Addr: env.Backends[0]}, Hook: func(name string, args []any) error {
			if name == at && !once && len(args) > 0 && (args[0] == mk || len(args) > 2 && args[2] == mk) {
				once = true
				if _, err := plain.do(ctx, cmd{"HDEL", []any{mk, "x"}}); err != nil {
					t.Error(err)
				}
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plain.do(ctx, cmd{"HSET", []any{mk, "x", Done{Finished: now - 2000, Until: now - 1000}.Encode()}}); err != nil {
			t.Fatal(err)
		}
		rec := &Record{Due: now + 1000, Created: now, Updated: now, Body: []byte(at)}
		errs, err := s.AddMany(ctx, []Group{{Topic: "t", P: 0, Msgs: []NewMessage{{ID: "x", Record: rec}}}})
		s.Close()
		if err != nil || errs[0][0] != nil || !once {
			t.Fatalf("send while the Done goes (before the %s): %v, %v (hook ran: %v)", at, errs, err, once)
		}
		f, err := plain.Get(ctx, TopicPartition{Topic: "t", P: 0}, "x")
		if err != nil || f.State != StateScheduled || !f.Indexed || string(f.Record.Body) != at {
			t.Errorf("after the send (the Done gone before the %s): %+v, %v", at, f, err)
		}
		if _, err := plain.do(ctx, cmd{"DEL", []any{mk}}, cmd{"DEL", []any{keys.Scheduled(plain.ns, "t", 0)}}); err != nil {
			t.Fatal(err)
		}
	}
}
