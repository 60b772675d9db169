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
	"github.com/delayq/delayq/internal/testenv"
)

// scheduleRecorder records the deliveries of occurrences.
type scheduleRecorder struct {
	mu sync.Mutex
	ds []Delivery
}

func (r *scheduleRecorder) handle(_ context.Context, d *Delivery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	dd := *d
	dd.Body = append([]byte(nil), d.Body...)
	r.ds = append(r.ds, dd)
	return nil
}

func (r *scheduleRecorder) since(from time.Time) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Delivery
	for _, d := range r.ds {
		if _, _, at, _ := ParseScheduleID(d.ID); !at.Before(from) {
			out = append(out, d)
		}
	}
	return out
}

// A schedule through Twemproxy with two consumers: one delivery per
// occurrence, due at its time; a replace, a pause, a resume and a delete
// apply to the next occurrence.
func TestScheduleLifecycle(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 3})
	ctx := context.Background()
	c := newClient(t, env.Proxy, Options{Partitions: 4})
	topic := "sched-life"
	var rec scheduleRecorder
	for i := range 2 {
		o := ConsumerOptions{Topic: topic, ID: "k" + string(rune('0'+i)), Lease: 2 * time.Second}
		runConsumer(t, c, o, rec.handle)
	}
	start := time.Now()
	in, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "tick", Spec: "@every 1s", Body: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	if in.Policy != PolicySkip || in.Version == 0 || in.Paused {
		t.Errorf("stored %+v", in)
	}
	time.Sleep(4500 * time.Millisecond)
	// Replace: the next occurrences carry the new body.
	changed := time.Now()
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "tick", Spec: "@every 1s", Body: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	paused := time.Now()
	if err := c.Admin().PauseSchedule(ctx, topic, "tick"); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Inspector().GetSchedule(ctx, topic, "tick"); err != nil || !s.Paused || s.Next(time.Now(), 1) != nil {
		t.Errorf("paused schedule: %+v, %v", s, err)
	}
	time.Sleep(2500 * time.Millisecond)
	resumed := time.Now()
	if err := c.Admin().ResumeSchedule(ctx, topic, "tick"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	deleted := time.Now()
	if err := c.Admin().DeleteSchedule(ctx, topic, "tick"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)

	ds := rec.since(start)
	seen := map[string]int{}
	var v1, v2, duringPause, afterResume, afterDelete int
	for _, d := range ds {
		seen[d.ID]++
		_, _, at, _ := ParseScheduleID(d.ID)
		if !d.Due.Equal(at) {
			t.Errorf("%s delivered with due %v, want its time %v", d.ID, d.Due, at)
		}
		switch {
		case at.After(deleted.Add(time.Second)):
			afterDelete++
		case at.After(paused.Add(time.Second)) && at.Before(resumed):
			duringPause++
		case at.After(resumed):
			afterResume++
		}
		if string(d.Body) == "v1" {
			v1++
			if at.After(changed.Add(time.Second)) {
				t.Errorf("%s after the replace carries the old body", d.ID)
			}
		} else {
			v2++
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	t.Logf("deliveries: v1 %d v2 %d, during the pause %d, after resume %d, after delete %d", v1, v2, duringPause, afterResume, afterDelete)
	if v1 < 3 || v2 < 2 || afterResume < 1 || duringPause > 0 || afterDelete > 0 {
		t.Errorf("deliveries: v1 %d v2 %d, during the pause %d, after resume %d, after delete %d", v1, v2, duringPause, afterResume, afterDelete)
	}
	// Nothing of the schedule is left: no occurrence, no definition.
	st, err := c.Inspector().Stats(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if st.Scheduled != 0 || st.InFlight != 0 {
		t.Errorf("after delete: %d scheduled, %d in flight", st.Scheduled, st.InFlight)
	}
	if all, err := c.Inspector().Schedules(ctx, topic); err != nil || len(all) != 0 {
		t.Errorf("schedules after delete: %v, %v", all, err)
	}
	if err := c.Admin().DeleteSchedule(ctx, topic, "tick"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete again: %v, want ErrNotFound", err)
	}
}

// AddSchedule refuses a name in use, naming the schedule, its topic and
// its definition, and changes nothing; SetSchedule still replaces. The
// errors for a missing schedule name it and its topic, not a message,
// and match ErrNotFound.
func TestScheduleAddRefusesExisting(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 4})
	const topic = "sched-add"
	first, err := c.Admin().AddSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 9 * * *", TimeZone: "America/New_York", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Admin().AddSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 9 * * *"})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("second add: %v, want ErrExists", err)
	}
	for _, w := range []string{`schedule "daily" of topic sched-add exists already`, `"0 9 * * *" in America/New_York`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	got, err := c.Inspector().GetSchedule(ctx, topic, "daily")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != first.Version || got.TimeZone != "America/New_York" || got.MaxAttempts != 3 {
		t.Errorf("after a refused add: %+v, want it unchanged: %+v", got, first)
	}
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 9 * * *"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Inspector().GetSchedule(ctx, topic, "daily"); got == nil || got.TimeZone != "" || got.Version == first.Version {
		t.Errorf("SetSchedule did not replace: %+v", got)
	}

	for name, err := range map[string]error{
		"get":    func() error { _, err := c.Inspector().GetSchedule(ctx, topic, "nope"); return err }(),
		"pause":  c.Admin().PauseSchedule(ctx, topic, "nope"),
		"resume": c.Admin().ResumeSchedule(ctx, topic, "nope"),
		"delete": c.Admin().DeleteSchedule(ctx, topic, "nope"),
	} {
		if !errors.Is(err, ErrNotFound) || err.Error() != `delayq: schedule "nope" of topic sched-add not found` {
			t.Errorf("%s of a missing schedule: %v, want ErrNotFound naming the schedule and topic", name, err)
		}
	}
}

