package store

import (
	"bytes"
	"context"
	"slices"
	"testing"
)

// TestStartMany starts three messages claimed ahead of their due: one
// still as claimed starts (StartOK, its running mark set, its record
// untouched), one deleted since is StartGone, and one a send replaced
// since reports the newer record's due and is not marked. A second run
// of the same start (its reply lost) answers the same and changes
// nothing.
func TestStartMany(t *testing.T) {
	ctx := context.Background()
	const topic, token, now = "start", 7, int64(1_800_000_000_000)
	ids := []string{"ok", "gone", "replaced"}
	s := dueMessages(t, topic, token, now+5000, ids...)
	recs := claimDue(t, s, topic, token, now+5000, now, func(due int64) int64 { return due + 30000 })
	for _, id := range ids {
		if st := stateOf(t, s, topic, id); st.flight != now+35000 || st.running {
			t.Fatalf("%s claimed ahead: %+v, want in flight at %d, not started", id, st, now+35000)
		}
	}
	if err := s.Delete(ctx, TopicPartition{Topic: topic, P: 0}, "gone"); err != nil {
		t.Fatalf("delete of a message claimed ahead: %v", err)
	}
	send(t, s, topic, now+1, Put{ID: "replaced", Policy: PolicyReplace, Due: now + 9000, Body: []byte("newer")}, PutReplaced)
	claimedRecs := []*Record{recs["ok"], recs["gone"], recs["replaced"]}
	want := []int64{StartOK, StartGone, now + 9000}
	for run := 1; run <= 2; run++ {
		got, err := s.StartMany(ctx, TopicPartition{Topic: topic, P: 0}, token, ids, claimedRecs)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("start, run %d: %v, %v; want %v", run, got, err, want)
		}
		if st := stateOf(t, s, topic, "ok"); !st.running || st.flight != now+35000 || !bytes.Equal(st.rec, recs["ok"].Encode()) {
			t.Errorf("ok after run %d: %+v, want marked, in flight, its record as claimed", run, st)
		}
		if st := stateOf(t, s, topic, "gone"); !st.nowhere() {
			t.Errorf("gone after run %d: %+v, want nothing left", run, st)
		}
		st := stateOf(t, s, topic, "replaced")
		if st.running || st.sched != now+9000 {
			t.Errorf("replaced after run %d: %+v, want not marked, scheduled at %d", run, st, now+9000)
		}
		if rec := st.record(t); rec == nil || string(rec.Body) != "newer" {
			t.Errorf("replaced after run %d: record %+v, want the newer one", run, rec)
		}
	}
}
