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
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// Spec errors name the schedule and the spec, and say what is wrong.
func TestScheduleSpecErrors(t *testing.T) {
	c, err := New(Options{Addr: "127.0.0.1:1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		s    Schedule
		want []string
	}{
		{Schedule{Name: "report", Spec: "61 * * * *"}, []string{`schedule "report"`, `spec "61 * * * *"`, "61"}},
		{Schedule{Name: "report", Spec: "* * * *"}, []string{`spec "* * * *"`, "expected 5 to 6 fields"}},
		{Schedule{Name: "report", Spec: "@fortnightly"}, []string{`spec "@fortnightly"`, "unrecognized descriptor"}},
		{Schedule{Name: "report", Spec: "@every 500ms"}, []string{`spec "@every 500ms"`, "whole seconds"}},
		{Schedule{Name: "report", Spec: "@every 1.5s"}, []string{`spec "@every 1.5s"`, "whole seconds"}},
		{Schedule{Name: "report", Spec: ""}, []string{`schedule "report"`, "spec is empty"}},
		{Schedule{Name: "report", Spec: "0 0 30 2 *"}, []string{`spec "0 0 30 2 *"`, "no occurrence"}},
		{Schedule{Name: "report", Spec: "CRON_TZ=Asia/Tokyo 0 3 * * *"}, []string{"time zone"}},
		{Schedule{Name: "report", Spec: "0 3 * * *", TimeZone: "Mars/Olympus"}, []string{`time zone "Mars/Olympus"`, "IANA"}},
		{Schedule{Name: "report", Spec: "0 3 * * *", TimeZone: "Local"}, []string{`time zone "Local"`}},
		{Schedule{Name: "re:port", Spec: "0 3 * * *"}, []string{`schedule name "re:port"`, "[A-Za-z0-9._-]"}},
		{Schedule{Name: "", Spec: "0 3 * * *"}, []string{"schedule name is empty"}},
		{Schedule{Name: "report", Spec: "0 3 * * *", Policy: "some"}, []string{`policy "some"`}},
		{Schedule{Name: "report", Spec: "0 3 * * *", MaxAttempts: -1}, []string{"max attempts -1"}},
	} {
		_, err := c.SetSchedule(context.Background(), "orders", tc.s)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", tc.s, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %q", tc.s, err, w)
			}
		}
	}
	for _, spec := range []string{"*/10 * * * *", "30 */2 * * * *", "@hourly", "@daily", "@every 30s", "@every 1h30m", "0 3 * * MON-FRI"} {
		if _, err := ParseSpec(spec, "Asia/Shanghai", time.Now(), 1); err != nil {
			t.Errorf("spec %q: %v", spec, err)
		}
	}
	// Ids of occurrences are reserved.
	_, err = c.Enqueue(context.Background(), Message{Topic: "orders", ID: "@sched:x:1:2:3", Body: []byte("b")})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("enqueue of a reserved id: %v, want ErrInvalid naming the reservation", err)
	}
}

