package test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/partition"
)

// occurrence is one delivery of a schedule's occurrence, read from a
// sub's output.
type occurrence struct {
	delivery
	name    string
	version int64
	time    time.Time
}

// occurrences returns the deliveries of schedule name, in the order of
// their occurrence times, then of delivery.
func occurrences(l *ledger, name string) []occurrence {
	var out []occurrence
	for _, d := range l.snapshot() {
		n, v, at, ok := delayq.ParseScheduleID(d.ID)
		if ok && n == name {
			out = append(out, occurrence{delivery: d, name: n, version: v, time: at})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].time.Equal(out[j].time) {
			return out[i].time.Before(out[j].time)
		}
		return out[i].at.Before(out[j].at)
	})
	return out
}

// TestScheduleFaults: three "delayq sub" consumers through Twemproxy, at
// the production lease (10 s) and handler timeout (30 s). A schedule
// "@every 1s" runs for 30 s; at 10 s the owner of its partition is
// killed with SIGKILL, and once another sub took the partition over, that
// one is stopped with SIGSTOP past its lease, then continued. Every
// occurrence from the first to the 30th second is delivered, once (a
// repeat is allowed only of a delivery a victim started before its fault,
// whose ack it never sent), never before its time, and within the
// takeover bound (2 leases + a poll + 1 s) of it: the SIGSTOP comes once
// the first takeover's backlog is delivered, so that no occurrence waits
// for two takeovers in a row. A second schedule
// "@every 2s" is replaced (a new body) and then paused and resumed
// mid-run, through the CLI: no occurrence of the old definition comes
// after the change, none falls in the pause, and each definition's
// occurrences have no gap.
func TestScheduleFaults(t *testing.T) {
	t.Parallel()
	const parts = 8
	lease := delayq.DefaultLease
	bound := 2*lease + delayq.DefaultPollInterval + time.Second
	env := testenv.Start(t, testenv.Options{Backends: 3})
	addr, topic := env.Proxy, "sched.faults"
	c := faultClient(t, addr, parts)
	l := newLedger()
	var subs []*sub
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("sched-%d", i)
		ids = append(ids, id)
		subs = append(subs, startSub(t, l, i, append([]string{"--addr", addr, "--topic", topic,
			"--id", id, "--log-level", "info"}, partitionsFlag(parts)...)...))
	}
	waitOwners(t, c, topic, time.Now(), 15*time.Second, "a fair share", func(o ownership) bool {
		return o.ownedFairlyBy(parts, ids...)
	})
	byID := func(id string) *sub {
		for i, x := range ids {
			if x == id {
				return subs[i]
			}
		}
		t.Fatalf("no sub %q", id)
		return nil
	}
	sched := func(args ...string) result {
		return mustCLI(t, "", append([]string{"schedule", args[0], "--addr", addr, "--topic", topic}, args[1:]...)...)
	}

	s0 := time.Now()
	sched("add", "--name", "tick", "--spec", "@every 1s", "--body", "tick")
	sched("add", "--name", "beat", "--spec", "@every 2s", "--body", "v1")
	if out := sched("list").stdout; !strings.Contains(out, "tick") || !strings.Contains(out, "beat") || !strings.Contains(out, "@every 2s") {
		t.Errorf("schedule list:\n%s", out)
	}
	ps := partition.For(delayq.ScheduleIDPrefix+"tick", parts)

	time.Sleep(time.Until(s0.Add(5 * time.Second)))
	changed := time.Now()
	if out := sched("add", "--name", "beat", "--spec", "@every 2s", "--body", "v2", "--replace").stdout; !strings.Contains(out, `body: "v1" -> "v2"`) {
		t.Errorf("schedule add --replace:\n%s", out)
	}
	// The change takes effect at some instant within the command: its
	// first occurrence is bounded from the command's return.
	changeReturned := time.Now()

	// SIGKILL the owner of tick's partition at 10 s.
	time.Sleep(time.Until(s0.Add(10 * time.Second)))
	o, err := readOwnership(c, topic)
	if err != nil {
		t.Fatal(err)
	}
	killedID := o.owner[ps]
	killed := byID(killedID)
	killAt := time.Now()
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var stoppedID string
	killHandover := waitOwners(t, c, topic, killAt, 3*lease, "another sub owning the schedule's partition", func(o ownership) bool {
		stoppedID = o.owner[ps]
		return stoppedID != "" && stoppedID != killedID
	})

	// SIGSTOP its new owner, past its lease, once it has delivered what
	// the killed one left (two takeovers in a row would add up); meanwhile
	// pause beat, and resume it.
	stopped := byID(stoppedID)
	// No bound of its own: under the load of the package's other
	// parallel scenarios the catch-up has taken more than 10 s.
	waitFor(t, 20*time.Second, func() bool {
		oc := occurrences(l, "tick")
		return len(oc) > 0 && oc[len(oc)-1].sub == stopped.idx && oc[len(oc)-1].time.After(time.Now().Add(-1500*time.Millisecond))
	}, "the new owner of tick's partition to catch up")
	stopAt := time.Now()
	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	sched("pause", "--name", "beat")
	time.Sleep(4 * time.Second)
	resumedAt := time.Now()
	sched("resume", "--name", "beat")
	resumeReturned := time.Now()
	stopHandover := waitOwners(t, c, topic, stopAt, 3*lease, "the third sub owning the schedule's partition", func(o ownership) bool {
		return o.owner[ps] != "" && o.owner[ps] != killedID && o.owner[ps] != stoppedID
	})
	time.Sleep(time.Until(stopAt.Add(lease + 2*time.Second)))
	contAt := time.Now()
	if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// Every occurrence of tick up to 30 s comes, within the bound.
	cutoff := s0.Add(30 * time.Second)
	waitFor(t, time.Until(cutoff.Add(bound+5*time.Second)), func() bool {
		oc := occurrences(l, "tick")
		return len(oc) > 0 && !oc[len(oc)-1].time.Before(cutoff)
	}, "the occurrences of tick up to %v", cutoff)
	time.Sleep(2 * time.Second)
	ended := time.Now()
	sched("delete", "--name", "tick")
	sched("delete", "--name", "beat")
	// An occurrence a chain step wrote as the delete ran (it read the
	// definition before) is due within 2 s and acked without its handler.
	if !poll(5*time.Second, func() bool {
		ts, err := c.Inspector().Stats(t.Context(), topic)
		return err == nil && ts.Scheduled == 0 && ts.InFlight == 0
	}) {
		ts, err := c.Inspector().Stats(t.Context(), topic)
		t.Errorf("after the deletes: %d scheduled, %d in flight (%v)", ts.Scheduled, ts.InFlight, err)
	}
	stopAllSubs(t, subs)

	victims := map[int]time.Time{killed.idx: killAt, stopped.idx: stopAt}
	// A second delivery is allowed only of one a victim started before
	// its fault (at-least-once: it never acked). The stopped sub's handler
	// stamps delivered_at itself: one whose lease check ran before the
	// stop prints its line as the process continues, within a second of
	// contAt (after the stop the lease is long expired on the sub's own
	// clock, so no check it runs then passes).
	excused := func(ds []occurrence) bool {
		if len(ds) != 2 {
			return false
		}
		for _, d := range ds {
			f, ok := victims[d.sub]
			inHand := d.sub == stopped.idx && !d.at.Before(contAt) && d.at.Before(contAt.Add(time.Second))
			if ok && (d.at.Before(f) || inHand) {
				return true
			}
		}
		return false
	}
	oc := occurrences(l, "tick")
	first := oc[0].time
	if first.Before(s0) || first.After(s0.Add(2*time.Second)) {
		t.Errorf("tick's first occurrence at %v, want within 2 s of its add at %v", first, s0)
	}
	byTime := map[int64][]occurrence{}
	var maxLate time.Duration
	dups, excusedDups := 0, 0
	for _, d := range oc {
		byTime[d.time.UnixMilli()] = append(byTime[d.time.UnixMilli()], d)
		switch {
		case !d.due.Equal(d.time):
			t.Errorf("%s delivered with due %s, want its time", d.ID, d.Due)
		case d.at.Before(d.time):
			t.Errorf("%s delivered early, at %s", d.ID, d.DeliveredAt)
		case string(d.body) != "tick":
			t.Errorf("%s: body %q", d.ID, d.body)
		}
		if late := d.at.Sub(d.time); d.Attempt == 1 && late > maxLate {
			maxLate = late
		}
		if late := d.at.Sub(d.time); late > bound {
			t.Errorf("%s delivered %v after its time, want within %v: %s", d.ID, late.Round(time.Millisecond), bound, d.DeliveredAt)
		}
	}
	want, lost := 0, 0
	for at := first; !at.After(cutoff); at = at.Add(time.Second) {
		want++
		ds := byTime[at.UnixMilli()]
		switch {
		case len(ds) == 0:
			lost++
			t.Errorf("tick's occurrence at %v was not delivered", at)
		case len(ds) > 1 && excused(ds):
			excusedDups += len(ds) - 1
		case len(ds) > 1:
			dups += len(ds) - 1
			t.Errorf("tick's occurrence at %v delivered %d times: %s", at, len(ds), describeOcc(ds))
		}
	}
	for ms := range byTime {
		if (ms-first.UnixMilli())%1000 != 0 {
			t.Errorf("tick occurrence at %v is not on the schedule", time.UnixMilli(ms))
		}
	}

	// beat: versions in order, no old body after the change, nothing in
	// the pause, no gap within a version.
	bo := occurrences(l, "beat")
	versions := map[int64][]time.Time{}
	var vorder []int64
	seen := map[string][]occurrence{}
	for _, d := range bo {
		seen[d.ID] = append(seen[d.ID], d)
		if len(seen[d.ID]) > 1 {
			continue
		}
		if _, ok := versions[d.version]; !ok {
			vorder = append(vorder, d.version)
		}
		versions[d.version] = append(versions[d.version], d.time)
		switch {
		case d.at.Before(d.time):
			t.Errorf("%s delivered early, at %s", d.ID, d.DeliveredAt)
		case string(d.body) == "v1" && d.time.After(changed.Add(time.Second)):
			t.Errorf("%s of the replaced definition (body v1) delivered after the change at %v", d.ID, changed)
		case d.time.After(pausedAt.Add(time.Second)) && !d.time.After(resumedAt):
			t.Errorf("%s: occurrence in the pause (%v to %v)", d.ID, pausedAt, resumedAt)
		}
	}
	for id, ds := range seen {
		if len(ds) > 1 && !excused(ds) {
			dups += len(ds) - 1
			t.Errorf("beat's occurrence %s delivered %d times: %s", id, len(ds), describeOcc(ds))
		}
	}
	sort.Slice(vorder, func(i, j int) bool { return vorder[i] < vorder[j] })
	if len(vorder) != 3 {
		t.Errorf("beat delivered %d versions, want 3 (added, replaced, resumed)", len(vorder))
	}
	for _, v := range vorder {
		ts := versions[v]
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) != 2*time.Second {
				t.Errorf("beat version %d: occurrence %v after %v, want 2 s apart", v, ts[i], ts[i-1])
			}
		}
	}
	if len(vorder) == 3 {
		if v2 := versions[vorder[1]][0]; v2.After(changeReturned.Add(2 * time.Second)) {
			t.Errorf("beat's first occurrence after the change (returned at %v) is at %v", changeReturned, v2)
		}
		if v3 := versions[vorder[2]][0]; v3.After(resumeReturned.Add(2 * time.Second)) {
			t.Errorf("beat's first occurrence after the resume (returned at %v) is at %v", resumeReturned, v3)
		}
	}
	t.Logf("tick: %d occurrences to %v, %d deliveries; killed %s at %v, stopped %s at %v (continued %v later); window %v",
		want, cutoff.Sub(s0), len(oc), killedID, killAt.Sub(s0).Round(time.Millisecond), stoppedID, stopAt.Sub(s0).Round(time.Millisecond),
		contAt.Sub(stopAt).Round(time.Millisecond), ended.Sub(s0).Round(time.Second))
	testenv.Figure(t, "scenario=schedule-kill-stop occurrences=%d deliveries=%d duplicates=%d victim_repeats=%d lost=%d early=0 max_late_ms=%d bound_ms=%d kill_handover_ms=%d stop_handover_ms=%d beat_versions=%d",
		want, len(oc), dups, excusedDups, lost, maxLate.Milliseconds(), bound.Milliseconds(), killHandover.Milliseconds(), stopHandover.Milliseconds(), len(vorder))
}