// A replaced schedule's pending occurrence is removed at once, and a
// stale chain step (of the old version) writes nothing.
func TestScheduleReplaceRemovesPending(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 4})
	topic := "sched-replace"
	a, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 3 * * *", TimeZone: "Asia/Shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	p := schedulePartition("daily", 4)
	first, err := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "daily")
	if err != nil || first == "" {
		t.Fatalf("mark: %q %v", first, err)
	}
	if _, err := c.Get(ctx, topic, first); err != nil {
		t.Fatalf("first occurrence: %v", err)
	}
	b, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 4 * * *", TimeZone: "Asia/Shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Version <= a.Version {
		t.Errorf("version %d after %d", b.Version, a.Version)
	}
	if _, err := c.Get(ctx, topic, first); !errors.Is(err, ErrNotFound) {
		t.Errorf("the replaced schedule's occurrence %s: %v, want ErrNotFound", first, err)
	}
	second, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "daily")
	in, err := c.Get(ctx, topic, second)
	if err != nil {
		t.Fatal(err)
	}
	if h := in.Due.In(time.FixedZone("CST", 8*3600)).Hour(); h != 4 {
		t.Errorf("new occurrence due %v, at %d:00 Shanghai, want 4:00", in.Due, h)
	}
	// @every counts from the change: the listed next occurrence is the
	// pending one.
	ev, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "ev", Spec: "@every 7s"})
	if err != nil {
		t.Fatal(err)
	}
	evMark, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: schedulePartition("ev", 4)}, "ev")
	_, _, evAt, _ := ParseScheduleID(evMark)
	if nx := ev.Next(time.Now(), 2); len(nx) != 2 || !nx[0].Equal(evAt) || nx[1].Sub(nx[0]) != 7*time.Second {
		t.Errorf("@every 7s: next %v, pending occurrence at %v", nx, evAt)
	}
	if nx := ev.Next(evAt.Add(15*time.Second), 1); len(nx) != 1 || !nx[0].Equal(evAt.Add(21*time.Second)) {
		t.Errorf("@every 7s: next after 15 s past the first %v, want %v", nx, evAt.Add(21*time.Second))
	}
	// A delivery of the old occurrence (a consumer that read it before
	// the replace) is stale: not run, nothing written.
	if run, err := c.occurrence(ctx, topic, first, 1); err != nil || run {
		t.Errorf("stale occurrence: run %v, %v", run, err)
	}
	// The current one chains the next, once however often it is
	// delivered.
	for range 3 {
		if run, err := c.occurrence(ctx, topic, second, 1); err != nil || !run {
			t.Errorf("current occurrence: run %v, %v", run, err)
		}
	}
	st, _ := c.Inspector().Stats(ctx, topic)
	if st.Scheduled != 3 {
		t.Errorf("%d scheduled, want 3 (the occurrence, the next one and ev's)", st.Scheduled)
	}
	// The chain mark is not a message: the reconciler and stats skip it.
	if keys.IsIDField(keys.ScheduleMarkField("daily")) {
		t.Error("the mark's field reads as a message id")
	}
}

