package test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// TestMoveBetweenClustersWithSchedule moves a topic with a schedule from
// one Twemproxy cluster to another by the procedure of
// docs/export-import.md: consumers on both clusters (1), the old
// cluster's stopped (3), export (4), import into another partition count
// (5), delete from the old cluster (6). The
// schedule, in America/New_York with max attempts 3, fires every 2 s
// throughout: each occurrence is delivered once, by one cluster, the old
// one's up to the switch and the new one's from the next occurrence on,
// none lost or early; the new cluster holds the definition as it was, the
// old one nothing, and a consumer started on the old cluster afterwards
// delivers nothing while the new one goes on.
func TestMoveBetweenClustersWithSchedule(t *testing.T) {
	t.Parallel()
	from := testenv.Start(t, testenv.Options{Backends: 2})
	to := testenv.Start(t, testenv.Options{Backends: 2})
	const topic, name = "moving-cron", "tick"
	mustCLI(t, "", "schedule", "add", "--addr", from.Proxy, "--topic", topic, "--partitions", "4", "--name", name,
		"--spec", "*/2 * * * * *", "--tz", "America/New_York", "--max-attempts", "3", "--body", "tick")
	mustCLI(t, "", "send", "--addr", from.Proxy, "--topic", topic, "--id", "order-1", "--body", "later", "--delay", "1h")

	// 1. Consumers on both clusters: the new one's topic is empty.
	la, lb := newLedger(), newLedger()
	subA := startSub(t, la, 0, "--addr", from.Proxy, "--topic", topic, "--poll", "100ms")
	startSub(t, lb, 1, "--addr", to.Proxy, "--topic", topic, "--poll", "100ms", "--partitions", "8")
	waitFor(t, 20*time.Second, func() bool { return len(occurrences(la, name)) >= 2 }, "two occurrences on the old cluster")
	// 3. The old cluster's consumer stops.
	if code := subA.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("the old cluster's consumer exited %d: %s", code, subA.stderr.String())
	}
	// 4. Export.
	file := filepath.Join(t.TempDir(), "moving.jsonl")
	r := mustCLI(t, "", "export", "--addr", from.Proxy, "--topic", topic, "--out", file)
	if !strings.Contains(r.stderr, "exported 1 schedule of moving-cron") {
		t.Fatalf("export summary: %s", r)
	}
	// 5. Import: the schedule, its chain going on at its pending
	// occurrence; the old cluster's occurrence left out.
	r = mustCLI(t, "", "import", "--addr", to.Proxy, "--topic", topic, "--in", file)
	for _, w := range []string{"imported 1 of 1 message into", "imported 1 of 1 schedule into moving-cron", "left out 1 occurrence of schedules"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("import does not say %q: %s", w, r)
		}
	}
	// Again: the schedule and the message are duplicates, nothing changes.
	r = cli(t, "", "import", "--addr", to.Proxy, "--topic", topic, "--in", file)
	wantExit(t, r, 1, "1 of 1 message not imported: 1 duplicate,", "1 of 1 schedule not imported")
	if !strings.Contains(r.stderr, `schedule "tick" of topic moving-cron exists already`) {
		t.Errorf("second import does not name the schedule it left alone: %s", r)
	}
	// 6. Delete from the old cluster what was moved, the schedule too.
	r = mustCLI(t, "", "delete", "--addr", from.Proxy, "--topic", topic, "--in", file)
	if !strings.Contains(r.stdout, "deleted 2 messages of moving-cron; 0 were gone already") ||
		!strings.Contains(r.stdout, "deleted 1 schedule of moving-cron; 0 were gone already") {
		t.Fatalf("delete --in: %s", r)
	}
	if out := mustCLI(t, "", "schedule", "list", "--addr", from.Proxy, "--topic", topic, "--json").stdout; out != "" {
		t.Errorf("the old cluster still has schedules: %s", out)
	}
	if st := stats(t, from.Proxy, topic); st.Scheduled+st.InFlight+st.Dead != 0 {
		t.Errorf("the old cluster still holds %d scheduled, %d in flight, %d dead", st.Scheduled, st.InFlight, st.Dead)
	}
	var def struct {
		TZ          string `json:"tz"`
		MaxAttempts int    `json:"max_attempts"`
		Spec        string `json:"spec"`
		Body        string `json:"body"`
	}
	out := mustCLI(t, "", "schedule", "list", "--addr", to.Proxy, "--topic", topic, "--json").stdout
	if err := json.Unmarshal([]byte(out), &def); err != nil || def.TZ != "America/New_York" || def.MaxAttempts != 3 || def.Spec != "*/2 * * * * *" || def.Body != "tick" {
		t.Errorf("the new cluster's schedule: %v %s", err, out)
	}

	// A consumer on the old cluster again: it delivers nothing while the
	// new cluster delivers three more occurrences.
	subA2 := startSub(t, la, 2, "--addr", from.Proxy, "--topic", topic, "--poll", "100ms")
	before := len(occurrences(la, name))
	waitFor(t, 30*time.Second, func() bool { return len(occurrences(lb, name)) >= 4 }, "four occurrences on the new cluster")
	subA2.stop(t, 30*time.Second)
	oa, ob := occurrences(la, name), occurrences(lb, name)
	if len(oa) != before {
		t.Errorf("the old cluster delivered %d occurrences after the move", len(oa)-before)
	}
	byTime := map[time.Time]int{}
	for _, o := range append(oa, ob...) {
		byTime[o.time]++
		if o.at.Before(o.time) {
			t.Errorf("%s delivered at %v, before its time", o.ID, o.at)
		}
		if string(o.body) != "tick" {
			t.Errorf("%s delivered with body %q", o.ID, o.body)
		}
	}
	for at, n := range byTime {
		if n != 1 {
			t.Errorf("the occurrence at %v was delivered %d times", at, n)
		}
	}
	// The new cluster goes on at the occurrence after the old one's last:
	// every 2 s from the first occurrence to the last, none missing.
	last := oa[len(oa)-1].time
	if first := ob[0].time; !first.Equal(last.Add(2 * time.Second)) {
		t.Errorf("the new cluster's first occurrence is at %v, the old one's last at %v: want the next, 2 s later", first, last)
	}
	all := append(oa, ob...)
	for i := 1; i < len(all); i++ {
		if d := all[i].time.Sub(all[i-1].time); d != 2*time.Second {
			t.Errorf("occurrences %v and %v are %v apart, want 2s", all[i-1].time, all[i].time, d)
		}
	}
}