func describeOcc(ds []occurrence) string {
	var b []delivery
	for _, d := range ds {
		b = append(b, d.delivery)
	}
	return describe(b)
}

// TestScheduleWorkerTOML: a worker applies its [[topic.schedule]] tables
// when it starts, and a restart with the same file keeps a pause made at
// run time; an edit of the file replaces the schedule, still paused.
func TestScheduleWorkerTOML(t *testing.T) {
	t.Parallel() // measures no lateness: runs beside the other parallel tests
	env := testenv.Start(t, testenv.Options{Backends: 2})
	dir := t.TempDir()
	out := filepath.Join(dir, "exec.out")
	cfgPath := filepath.Join(dir, "worker.toml")
	writeCfg := func(body string) {
		wWriteFile(t, cfgPath, fmt.Sprintf(`
[redis]
addr = %q

[worker]
lease = "2s"

[[topic]]
name = "wk.sched"
partitions = 4
[topic.handler]
type = "exec"
command = ["sh", "-c", 'printf "%%s " "$DELAYQ_ID" >>"$1"; cat >>"$1"; echo >>"$1"', "sh", %q]

[[topic.schedule]]
name = "tick"
spec = "@every 1s"
body = %q
`, env.Proxy, out, body))
	}
	lines := func() []string {
		b, _ := os.ReadFile(out)
		return strings.Fields(strings.ReplaceAll(string(b), "\n", " "))
	}
	count := func(body string) int {
		n := 0
		for _, f := range lines() {
			if f == body {
				n++
			}
		}
		return n
	}
	sched := func(args ...string) result {
		return mustCLI(t, "", append([]string{"schedule", args[0], "--addr", env.Proxy, "--topic", "wk.sched"}, args[1:]...)...)
	}
	writeCfg("from-file")
	w := wStartWorker(t, "--config", cfgPath)
	waitFor(t, 10*time.Second, func() bool { return count("from-file") >= 2 }, "two occurrences delivered by the worker")
	if out := sched("list", "--json").stdout; !strings.Contains(out, `"source":"toml"`) || !strings.Contains(out, `"spec":"@every 1s"`) {
		t.Errorf("schedule list: %s", out)
	}
	if out := mustCLI(t, "", "partitions", "--addr", env.Proxy, "--topic", "wk.sched").stdout; !strings.Contains(out, "4 partitions") {
		t.Errorf("the file's partition count was not kept: %s", out)
	}
	sched("pause", "--name", "tick")
	paused := time.Now()
	if code := w.stop(t, 20*time.Second); code != 0 {
		t.Fatalf("worker exit %d", code)
	}
	w = wStartWorker(t, "--config", cfgPath)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(w.stderr.String(), "schedule applied") }, "the schedules applied")
	if log := w.stderr.String(); !strings.Contains(log, "action=kept") {
		t.Errorf("restart with the same file: %s", clip(log))
	}
	n := count("from-file")
	time.Sleep(2500 * time.Millisecond)
	if m := count("from-file"); m != n {
		t.Errorf("%d deliveries after the restart: the file undid the pause at %v", m-n, paused)
	}
	w.stop(t, 20*time.Second)

	// An edit of the file replaces the schedule, which stays paused until
	// resumed.
	writeCfg("edited")
	w = wStartWorker(t, "--config", cfgPath)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(w.stderr.String(), "action=replaced") }, "the edited schedule replaced")
	if out := sched("list").stdout; !strings.Contains(out, "paused") {
		t.Errorf("the replaced schedule is not paused: %s", out)
	}
	sched("resume", "--name", "tick")
	waitFor(t, 10*time.Second, func() bool { return count("edited") >= 2 }, "the edited schedule's occurrences")
	w.stop(t, 20*time.Second)
}