// Missed occurrences, with a consumer whose clock says the fleet was down
// for ten minutes: skip acks the old occurrence and writes the latest.
func TestScheduleMissedSkip(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 2})
	topic := "sched-missed"
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "m", Spec: "* * * * *"}); err != nil {
		t.Fatal(err)
	}
	p := schedulePartition("m", 2)
	first, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m")
	_, _, at, _ := ParseScheduleID(first)
	later := at.Add(10*time.Minute + 30*time.Second)
	down := newClient(t, env.Backends[0], Options{Partitions: 2, Now: func() time.Time { return later }})
	run, err := down.occurrence(ctx, topic, first, 1)
	if err != nil || run {
		t.Fatalf("missed occurrence under skip: run %v, %v", run, err)
	}
	latest, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m")
	if _, _, lat, _ := ParseScheduleID(latest); !lat.Equal(at.Add(10 * time.Minute)) {
		t.Errorf("written after the miss: %s, want the occurrence at %v", latest, at.Add(10*time.Minute))
	}
	// A retry is no missed occurrence: it runs when its backoff brings it.
	if run, err := down.occurrence(ctx, topic, first, 2); err != nil || !run {
		t.Errorf("retry of an old occurrence: run %v, %v", run, err)
	}
	// all: the missed occurrence runs and chains the next.
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "m", Spec: "* * * * *", Policy: PolicyAll}); err != nil {
		t.Fatal(err)
	}
	first, _ = c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m")
	_, _, at, _ = ParseScheduleID(first)
	later = at.Add(10*time.Minute + 30*time.Second)
	run, err = down.occurrence(ctx, topic, first, 1)
	if err != nil || !run {
		t.Fatalf("missed occurrence under all: run %v, %v", run, err)
	}
	nxt, _ := c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: p}, "m")
	if _, _, nt, _ := ParseScheduleID(nxt); !nt.Equal(at.Add(time.Minute)) {
		t.Errorf("written after the miss: %s, want the occurrence at %v", nxt, at.Add(time.Minute))
	}
}

