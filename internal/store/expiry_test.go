package store

import (
	"context"
	"slices"
	"testing"

	"github.com/delayq/delayq/internal/keys"
)

// TestExpiredRequeue lists the in-flight messages whose visibility
// deadline passed (Expired: deadline at or before now, in deadline
// order, up to the limit) with their records and whether their delivery
// started, and returns them as a partition loop does: the one started
// goes back to scheduled at its own due with an attempt counted, the one
// claimed ahead and never started at its own due untouched, and the
// tombstone is dropped. A message whose deadline is ahead stays in
// flight.
func TestExpiredRequeue(t *testing.T) {
	ctx := context.Background()
	const topic, token, now = "expired", 7, int64(1_800_000_000_000)
	s := dueMessages(t, topic, token, now-10, "started", "tomb")
	var later []NewMessage
	for id, due := range map[string]int64{"ahead": now + 500, "live": now + 5000} {
		later = append(later, NewMessage{ID: id, Record: &Record{Due: due, Created: now, Updated: now, Body: []byte(id)}})
	}
	if _, err := s.Add(ctx, TopicPartition{Topic: topic, P: 0}, later); err != nil {
		t.Fatal(err)
	}
	// In flight 1,010 ms past their due; started, those due by now.
	recs := claimDue(t, s, topic, token, now+5000, now, func(due int64) int64 { return due + 1010 })
	// A delete cut short: its record and mark went, its entries not.
	if _, err := s.do(ctx, cmd{"HDEL", []any{keys.Records(s.ns, topic, 0), "tomb", keys.RunningField("tomb")}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at    int64
		limit int
		want  []string
	}{
		{now + 999, 10, nil},
		{now + 1000, 10, []string{"started", "tomb"}},
		{now + 1510, 2, []string{"started", "tomb"}},
	} {
		ids, _, _, err := s.Expired(ctx, TopicPartition{Topic: topic, P: 0}, tc.at, tc.limit)
		if err != nil || !slices.Equal(ids, tc.want) {
			t.Errorf("expired at %d, up to %d: %v (%v), want %v", tc.at, tc.limit, ids, err, tc.want)
		}
	}
	ids, got, started, err := s.Expired(ctx, TopicPartition{Topic: topic, P: 0}, now+1510, 10)
	if err != nil || !slices.Equal(ids, []string{"started", "tomb", "ahead"}) {
		t.Fatalf("expired at %d: %v (%v), want started, tomb, ahead", now+1510, ids, err)
	}
	if got[0] == nil || got[0].Due != now-10 || !started[0] || got[1] != nil || started[1] || got[2] == nil || got[2].Due != now+500 || started[2] {
		t.Fatalf("expired records %+v, started %v; want started's (started), none, ahead's (not started)", got, started)
	}
	retried := *got[0]
	retried.Attempts, retried.LastError, retried.Updated = 1, "visibility deadline passed", now+1510
	if err := s.Drop(ctx, TopicPartition{Topic: topic, P: 0}, []string{"tomb"}); err != nil {
		t.Fatal(err)
	}
	gone, err := s.Moves(ctx, TopicPartition{Topic: topic, P: 0}, []Move{
		{ID: "started", Score: got[0].Due, Record: &retried, Was: got[0].Header()},
		{ID: "ahead", Score: got[2].Due},
	})
	if err != nil || gone != 0 {
		t.Fatalf("requeue: gone %d, %v", gone, err)
	}
	if ids, _, _, err := s.Expired(ctx, TopicPartition{Topic: topic, P: 0}, now+1510, 10); err != nil || len(ids) != 0 {
		t.Errorf("expired after the requeue: %v (%v), want none", ids, err)
	}
	st := stateOf(t, s, topic, "started")
	if rec := st.record(t); st.sched != now-10 || st.flight != -1 || st.running || rec == nil || rec.Attempts != 1 {
		t.Errorf("started after the requeue: %+v (record %+v), want scheduled at %d, an attempt counted, no mark", st, rec, now-10)
	}
	st = stateOf(t, s, topic, "ahead")
	if rec := st.record(t); st.sched != now+500 || st.flight != -1 || st.running || rec == nil || rec.Attempts != 0 || rec.Updated != recs["ahead"].Updated {
		t.Errorf("ahead after the requeue: %+v (record %+v), want scheduled at %d, its record untouched", st, rec, now+500)
	}
	if st := stateOf(t, s, topic, "tomb"); !st.nowhere() {
		t.Errorf("tomb after the requeue: %+v, want nothing left", st)
	}
	if st := stateOf(t, s, topic, "live"); st.flight != now+6010 || st.sched != -1 || st.rec == nil {
		t.Errorf("live after the requeue: %+v, want in flight at %d", st, now+6010)
	}
}

// TestReconcileReindexes runs the reconciler over records in every
// index and in none: the ones in no index are scheduled again at their
// due (an undecodable one at once), except the one the owner says is
// its own; the others, and the running marks among the fields, are left
// alone. A second pass repairs nothing.
func TestReconcileReindexes(t *testing.T) {
	ctx := context.Background()
	const topic, token, now = "reconcile", 7, int64(1_800_000_000_000)
	s := dueMessages(t, topic, token, now, "indexed", "lost", "flight", "dead", "mine")
	sk, ik, dk, mk := keys.Scheduled(s.ns, topic, 0), keys.InFlight(s.ns, topic, 0), keys.Dead(s.ns, topic, 0), keys.Records(s.ns, topic, 0)
	const bad = "\x02truncated"
	if _, err := DecodeRecord([]byte(bad)); err == nil {
		t.Fatal("the bad record decodes")
	}
	if _, err := s.do(ctx,
		cmd{"ZREM", []any{sk, "lost", "flight", "dead", "mine"}},
		cmd{"ZADD", []any{sk, now - 5, "indexed"}},
		cmd{"ZADD", []any{ik, now + 1000, "flight"}},
		cmd{"ZADD", []any{dk, now + 1, "dead"}},
		cmd{"HSET", []any{mk, keys.RunningField("flight"), "1"}},
		cmd{"HSET", []any{mk, "bad", bad}}); err != nil {
		t.Fatal(err)
	}
	pass := func() []string {
		t.Helper()
		var all []string
		cursor := "0"
		for range 100 {
			next, repaired, err := s.Reconcile(ctx, TopicPartition{Topic: topic, P: 0}, cursor, 2, func(id string) bool { return id == "mine" }, 0)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, repaired...)
			if cursor = next; cursor == "0" {
				slices.Sort(all)
				return all
			}
		}
		t.Fatal("the scan did not end")
		return nil
	}
	if got := pass(); !slices.Equal(got, []string{"bad", "lost"}) {
		t.Errorf("repaired %v, want bad and lost", got)
	}
	for id, want := range map[string]msgState{
		"indexed": {sched: now - 5, flight: -1, dead: -1},
		"lost":    {sched: now, flight: -1, dead: -1},
		"bad":     {sched: 0, flight: -1, dead: -1},
		"flight":  {sched: -1, flight: now + 1000, dead: -1, running: true},
		"dead":    {sched: -1, flight: -1, dead: now + 1},
		"mine":    {sched: -1, flight: -1, dead: -1},
	} {
		st := stateOf(t, s, topic, id)
		if st.sched != want.sched || st.flight != want.flight || st.dead != want.dead || st.running != want.running || st.rec == nil {
			t.Errorf("%s after the reconciler: %+v, want %+v with its record", id, st, want)
		}
	}
	if got := pass(); len(got) != 0 {
		t.Errorf("second pass repaired %v, want nothing", got)
	}
	r, err := s.do(ctx, cmd{"ZCARD", []any{sk}})
	if err != nil || r[0] != int64(4) {
		t.Errorf("scheduled after two passes: %v members (%v), want the fence, indexed, lost and bad", r, err)
	}
}
