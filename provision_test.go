package delayq

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// ProposeTopic creates a topic with the configured count and stores each
// proposed setting on a topic that never had one decided; proposed
// again, it leaves the settings a person changed since as they are,
// reports them, and warns naming both values.
func TestProposeTopic(t *testing.T) {
	ctx := context.Background()
	var logs testenv.Buffer
	c := newClient(t, startDirect(t), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	day := 24 * time.Hour
	cfg := TopicConfig{
		Topic: "prop", Partitions: 3, UniqueFor: &day,
		Limits:         &Limits{Rate: 50},
		AutoPartitions: &AutoPartitions{Min: 2, Max: 8},
		Schedules:      []Schedule{{Name: "tick", Spec: "@every 1h"}},
	}
	auto, lim := cfg.AutoPartitions.withDefaults().String(), cfg.Limits.String()
	p, err := c.Admin().ProposeTopic(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := &TopicProposal{
		Partitions: 3,
		Settings: []Proposed{
			{Setting: "limits", Proposed: lim, Stored: lim, Written: true},
			{Setting: "unique_for", Proposed: "24h0m0s", Stored: "24h0m0s", Written: true},
			{Setting: "auto_partitions", Proposed: auto, Stored: auto, Written: true},
		},
		Schedules: []ScheduleApplied{{Name: "tick", Action: "created"}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("first proposal:\n%+v\nwant\n%+v", p, want)
	}
	if d, err := c.Inspector().UniqueFor(ctx, "prop"); err != nil || d != day {
		t.Errorf("stored window %v, %v; want 24h", d, err)
	}
	if !strings.Contains(logs.String(), `msg="topic limits set" topic=prop setting="`+lim+`"`) {
		t.Errorf("no info line for the limits set:\n%s", logs.String())
	}

	// A person changes each setting; the same file proposed again (a
	// restart) undoes none of them.
	if err := c.Admin().SetLimits(ctx, "prop", Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetUniqueFor(ctx, "prop", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetAutoPartitions(ctx, "prop", nil); err != nil {
		t.Fatal(err)
	}
	p, err = c.Admin().ProposeTopic(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want.Settings = []Proposed{
		{Setting: "limits", Proposed: lim, Stored: "none"},
		{Setting: "unique_for", Proposed: "24h0m0s", Stored: "1h0m0s"},
		{Setting: "auto_partitions", Proposed: auto, Stored: "off"},
	}
	want.Schedules = []ScheduleApplied{{Name: "tick", Action: "kept"}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("proposal after a person's changes:\n%+v\nwant\n%+v", p, want)
	}
	if l, err := c.Inspector().Limits(ctx, "prop"); err != nil || !l.IsZero() {
		t.Errorf("limits after the second proposal: %+v, %v; want the cleared ones", l, err)
	}
	if a, err := c.Inspector().AutoPartitionsOf(ctx, "prop"); err != nil || a != nil {
		t.Errorf("automatic count after the second proposal: %+v, %v; want off", a, err)
	}
	for _, line := range []string{
		`the topic's stored limits differ from the configured ones`,
		`the topic's stored uniqueness window differs from the configured one; the stored one applies (change it with delayq unique-for)" topic=prop stored=1h0m0s configured=24h0m0s`,
		`the topic's stored automatic partition count differs from the configured one`,
	} {
		if !strings.Contains(logs.String(), "level=WARN msg=\""+line) {
			t.Errorf("no warning %q:\n%s", line, logs.String())
		}
	}
}

// A topic created on an automatic count, with no count of its own,
// starts with the client's count brought within Min and Max.
func TestProposeTopicAutoBounds(t *testing.T) {
	c := newClient(t, startDirect(t), Options{Partitions: 32})
	p, err := c.Admin().ProposeTopic(context.Background(), TopicConfig{Topic: "bounded", AutoPartitions: &AutoPartitions{Min: 2, Max: 8}})
	if err != nil || p.Partitions != 8 {
		t.Fatalf("proposal: %+v, %v; want 8 partitions", p, err)
	}
}

// A bad value is refused naming its field, before anything is written.
func TestProposeTopicInvalid(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startDirect(t), Options{})
	neg := -time.Second
	for _, tc := range []struct {
		cfg  TopicConfig
		name string
	}{
		{TopicConfig{Topic: "bad/topic"}, "bad/topic"},
		{TopicConfig{Topic: "t", Partitions: -1}, "TopicConfig.Partitions"},
		{TopicConfig{Topic: "t", Limits: &Limits{Rate: -1}}, "TopicConfig.Limits"},
		{TopicConfig{Topic: "t", UniqueFor: &neg}, "TopicConfig.UniqueFor"},
		{TopicConfig{Topic: "t", AutoPartitions: &AutoPartitions{Min: 9, Max: 8}}, "TopicConfig.AutoPartitions"},
		{TopicConfig{Topic: "t", Schedules: []Schedule{{Name: "x", Spec: "61 * * * *"}}}, "TopicConfig.Schedules"},
	} {
		_, err := c.Admin().ProposeTopic(ctx, tc.cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("ProposeTopic(%+v): %v; want ErrInvalid naming %s", tc.cfg, err, tc.name)
		}
	}
	if _, err := c.Inspector().Partitions(ctx, "t"); !errors.Is(err, ErrNoTopic) {
		t.Errorf("after refused proposals: %v; want ErrNoTopic (nothing written)", err)
	}
}

// While Redis cannot be reached, ProposeTopic waits for it until its
// context ends, as a consumer starting does, rather than failing; the
// outage is logged once, as such.
func TestProposeTopicWaitsForRedis(t *testing.T) {
	var logs testenv.Buffer
	c := newClient(t, "127.0.0.1:1", Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Admin().ProposeTopic(ctx, TopicConfig{Topic: "waits"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 500*time.Millisecond {
		t.Errorf("ProposeTopic with Redis unreachable: %v after %v; want the context's deadline, having waited for it", err, time.Since(start))
	}
	if n := strings.Count(logs.String(), `msg="outage: no address answers; waiting for one"`); n != 1 || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the outage logged %d times, want once, and no warning of each try:\n%s", n, logs.String())
	}
}