// Ten thousand schedules on one topic, through Twemproxy: what adding
// them costs (commands, Redis memory on the backends), listing them, and
// the Redis work of a consumer of the topic while they are idle, beside
// the same for ten thousand ordinary queued messages (given ids, the same
// bodies and due times). The figures go to docs/benchmarks.md.
func TestScheduleCost(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	ctx := context.Background()
	const n, workers = 10000, 8
	body := []byte("check-the-orders") // 16 bytes
	due := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	memory := func() int64 {
		t.Helper()
		var sum int64
		for _, b := range env.Backends {
			m, err := portable.BackendUsedMemory(ctx, b, "")
			if err != nil {
				t.Fatal(err)
			}
			sum += m
		}
		return sum
	}
	parallel := func(f func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					if err := f(i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// The two topics exist (16 partitions) before the measurements.
	sc := newClient(t, env.Proxy, Options{Partitions: 16})
	mc := newClient(t, env.Proxy, Options{Partitions: 16})
	for _, tp := range []struct {
		c     *Client
		topic string
	}{{sc, "sched-cost"}, {mc, "msg-cost"}} {
		if _, err := tp.c.ensureTopic(ctx, tp.topic); err != nil {
			t.Fatal(err)
		}
	}

	spec := fmt.Sprintf("%d %d * * *", due.UTC().Minute(), due.UTC().Hour())
	m0, c0, t0 := memory(), sc.Commands(), time.Now()
	parallel(func(i int) error {
		_, err := sc.Admin().SetSchedule(ctx, "sched-cost", Schedule{Name: "s" + itoa5(i), Spec: spec, Body: body})
		return err
	})
	addTook, addCmds, addMem := time.Since(t0), sc.Commands()-c0, memory()-m0

	m0, c0 = memory(), mc.Commands()
	parallel(func(i int) error {
		_, err := mc.Send(ctx, Message{Topic: "msg-cost", ID: "order-" + itoa5(i), At: due, Body: body})
		return err
	})
	msgCmds, msgMem := mc.Commands()-c0, memory()-m0

	c0, t0 = sc.Commands(), time.Now()
	all, err := sc.Inspector().Schedules(ctx, "sched-cost")
	if err != nil {
		t.Fatal(err)
	}
	listTook, listCmds := time.Since(t0), sc.Commands()-c0
	if len(all) != n {
		t.Errorf("%d schedules listed, want %d", len(all), n)
	}
	if st, _ := sc.Inspector().Stats(ctx, "sched-cost"); st.Scheduled != n {
		t.Errorf("%d occurrences scheduled, want %d", st.Scheduled, n)
	}

	// Idle work: a consumer of each topic, alone on its client, for 6 s.
	idle := func(topic string) float64 {
		t.Helper()
		kc := newClient(t, env.Proxy, Options{})
		k, err := kc.NewConsumer(ConsumerOptions{Topic: topic, ID: "idle-" + topic}, func(context.Context, *Delivery) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- k.Run(ctx) }()
		waitFor(t, 10*time.Second, "the consumer owning every partition", func() bool { return len(k.Stats().Owned) == 16 })
		time.Sleep(time.Second)
		c0, t0 := kc.Commands(), time.Now()
		time.Sleep(6 * time.Second)
		rate := float64(kc.Commands()-c0) / time.Since(t0).Seconds()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		k.Shutdown(sctx)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return rate
	}
	idleSched, idleMsg := idle("sched-cost"), idle("msg-cost")
	if idleSched > 1.5*idleMsg+2 {
		t.Errorf("an idle consumer sends %.1f commands/s with %d idle schedules, %.1f with %d queued messages", idleSched, n, idleMsg, n)
	}
	testenv.Figure(t, "schedules=%d add_cmds_per_schedule=%.2f add_rate_per_s=%.0f bytes_per_schedule=%d bytes_per_queued_message=%d cmds_per_queued_message=%.2f list_ms=%d list_cmds=%d idle_consumer_cmds_per_s=%.1f idle_consumer_cmds_per_s_messages=%.1f",
		n, float64(addCmds)/n, n/addTook.Seconds(), addMem/n, msgMem/n, float64(msgCmds)/n, listTook.Milliseconds(), listCmds, idleSched, idleMsg)
}

func itoa5(i int) string {
	s := "0000" + string(rune('0'+i/10000%10)) + string(rune('0'+i/1000%10)) + string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
	return s[len(s)-5:]
}

// The configuration file's schedules never undo a change made at run
// time, unless the file's definition itself changed.
func TestScheduleApplyRule(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 2})
	topic := "sched-apply"
	file := []Schedule{{Name: "a", Spec: "0 3 * * *", Body: []byte("file")}}
	apply := func(defs []Schedule, want ...string) {
		t.Helper()
		got, err := c.Admin().ApplySchedules(ctx, topic, defs)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range got {
			if a.Action != want[i] {
				t.Errorf("apply: %s %s, want %s", a.Name, a.Action, want[i])
			}
		}
	}
	get := func(name string) *ScheduleInfo {
		t.Helper()
		s, err := c.Inspector().GetSchedule(ctx, topic, name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	apply(file, "created")
	if s := get("a"); s.Source != "toml" || s.Spec != "0 3 * * *" {
		t.Errorf("after the first apply: %+v", s)
	}
	v := get("a").Version
	apply(file, "kept")
	if get("a").Version != v {
		t.Error("an unchanged file rewrote the schedule")
	}
	// Run-time changes survive restarts with the same file.
	if err := c.Admin().PauseSchedule(ctx, topic, "a"); err != nil {
		t.Fatal(err)
	}
	apply(file, "kept")
	if !get("a").Paused {
		t.Error("the file undid a pause")
	}
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "a", Spec: "0 4 * * *"}); err != nil {
		t.Fatal(err)
	}
	apply(file, "kept")
	if s := get("a"); s.Spec != "0 4 * * *" || s.Source != "" || !s.Paused {
		t.Errorf("the file undid a run-time replace: %+v", s)
	}
	// An edit of the file wins, and keeps the pause.
	file[0].Spec = "0 5 * * *"
	apply(file, "replaced")
	if s := get("a"); s.Spec != "0 5 * * *" || s.Source != "toml" || !s.Paused {
		t.Errorf("after an edit of the file: %+v", s)
	}
	// A schedule made at run time that the file then defines is replaced.
	if _, err := c.Admin().SetSchedule(ctx, topic, Schedule{Name: "b", Spec: "@hourly"}); err != nil {
		t.Fatal(err)
	}
	apply(append(file, Schedule{Name: "b", Spec: "@daily"}), "kept", "replaced")
	if get("b").Spec != "@daily" {
		t.Error("b not replaced")
	}
	// Every definition is checked before any is written.
	if _, err := c.Admin().ApplySchedules(ctx, topic, []Schedule{{Name: "c", Spec: "@daily"}, {Name: "d", Spec: "bad"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `Schedule.Spec "bad"`) {
		t.Errorf("bad file: %v", err)
	}
	if _, err := c.Inspector().GetSchedule(ctx, topic, "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("c written from a file with an error: %v", err)
	}
}
