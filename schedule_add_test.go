package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// AddSchedule refuses a name in use, naming the schedule, its topic and
// its definition, and changes nothing; SetSchedule still replaces. The
// errors for a missing schedule name it and its topic, not a message,
// and match ErrNotFound.
func TestScheduleAddRefusesExisting(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	c := newClient(t, env.Backends[0], Options{Partitions: 4})
	const topic = "sched-add"
	first, err := c.AddSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 9 * * *", TimeZone: "America/New_York", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AddSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 9 * * *"})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("second add: %v, want ErrExists", err)
	}
	for _, w := range []string{`schedule "daily" of topic sched-add exists already`, `"0 9 * * *" in America/New_York`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	got, err := c.GetSchedule(ctx, topic, "daily")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != first.Version || got.TimeZone != "America/New_York" || got.MaxAttempts != 3 {
		t.Errorf("after a refused add: %+v, want it unchanged: %+v", got, first)
	}
	if _, err := c.SetSchedule(ctx, topic, Schedule{Name: "daily", Spec: "0 9 * * *"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetSchedule(ctx, topic, "daily"); got == nil || got.TimeZone != "" || got.Version == first.Version {
		t.Errorf("SetSchedule did not replace: %+v", got)
	}

	for name, err := range map[string]error{
		"get":    func() error { _, err := c.GetSchedule(ctx, topic, "nope"); return err }(),
		"pause":  c.PauseSchedule(ctx, topic, "nope"),
		"resume": c.ResumeSchedule(ctx, topic, "nope"),
		"delete": c.DeleteSchedule(ctx, topic, "nope"),
	} {
		if !errors.Is(err, ErrNotFound) || err.Error() != `delayq: schedule "nope" of topic sched-add not found` {
			t.Errorf("%s of a missing schedule: %v, want ErrNotFound naming the schedule and topic", name, err)
		}
	}
}
