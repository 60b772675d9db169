package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// TestClaimKinds claims three due ids in one batch: one new, one with a
// stale in-flight entry (left by a claim the fence refused), and one the
// caller holds already. The new and the stale one start, at the claim's
// deadline; the held one is taken from scheduled and gets neither an
// entry nor a mark, so its own entry keeps its deadline.
func TestClaimKinds(t *testing.T) {
	ctx := context.Background()
	const topic, token, now, deadline = "kinds", 7, int64(1_800_000_000_000), int64(1_800_000_040_000)
	s := dueMessages(t, topic, token, now-10, "new", "stale", "held")
	ik, mk := keys.InFlight(s.ns, topic, 0), keys.Records(s.ns, topic, 0)
	if _, err := s.do(ctx, cmd{"ZADD", []any{ik, 5, "stale", 9, "held"}}); err != nil {
		t.Fatal(err)
	}
	claimed, recs, err := s.ClaimBegin(ctx, TopicPartition{Topic: topic, P: 0}, Claim{Token: token, MaxDueMS: now, StartByMS: now, Limit: 10,
		Deadline: func(int64) int64 { return deadline }, Held: func(id string) bool { return id == "held" }})
	if err != nil {
		t.Fatal(err)
	}
	started := map[string]bool{}
	for i, c := range claimed {
		if recs[i] == nil || string(recs[i].Body) != c.ID {
			t.Errorf("%s: record %+v", c.ID, recs[i])
		}
		started[c.ID] = c.Started
	}
	if len(claimed) != 3 || !started["new"] || !started["stale"] || started["held"] {
		t.Errorf("claimed %+v, want new and stale started, held taken and not started", claimed)
	}
	for id, want := range map[string]int64{"new": deadline, "stale": deadline, "held": 9} {
		r, err := s.do(ctx, cmd{"ZSCORE", []any{ik, id}}, cmd{"HGET", []any{mk, keys.RunningField(id)}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := redis.Int64(r[0], nil)
		marked := r[1] != nil
		if got != want || marked != (id != "held") {
			t.Errorf("%s: in flight at %d, marked %v; want %d, %v", id, got, marked, want, id != "held")
		}
	}
	r, err := s.do(ctx, cmd{"ZCARD", []any{keys.Scheduled(s.ns, topic, 0)}})
	if n, _ := redis.Int(r[0], err); n != 1 {
		t.Errorf("scheduled after the claim: %d (%v), want the fence alone", n, err)
	}
}

// TestClaimShared claims, as a loop that took the partition over from
// consumers whose deliveries may still run (Claim.Shared), an id in
// flight with a running mark (it runs at the giver, and a send replaced
// its record: skipped, its entry and mark kept as they were, so that the
// giver's ack keeps the newer record) beside one with a stale entry and
// no mark (taken, started, at the claim's deadline, marked with the
// claim's token).
func TestClaimShared(t *testing.T) {
	ctx := context.Background()
	const topic, token, now, deadline = "shared", 7, int64(1_800_000_000_000), int64(1_800_000_040_000)
	s := dueMessages(t, topic, token, now-10, "giver", "stale")
	ik, mk := keys.InFlight(s.ns, topic, 0), keys.Records(s.ns, topic, 0)
	if _, err := s.do(ctx, cmd{"ZADD", []any{ik, 5, "stale", 9, "giver"}}, cmd{"HSET", []any{mk, keys.RunningField("giver"), keys.RunningReplaced}}); err != nil {
		t.Fatal(err)
	}
	claimed, _, err := s.ClaimBegin(ctx, TopicPartition{Topic: topic, P: 0}, Claim{Token: token, MaxDueMS: now, StartByMS: now, Limit: 10,
		Deadline: func(int64) int64 { return deadline }, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != "stale" || !claimed[0].Started {
		t.Errorf("claimed %+v, want stale alone, started", claimed)
	}
	for id, want := range map[string]struct {
		deadline int64
		mark     string
	}{"giver": {9, keys.RunningReplaced}, "stale": {deadline, "7"}} {
		r, err := s.do(ctx, cmd{"ZSCORE", []any{ik, id}}, cmd{"HGET", []any{mk, keys.RunningField(id)}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := redis.Int64(r[0], nil)
		mark, _ := redis.String(r[1], nil)
		if got != want.deadline || mark != want.mark {
			t.Errorf("%s: in flight at %d, mark %q; want %d, %q", id, got, mark, want.deadline, want.mark)
		}
	}
}

// dueMessages opens a store on a server of the test's own, raises the
// fence of partition 0 of topic to token, and adds ids there, due at
// due, their bodies their ids.
func dueMessages(t *testing.T, topic string, token, due int64, ids ...string) *Store {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Backends: 1})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	if err := s.RaiseFence(ctx, TopicPartition{Topic: topic, P: 0}, token); err != nil {
		t.Fatal(err)
	}
	var msgs []NewMessage
	for _, id := range ids {
		msgs = append(msgs, NewMessage{ID: id, Record: &Record{Due: due, Created: due, Updated: due, Body: []byte(id)}})
	}
	if _, err := s.Add(ctx, TopicPartition{Topic: topic, P: 0}, msgs); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAckBatch acks more ids than the ack scripts read at once, one of
// them replaced since its claim (in the second run the scripts read):
// the others' records and marks go, the replaced one's record stays and
// is scheduled again at its own due. The acks of one owner find their
// marks and send no header (ackOwnScript), the replaced one's compared
// in a second step; those of no known owner are all compared.
func TestAckBatch(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	s := openTest(t, env.Backends[0])
	for _, token := range []int64{0, 1} {
		t.Run(fmt.Sprintf("token %d", token), func(t *testing.T) { ackBatch(t, s, "acks"+strconv.FormatInt(token, 10), token) })
	}
}

func ackBatch(t *testing.T, s *Store, topic string, token int64) {
	ctx := context.Background()
	const now, n = int64(1_800_000_000_000), 2500
	ids := make([]string, n)
	headers := make([][]byte, n)
	var msgs []NewMessage
	marks := []any{keys.Records(s.ns, topic, 0)}
	for i := range ids {
		ids[i] = "m" + strconv.Itoa(i)
		rec := &Record{Due: now, Created: now, Updated: now, Body: []byte("b")}
		headers[i] = rec.Header()
		msgs = append(msgs, NewMessage{ID: ids[i], Record: rec})
		marks = append(marks, keys.RunningField(ids[i]), "1")
	}
	marks[2+2*1500] = keys.RunningReplaced // as the send below would set it
	if _, err := s.Add(ctx, TopicPartition{Topic: topic, P: 0}, msgs); err != nil {
		t.Fatal(err)
	}
	newer := &Record{Due: now + 5000, Created: now, Updated: now + 1, Body: []byte("newer")}
	sk := keys.Scheduled(s.ns, topic, 0)
	if _, err := s.do(ctx, cmd{"HMSET", marks}, cmd{"HSET", []any{keys.Records(s.ns, topic, 0), ids[1500], newer.Encode()}},
		cmd{"ZREM", append([]any{sk}, strs(ids)...)}); err != nil { // claimed: no longer scheduled
		t.Fatal(err)
	}
	acks := make([]Acked, len(ids))
	for i := range ids {
		acks[i] = Acked{ID: ids[i], Header: headers[i], Token: token}
	}
	kept, err := s.Ack(ctx, TopicPartition{Topic: topic, P: 0}, acks, 0)
	if err != nil || kept != 1 {
		t.Fatalf("ack: kept %d, %v; want 1", kept, err)
	}
	r, err := s.do(ctx, cmd{"HLEN", []any{keys.Records(s.ns, topic, 0)}}, cmd{"HGET", []any{keys.Records(s.ns, topic, 0), ids[1500]}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := redis.Int(r[0], nil); n != 1 || r[1] == nil {
		t.Errorf("records HASH after the ack: %d fields, the replaced one %v; want just the replaced one", n, r[1] != nil)
	}
	r, err = s.do(ctx, cmd{"ZSCORE", []any{sk, ids[1500]}}, cmd{"ZCARD", []any{sk}})
	if err != nil {
		t.Fatal(err)
	}
	if due, _ := redis.Int64(r[0], nil); due != now+5000 {
		t.Errorf("%s, replaced, scheduled at %v after the ack, want its own due %d", ids[1500], r[0], now+5000)
	}
	if n, _ := redis.Int(r[1], nil); n != 1 {
		t.Errorf("%d entries scheduled after the ack, want the replaced one alone", n)
	}
}

// TestClaimIDs runs claimIDsScript on ids a peek listed, some changed
// since: it removes exactly those still scheduled and due by the max,
// and names each by its place among the ids given, whether its range from the ZSET's start finds them
// or (after more than its room of earlier entries came) they are looked
// up one by one; a deleted id, one rescheduled past the max and one
// listed twice are handled alike both ways.
func TestClaimIDs(t *testing.T) {
	ctx := context.Background()
	const topic, token, due, max = "claimids", 7, int64(1_800_000_000_000), int64(1_800_000_001_000)
	for _, earlier := range []int{0, 200} {
		ids := []string{"a", "b", "gone", "later", "kept"}
		s := dueMessages(t, topic, token, due, ids...)
		sk := keys.Scheduled(s.ns, topic, 0)
		add := []any{sk, max + 1, "later"}
		for i := range earlier { // come after the peek, due before its ids
			add = append(add, due-1, "e"+strconv.Itoa(i))
		}
		if _, err := s.do(ctx, cmd{"ZADD", add}, cmd{"ZREM", []any{sk, "gone"}}); err != nil {
			t.Fatal(err)
		}
		r, err := s.script(ctx, claimIDsScript, sk, keys.Fence, token, max, "a", "b", "gone", "later", "b")
		if err != nil {
			t.Fatalf("%d earlier: %v", earlier, err)
		}
		got, err := redis.Ints(r, nil)
		if want := []int{1, 2}; err != nil || !slices.Equal(got, want) {
			t.Errorf("%d earlier: claimed %v (%v), want %v", earlier, got, err, want)
		}
		for id, in := range map[string]bool{"a": false, "b": false, "later": true, "kept": true} {
			r, err := s.do(ctx, cmd{"ZSCORE", []any{sk, id}})
			if err != nil {
				t.Fatal(err)
			}
			if (r[0] != nil) != in {
				t.Errorf("%d earlier: %s scheduled %v after the claim, want %v", earlier, id, r[0] != nil, in)
			}
		}
	}
}

func TestParseScore(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"1764433200000", 1764433200000},
		{"0", 0},
		{"-42", -42},
		{"1.5e3", 1500},
		{"1764433200000.5", 1764433200000},
		{"9e15", 9000000000000000},
	} {
		if got := parseScore([]byte(c.in)); got != c.want {
			t.Errorf("parseScore(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestPeekedStateToStart reads a claim script's reply whose places come
// out of the peek's order, with a segment's among them: each id is
// found at its place (taken, started when marked and its record is the
// one due), the segment's field goes apart, and an id running elsewhere
// is taken but not returned. A place out of range, or named twice, is a
// bad reply.
func TestPeekedStateToStart(t *testing.T) {
	peeked := []Claimed{{ID: "a", Due: 10}, {ID: "b", Due: 10}, {ID: "c", Due: 10}, {ID: "d", Due: 10}}
	seg := keys.SegmentMark + "0123"
	ps := newPeekedState(peeked, []string{seg})
	ps.recs = []*Record{{Due: 10}, {Due: 10}, {Due: 20}, {Due: 10}}
	ps.flags[0] = peekEntered | peekMarked
	ps.flags[1] = peekEntered | peekMarked
	ps.flags[2] = peekEntered | peekMarked // its record is due later than its entry: held
	ps.flags[3] = peekEntered | peekRunning
	claimed, recs, places, segs, err := ps.toStart([]int{1, 5, 3, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, m := range claimed {
		ids = append(ids, fmt.Sprintf("%s@%d started=%v", m.ID, places[i], m.Started))
		if recs[i] != ps.recs[places[i]] {
			t.Errorf("%s: record of place %d not returned", m.ID, places[i])
		}
	}
	if want := "[a@0 started=true c@2 started=false b@1 started=true]"; fmt.Sprint(ids) != want {
		t.Errorf("claimed %v, want %s", ids, want)
	}
	if fmt.Sprint(segs) != fmt.Sprint([]string{seg}) {
		t.Errorf("segments %q, want %q", segs, seg)
	}
	for i, m := range peeked {
		if !ps.has(i, peekTaken) {
			t.Errorf("%s not flagged taken", m.ID)
		}
	}
	if ps.has(2, peekStarted) || !ps.has(0, peekStarted) {
		t.Errorf("started flags %v", ps.flags)
	}
	for _, bad := range [][]int{{0}, {6}, {1, 1}} {
		ps := newPeekedState(peeked, []string{seg})
		ps.recs = make([]*Record, len(peeked))
		if _, _, _, _, err := ps.toStart(bad); err == nil {
			t.Errorf("places %v read without an error", bad)
		}
	}
}
