package metrics

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
)

// runConsumer runs a consumer of topic on c until the test ends.
func runConsumer(t *testing.T, c *delayq.Client, topic string) *delayq.Consumer {
	t.Helper()
	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: topic, Lease: 2 * time.Second},
		func(context.Context, *delayq.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := k.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return k
}

// The topic gauges equal what Inspector.Stats reads, once per topic whatever
// the consumers a process adds, and two processes (two registries) report
// the same values: max() over workers is the fleet's figure.
func TestTopicGauges(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	topic := "gauges"
	base := time.Now().Truncate(time.Millisecond)
	// The stats clock stands still, so that the lag does not move between
	// the scrape and Stats; the consumers' heartbeats run on the real
	// clock, ahead of it.
	still := func(t *testing.T) *delayq.Client {
		c, err := delayq.New(delayq.Options{Addr: env.Backends[0], Partitions: 4, Logger: quiet, Now: func() time.Time { return base }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := still(t)
	for i, at := range []time.Duration{-3 * time.Second, -time.Second, -2 * time.Second, time.Hour, 2 * time.Hour} {
		if _, err := c.Send(ctx, delayq.Message{Topic: topic, ID: "m" + string(rune('0'+i)), At: base.Add(at)}); err != nil {
			t.Fatal(err)
		}
	}
	// Paused: the consumers leave the due messages where they are.
	if err := c.Admin().Pause(ctx, topic, delayq.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, topic, delayq.Limits{Rate: 50, Concurrency: 7}); err != nil {
		t.Fatal(err)
	}
	var regs []*prometheus.Registry
	for range 2 { // two workers, each with two consumers of the topic
		kc, err := delayq.New(delayq.Options{Addr: env.Backends[0], Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		reg := prometheus.NewRegistry()
		m, sc := mustNew(t, reg), still(t)
		m.AddConsumer(topic, sc, runConsumer(t, kc, topic))
		m.AddConsumer(topic, sc, runConsumer(t, kc, topic))
		regs = append(regs, reg)
	}
	var (
		ts  *delayq.TopicStats
		err error
	)
	waitFor(t, 10*time.Second, "4 live consumers", func() bool {
		ts, err = c.Inspector().Stats(ctx, topic)
		return err == nil && ts.Consumers == 4
	})
	want := map[string]float64{
		"delayq_scheduled":         5,
		"delayq_due_now":           3,
		"delayq_lag_seconds":       3,
		"delayq_inflight":          0,
		"delayq_dead_messages":     0,
		"delayq_consumers":         4,
		"delayq_partitions":        4,
		"delayq_rate_limit":        50,
		"delayq_concurrency_limit": 7,
		"delayq_paused":            1,
	}
	fromStats := map[string]float64{
		"delayq_scheduled": float64(ts.Scheduled), "delayq_due_now": float64(ts.DueNow), "delayq_lag_seconds": ts.Lag.Seconds(),
		"delayq_inflight": float64(ts.InFlight), "delayq_dead_messages": float64(ts.Dead), "delayq_consumers": float64(ts.Consumers),
		"delayq_partitions": float64(ts.Count), "delayq_rate_limit": ts.Limits.Rate, "delayq_concurrency_limit": float64(ts.Limits.Concurrency),
		"delayq_paused": 1,
	}
	if len(want) != len(topicGauges) {
		t.Fatalf("the test knows %d gauges, the collector exports %d", len(want), len(topicGauges))
	}
	for i, reg := range regs {
		for name, w := range want {
			got := value(t, reg, name, "topic", topic)
			if got != w || got != fromStats[name] {
				t.Errorf("worker %d: %s = %v; Stats says %v, want %v", i, name, got, fromStats[name], w)
			}
		}
	}

	// Each gauge's help says how to aggregate it.
	fams, err := regs[0].Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fams {
		if _, ok := want[f.GetName()]; ok {
			seen++
			if !strings.Contains(f.GetHelp(), "max(), never sum()") {
				t.Errorf("%s help %q does not say to aggregate with max()", f.GetName(), f.GetHelp())
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d gauges gathered", seen, len(want))
	}
}
