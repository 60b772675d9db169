package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/gomodule/redigo/redis"
)

// TestPutDones writes Dones as an import does, against a real Redis: an
// id with no field gets its Done (over two script calls), the same Done
// there already is reported as such, a Done whose window ended is
// written over, and a message (record or segment entry) or another
// Done within its window is left as it is; another group goes to its own
// partition in the same call. A second run writes nothing.
// An export scan then reports the Dones in StateDone, none corrupt.
func TestPutDones(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	s := openTest(t, env.Backends[0])
	ctx := context.Background()
	const now = int64(1_800_000_000_000)
	tp := TopicPartition{Topic: "t", P: 0}
	mk := keys.Records(s.ns, "t", 0)
	due := now + 3_600_000
	rec := func(body string) *Record {
		return &Record{Due: due, Created: now, Updated: now, Body: []byte(body)}
	}
	segIDs := []string{"0000000000000000000000aa01", "0000000000000000000000aa02"}
	if errs, err := s.AddMany(ctx, []Group{
		{Topic: "t", P: 0, Msgs: []NewMessage{{ID: segIDs[0], Record: rec("s1")}, {ID: segIDs[1], Record: rec("s2")}}, Fresh: true},
		{Topic: "t", P: 0, Msgs: []NewMessage{{ID: "live", Record: rec("live")}}},
	}); err != nil || errors.Join(errs[0]...) != nil || errors.Join(errs[1]...) != nil {
		t.Fatalf("add: %v %v", errs, err)
	}
	if r, err := s.do(ctx, cmd{"HGET", []any{mk, segIDs[0]}}); err != nil || r[0] != nil {
		t.Fatalf("%s has a field of its own (%v, %v): the test needs it in a segment", segIDs[0], r, err)
	}
	mine := Done{Finished: now - 1000, Until: now + 86_400_000}
	other := Done{Finished: now - 5000, Until: now + 60_000}
	ended := Done{Finished: now - 90_000, Until: now - 1}
	for id, d := range map[string]Done{"same": mine, "other": other, "ended": ended} {
		if _, err := s.do(ctx, cmd{"HSET", []any{mk, id, d.Encode()}}); err != nil {
			t.Fatal(err)
		}
	}
	hget := func(id string) ([]byte, error) {
		r, err := s.do(ctx, cmd{"HGET", []any{mk, id}})
		if err != nil {
			return nil, err
		}
		if r[0] == nil {
			return nil, nil
		}
		return redis.Bytes(r[0], nil)
	}
	liveBefore, err := hget("live")
	if err != nil {
		t.Fatal(err)
	}

	ids := []string{"new", "same", "other", "ended", "live", segIDs[0]}
	want := []DoneWrite{DoneWritten, DoneSame, DoneTaken, DoneWritten, DoneTaken, DoneTaken}
	for i := range putDonesMax { // more than one script call
		ids, want = append(ids, fmt.Sprintf("bulk-%03d", i)), append(want, DoneWritten)
	}
	dones := make([]Done, len(ids))
	for i := range dones {
		dones[i] = mine
	}
	// Two groups: the partition's, and an id of another partition.
	res, err := s.PutDones(ctx, []DoneGroup{
		{TopicPartition: tp, IDs: ids, Dones: dones},
		{TopicPartition: TopicPartition{Topic: "t", P: 1}, IDs: []string{"new"}, Dones: []Done{other}},
	}, now)
	if err != nil || len(res) != 2 || len(res[0]) != len(ids) || len(res[1]) != 1 {
		t.Fatalf("put dones: %v, %v", res, err)
	}
	got := res[0]
	if res[1][0] != DoneWritten {
		t.Errorf("put done of new in partition 1: outcome %d, want written", res[1][0])
	}
	if r, err := s.do(ctx, cmd{"HGET", []any{keys.Records(s.ns, "t", 1), "new"}}); err != nil || r[0] == nil {
		t.Errorf("partition 1 holds no Done of new: %v, %v", r, err)
	} else if d, ok := DecodeDone(r[0].([]byte)); !ok || d != other {
		t.Errorf("partition 1 holds %x for new, want %+v", r[0], other)
	}
	for i := range ids {
		if got[i] != want[i] {
			t.Errorf("put done of %s: outcome %d, want %d", ids[i], got[i], want[i])
		}
	}
	vals := map[string][]byte{}
	for _, id := range []string{"new", "same", "other", "ended", "live", segIDs[0], ids[len(ids)-1]} {
		v, err := hget(id)
		if err != nil {
			t.Fatal(err)
		}
		vals[id] = v
	}
	for _, id := range []string{"new", "same", "ended", ids[len(ids)-1]} {
		if d, ok := DecodeDone(vals[id]); !ok || d != mine {
			t.Errorf("%s holds %x after the put, want the Done %+v", id, vals[id], mine)
		}
	}
	if d, ok := DecodeDone(vals["other"]); !ok || d != other {
		t.Errorf("other Done within its window became %x, want it kept", vals["other"])
	}
	if string(vals["live"]) != string(liveBefore) {
		t.Errorf("the live record became %x", vals["live"])
	}
	if vals[segIDs[0]] != nil {
		t.Errorf("an id held by a segment got a field: %x", vals[segIDs[0]])
	}

	// Again: every Done written is the same now; nothing changes.
	again, err := s.PutDones(ctx, []DoneGroup{{TopicPartition: tp, IDs: ids[:4], Dones: dones[:4]}}, now)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []DoneWrite{DoneSame, DoneSame, DoneTaken, DoneSame} {
		if again[0][i] != w {
			t.Errorf("second put of %s: outcome %d, want %d", ids[i], again[0][i], w)
		}
	}
	if _, err := s.PutDones(ctx, []DoneGroup{{TopicPartition: tp, IDs: []string{"x"}}}, now); err == nil {
		t.Error("put dones with fewer Dones than ids: no error")
	}

	// The export scan reports them done, with their times.
	found := map[string]Exported{}
	for cursor := "0"; ; {
		pass, err := s.ExportScan(ctx, tp, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(pass.Corrupt) > 0 {
			t.Errorf("export scan: corrupt %v", pass.Corrupt)
		}
		for _, m := range pass.Msgs {
			found[m.ID] = m
		}
		if cursor = pass.Next; cursor == "0" {
			break
		}
	}
	for id, d := range map[string]Done{"new": mine, "other": other, ids[len(ids)-1]: mine} {
		if m := found[id]; m.State != StateDone || m.Done != d || m.Record != nil {
			t.Errorf("export of done %s: %+v, want StateDone with %+v and no record", id, m, d)
		}
	}
	if m := found["live"]; m.State != StateScheduled || m.Record == nil || string(m.Record.Body) != "live" {
		t.Errorf("export of live: %+v", m)
	}
	if n := len(found); n != len(ids)+1 { // and the other segment id
		t.Errorf("export scan found %d ids, want %d", n, len(ids)+1)
	}
}
