package delayq

import (
	"context"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// Occurrence ids parse back, and every occurrence of a schedule lands in
// one partition.
func TestScheduleIDs(t *testing.T) {
	at := time.UnixMilli(1_780_000_000_000)
	for _, n := range []int{1, 16, 256} {
		for _, name := range []string{"report", "a", "x.y-z_9"} {
			want := schedulePartition(name, n)
			for i := range 20 {
				id := ScheduleID(name, 1_700_000_000_123, at.Add(time.Duration(i)*time.Second), n)
				if got := partition.For(id, n); got != want {
					t.Errorf("%s in %d partitions: partition %d, want %d", id, n, got, want)
				}
				gn, gv, gt, ok := ParseScheduleID(id)
				if !ok || gn != name || gv != 1_700_000_000_123 || !gt.Equal(at.Add(time.Duration(i)*time.Second)) {
					t.Errorf("ParseScheduleID(%q) = %q %d %v %v", id, gn, gv, gt, ok)
				}
				if err := partition.ValidateID(id); err != nil {
					t.Errorf("%s: %v", id, err)
				}
			}
		}
	}
	for _, id := range []string{"report", "@sched:", "@sched:a:b:c:d", "@sched:a:1:2", "@sched:a b:1:2:x"} {
		if _, _, _, ok := ParseScheduleID(id); ok {
			t.Errorf("ParseScheduleID(%q) ok", id)
		}
	}
}

// Missed occurrences: skip delivers the latest only, all at most
// MaxCatchUp.
func TestScheduleCatchUp(t *testing.T) {
	cs, err := parseSpec("x", "@every 1s", "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_780_000_000, 0)
	now := at.Add(10*time.Minute + 500*time.Millisecond)
	run, nxt := catchUp(cs, at, now, PolicySkip)
	if run || !nxt.Equal(at.Add(10*time.Minute)) {
		t.Errorf("skip: run %v next %v, want false and the latest, %v", run, nxt, at.Add(10*time.Minute))
	}
	run, nxt = catchUp(cs, at, now, PolicyAll)
	if first := at.Add(10*time.Minute - (MaxCatchUp-1)*time.Second); run || !nxt.Equal(first) {
		t.Errorf("all, 600 missed: run %v next %v, want false and %v", run, nxt, first)
	}
	run, nxt = catchUp(cs, at, at.Add(50*time.Second), PolicyAll)
	if !run || !nxt.Equal(at.Add(time.Second)) {
		t.Errorf("all, 50 missed: run %v next %v, want true and %v", run, nxt, at.Add(time.Second))
	}
}

// A cut chain (its pending occurrence deleted by id, or a change written
// without its first occurrence) is mended by a resume of the running
// schedule, and by a worker's start that keeps the schedule.
func TestScheduleMendChain(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 4})
	topic := "sched-mend"
	p := schedulePartition("m", 4)
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "m", Spec: "@every 10s"}); err != nil {
		t.Fatal(err)
	}
	first, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m")
	if err := c.Delete(ctx, topic, first); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().ResumeSchedule(ctx, topic, "m"); err != nil {
		t.Fatal(err)
	}
	mended, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m")
	if mended == first {
		t.Fatalf("resume did not mend the chain: mark %s", mended)
	}
	if in, err := c.Get(ctx, topic, mended); err != nil || in.State != StateScheduled {
		t.Fatalf("mended occurrence %s: %+v, %v", mended, in, err)
	}
	// Resuming a schedule whose chain runs writes nothing.
	if err := c.Admin().ResumeSchedule(ctx, topic, "m"); err != nil {
		t.Fatal(err)
	}
	if again, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m"); again != mended {
		t.Errorf("resume of a running chain moved its mark: %s -> %s", mended, again)
	}
	// A file's schedule whose first occurrence was never written (the
	// writer died after the definition): the next start writes it.
	file := []Schedule{{Name: "f", Spec: "@daily"}}
	if _, _, err := c.changeSchedule(ctx, topic, "f", func(*schedRecord) (*schedRecord, error) {
		return &schedRecord{Spec: "@daily", TOML: tomlHash(file[0]), From: "toml"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	done, err := c.Admin().ApplySchedules(ctx, topic, file)
	if err != nil || done[0].Action != "kept" {
		t.Fatalf("apply: %v, %v", done, err)
	}
	if mark, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: schedulePartition("f", 4)}, "f"); mark == "" {
		t.Error("the kept schedule's chain was not started")
	}
}