// Time zones: fields are read in the schedule's zone. Daylight saving
// (America/New_York, 2026): robfig/cron's rules, which docs/schedules.md states.
func TestScheduleTimeZonesAndDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	fmtAll := func(ts []time.Time, loc *time.Location) string {
		var s []string
		for _, x := range ts {
			s = append(s, x.In(loc).Format("01-02T15:04-07:00"))
		}
		return strings.Join(s, " ")
	}
	sh, _ := time.LoadLocation("Asia/Shanghai")
	for _, tc := range []struct {
		spec, tz string
		from     time.Time
		loc      *time.Location
		want     string
	}{
		// 03:00 in Shanghai is 19:00 UTC the day before.
		{"0 3 * * *", "Asia/Shanghai", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC, "01-01T19:00+00:00 01-02T19:00+00:00"},
		{"0 3 * * *", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), sh, "01-01T11:00+08:00 01-02T11:00+08:00"},
		// Spring forward (03-08, 02:00 EST -> 03:00 EDT): a time in the
		// skipped hour does not occur that day.
		{"30 2 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny, "03-09T02:30-04:00 03-10T02:30-04:00"},
		{"0 * * * *", "America/New_York", time.Date(2026, 3, 8, 0, 30, 0, 0, ny), ny, "03-08T01:00-05:00 03-08T03:00-04:00 03-08T04:00-04:00"},
		{"0 0 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny, "03-08T00:00-05:00 03-09T00:00-04:00"},
		// Fall back (11-01, 02:00 EDT -> 01:00 EST): a time in the
		// repeated hour occurs in both passes.
		{"30 1 * * *", "America/New_York", time.Date(2026, 10, 31, 12, 0, 0, 0, ny), ny, "11-01T01:30-04:00 11-01T01:30-05:00 11-02T01:30-05:00"},
		{"0 * * * *", "America/New_York", time.Date(2026, 11, 1, 0, 30, 0, 0, ny), ny, "11-01T01:00-04:00 11-01T01:00-05:00 11-01T02:00-05:00"},
		// @every counts elapsed time, whatever the zone.
		{"@every 1h", "America/New_York", time.Date(2026, 11, 1, 0, 30, 0, 0, ny), ny, "11-01T01:30-04:00 11-01T01:30-05:00 11-01T02:30-05:00"},
	} {
		want := strings.Fields(tc.want)
		ts, err := ParseSpec(tc.spec, tc.tz, tc.from, len(want))
		if err != nil {
			t.Fatalf("%s in %q: %v", tc.spec, tc.tz, err)
		}
		if got := fmtAll(ts, tc.loc); got != tc.want {
			t.Errorf("%s in %q from %v:\n got %s\nwant %s", tc.spec, tc.tz, tc.from, got, tc.want)
		}
	}
}

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
	in, err := c.SetSchedule(ctx, topic, Schedule{Name: "tick", Spec: "@every 1s", Body: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	if in.Policy != PolicySkip || in.Version == 0 || in.Paused {
		t.Errorf("stored %+v", in)
	}
	time.Sleep(4500 * time.Millisecond)
	// Replace: the next occurrences carry the new body.
	changed := time.Now()
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "tick", Spec: "@every 1s", Body: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	paused := time.Now()
	if err := c.PauseSchedule(ctx, topic, "tick"); err != nil {
		t.Fatal(err)
	}
	if s, err := c.GetSchedule(ctx, topic, "tick"); err != nil || !s.Paused || s.Next(time.Now(), 1) != nil {
		t.Errorf("paused schedule: %+v, %v", s, err)
	}
	time.Sleep(2500 * time.Millisecond)
	resumed := time.Now()
	if err := c.ResumeSchedule(ctx, topic, "tick"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	deleted := time.Now()
	if err := c.DeleteSchedule(ctx, topic, "tick"); err != nil {
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
	st, err := c.Stats(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if st.Scheduled != 0 || st.InFlight != 0 {
		t.Errorf("after delete: %d scheduled, %d in flight", st.Scheduled, st.InFlight)
	}
	if all, err := c.Schedules(ctx, topic); err != nil || len(all) != 0 {
		t.Errorf("schedules after delete: %v, %v", all, err)
	}
	if err := c.DeleteSchedule(ctx, topic, "tick"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete again: %v, want ErrNotFound", err)
	}
}

// A replaced schedule's pending occurrence is removed at once, and a
// stale chain step (of the old version) writes nothing.
func TestScheduleReplaceRemovesPending(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 4})
	topic := "sched-replace"
	a, err := c.SetSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 3 * * *", TimeZone: "Asia/Shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	p := schedulePartition("daily", 4)
	first, err := c.store.ScheduleMark(ctx, topic, p, "daily")
	if err != nil || first == "" {
		t.Fatalf("mark: %q %v", first, err)
	}
	if _, err := c.Get(ctx, topic, first); err != nil {
		t.Fatalf("first occurrence: %v", err)
	}
	b, err := c.SetSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 4 * * *", TimeZone: "Asia/Shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Version <= a.Version {
		t.Errorf("version %d after %d", b.Version, a.Version)
	}
	if _, err := c.Get(ctx, topic, first); !errors.Is(err, ErrNotFound) {
		t.Errorf("the replaced schedule's occurrence %s: %v, want ErrNotFound", first, err)
	}
	second, _ := c.store.ScheduleMark(ctx, topic, p, "daily")
	in, err := c.Get(ctx, topic, second)
	if err != nil {
		t.Fatal(err)
	}
	if h := in.Due.In(time.FixedZone("CST", 8*3600)).Hour(); h != 4 {
		t.Errorf("new occurrence due %v, at %d:00 Shanghai, want 4:00", in.Due, h)
	}
	// @every counts from the change: the listed next occurrence is the
	// pending one.
	ev, err := c.SetSchedule(ctx, topic, Schedule{Name: "ev", Spec: "@every 7s"})
	if err != nil {
		t.Fatal(err)
	}
	evMark, _ := c.store.ScheduleMark(ctx, topic, schedulePartition("ev", 4), "ev")
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
	st, _ := c.Stats(ctx, topic)
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
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "m", Spec: "* * * * *"}); err != nil {
		t.Fatal(err)
	}
	p := schedulePartition("m", 2)
	first, _ := c.store.ScheduleMark(ctx, topic, p, "m")
	_, _, at, _ := ParseScheduleID(first)
	later := at.Add(10*time.Minute + 30*time.Second)
	down := newClient(t, env.Backends[0], Options{Partitions: 2, Now: func() time.Time { return later }})
	run, err := down.occurrence(ctx, topic, first, 1)
	if err != nil || run {
		t.Fatalf("missed occurrence under skip: run %v, %v", run, err)
	}
	latest, _ := c.store.ScheduleMark(ctx, topic, p, "m")
	if _, _, lat, _ := ParseScheduleID(latest); !lat.Equal(at.Add(10 * time.Minute)) {
		t.Errorf("written after the miss: %s, want the occurrence at %v", latest, at.Add(10*time.Minute))
	}
	// A retry is no missed occurrence: it runs when its backoff brings it.
	if run, err := down.occurrence(ctx, topic, first, 2); err != nil || !run {
		t.Errorf("retry of an old occurrence: run %v, %v", run, err)
	}
	// all: the missed occurrence runs and chains the next.
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "m", Spec: "* * * * *", Policy: PolicyAll}); err != nil {
		t.Fatal(err)
	}
	first, _ = c.store.ScheduleMark(ctx, topic, p, "m")
	_, _, at, _ = ParseScheduleID(first)
	later = at.Add(10*time.Minute + 30*time.Second)
	run, err = down.occurrence(ctx, topic, first, 1)
	if err != nil || !run {
		t.Fatalf("missed occurrence under all: run %v, %v", run, err)
	}
	nxt, _ := c.store.ScheduleMark(ctx, topic, p, "m")
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
		_, err := sc.SetSchedule(ctx, "sched-cost", Schedule{Name: "s" + itoa5(i), Spec: spec, Body: body})
		return err
	})
	addTook, addCmds, addMem := time.Since(t0), sc.Commands()-c0, memory()-m0

	m0, c0 = memory(), mc.Commands()
	parallel(func(i int) error {
		_, err := mc.Enqueue(ctx, Message{Topic: "msg-cost", ID: "order-" + itoa5(i), At: due, Body: body})
		return err
	})
	msgCmds, msgMem := mc.Commands()-c0, memory()-m0

	c0, t0 = sc.Commands(), time.Now()
	all, err := sc.Schedules(ctx, "sched-cost")
	if err != nil {
		t.Fatal(err)
	}
	listTook, listCmds := time.Since(t0), sc.Commands()-c0
	if len(all) != n {
		t.Errorf("%d schedules listed, want %d", len(all), n)
	}
	if st, _ := sc.Stats(ctx, "sched-cost"); st.Scheduled != n {
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
		got, err := c.ApplySchedules(ctx, topic, defs)
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
		s, err := c.GetSchedule(ctx, topic, name)
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
	if err := c.PauseSchedule(ctx, topic, "a"); err != nil {
		t.Fatal(err)
	}
	apply(file, "kept")
	if !get("a").Paused {
		t.Error("the file undid a pause")
	}
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "a", Spec: "0 4 * * *"}); err != nil {
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
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "b", Spec: "@hourly"}); err != nil {
		t.Fatal(err)
	}
	apply(append(file, Schedule{Name: "b", Spec: "@daily"}), "kept", "replaced")
	if get("b").Spec != "@daily" {
		t.Error("b not replaced")
	}
	// Every definition is checked before any is written.
	if _, err := c.ApplySchedules(ctx, topic, []Schedule{{Name: "c", Spec: "@daily"}, {Name: "d", Spec: "bad"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `spec "bad"`) {
		t.Errorf("bad file: %v", err)
	}
	if _, err := c.GetSchedule(ctx, topic, "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("c written from a file with an error: %v", err)
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
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "m", Spec: "@every 10s"}); err != nil {
		t.Fatal(err)
	}
	first, _ := c.store.ScheduleMark(ctx, topic, p, "m")
	if err := c.Delete(ctx, topic, first); err != nil {
		t.Fatal(err)
	}
	if err := c.ResumeSchedule(ctx, topic, "m"); err != nil {
		t.Fatal(err)
	}
	mended, _ := c.store.ScheduleMark(ctx, topic, p, "m")
	if mended == first {
		t.Fatalf("resume did not mend the chain: mark %s", mended)
	}
	if in, err := c.Get(ctx, topic, mended); err != nil || in.State != StateScheduled {
		t.Fatalf("mended occurrence %s: %+v, %v", mended, in, err)
	}
	// Resuming a schedule whose chain runs writes nothing.
	if err := c.ResumeSchedule(ctx, topic, "m"); err != nil {
		t.Fatal(err)
	}
	if again, _ := c.store.ScheduleMark(ctx, topic, p, "m"); again != mended {
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
	done, err := c.ApplySchedules(ctx, topic, file)
	if err != nil || done[0].Action != "kept" {
		t.Fatalf("apply: %v, %v", done, err)
	}
	if mark, _ := c.store.ScheduleMark(ctx, topic, schedulePartition("f", 4), "f"); mark == "" {
		t.Error("the kept schedule's chain was not started")
	}
}
