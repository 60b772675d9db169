package metrics

import (
	"context"
	"errors"
	"go.uber.org/goleak"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMain fails the run when goroutines outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(testenv.SpawnerFunc))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// find returns the metric of family name whose labels include want, or nil.
func find(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// value returns the value of a counter or gauge, or the sample count of a
// histogram; -1 when the metric is absent.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	m := find(t, g, name, want)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s: unexpected metric type %v", name, m)
	return 0
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = testenv.WaitFor

func TestConsumerMetrics(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	for _, tg := range env.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			client, err := delayq.New(delayq.Options{Addr: tg.Addr, Partitions: 4, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			reg := prometheus.NewRegistry()
			m := mustNew(t, reg)
			topic := "metrics-" + tg.Name // the direct backend is also behind the proxy
			k, err := client.NewConsumer(delayq.ConsumerOptions{
				Topic: topic, Lease: time.Second, PollInterval: 50 * time.Millisecond, MaxAttempts: 1,
			}, func(ctx context.Context, d *delayq.Delivery) error {
				start := time.Now()
				var err error
				if string(d.Body) == "fail" {
					err = errors.New("told to fail")
				}
				m.ObserveDelivery(topic, start.Sub(d.Due), time.Since(start), err)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			m.AddConsumer(topic, client, k)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- k.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()

			for _, body := range []string{"a", "b", "c", "fail"} {
				if _, err := client.Send(context.Background(), delayq.Message{Topic: topic, Body: []byte(body)}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 10*time.Second, "3 acks and 1 dead", func() bool {
				return value(t, reg, "delayq_acked_total", "topic", topic) == 3 &&
					value(t, reg, "delayq_dead_total", "topic", topic) == 1
			})
			waitFor(t, 5*time.Second, "all 4 partitions owned", func() bool {
				return value(t, reg, "delayq_partitions_owned", "topic", topic) == 4
			})
			for _, tc := range []struct {
				name   string
				labels []string
				want   float64
			}{
				{"delayq_delivered_total", nil, 4},
				{"delayq_retried_total", nil, 0},
				{"delayq_redelivered_total", nil, 0},
				{"delayq_recovered_total", nil, 0},
				{"delayq_corrupt_total", nil, 0},
				{"delayq_fenced_total", nil, 0},
				{"delayq_tombstones_total", nil, 0},
				{"delayq_repaired_total", nil, 0},
				{"delayq_stale_total", nil, 0},
				{"delayq_superseded_total", nil, 0},
				{"delayq_leases_lost_total", nil, 0},
				{"delayq_scheduled", nil, 0},
				{"delayq_inflight", nil, 0},
				{"delayq_dead_messages", nil, 1},
				{"delayq_scrape_errors_total", nil, 0},
				{"delayq_lateness_seconds", nil, 4},
				{"delayq_handler_duration_seconds", []string{"result", "ok"}, 3},
				{"delayq_handler_duration_seconds", []string{"result", "error"}, 1},
			} {
				got := value(t, reg, tc.name, append([]string{"topic", topic}, tc.labels...)...)
				if got != tc.want {
					t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
				}
			}
			if got := value(t, reg, "delayq_leases_gained_total", "topic", topic); got < 4 {
				t.Errorf("delayq_leases_gained_total = %v, want >= 4", got)
			}
		})
	}
}

func TestScrapeError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	client, err := delayq.New(delayq.Options{Addr: addr, Logger: quiet, DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reg := prometheus.NewRegistry()
	m := mustNew(t, reg)
	m.AddConsumer("down", client, nil)
	for i := 1; i <= 2; i++ {
		if got := value(t, reg, "delayq_scrape_errors_total", "topic", "down"); got != float64(i) {
			t.Errorf("scrape %d: delayq_scrape_errors_total = %v, want %d", i, got, i)
		}
	}
	if got := value(t, reg, "delayq_scheduled", "topic", "down"); got != -1 {
		t.Errorf("delayq_scheduled present (%v) after a failed read", got)
	}
	if got := value(t, reg, "delayq_acked_total", "topic", "down"); got != -1 {
		t.Errorf("delayq_acked_total present (%v) without a consumer", got)
	}
}

// A topic that does not exist yet (its consumer not started, or it was
// deleted) has gauges of 0, not a scrape error, and is not created by
// the scrape.
func TestGaugesOfTopicNotCreated(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	client, err := delayq.New(delayq.Options{Addr: env.Backends[0], Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reg := prometheus.NewRegistry()
	m := mustNew(t, reg)
	m.AddConsumer("fresh", client, nil)
	if got := value(t, reg, "delayq_scrape_errors_total", "topic", "fresh"); got != 0 {
		t.Errorf("delayq_scrape_errors_total = %v, want 0", got)
	}
	if got := value(t, reg, "delayq_scheduled", "topic", "fresh"); got != 0 {
		t.Errorf("delayq_scheduled = %v, want 0", got)
	}
	if _, err := client.Inspector().Stats(context.Background(), "fresh"); !errors.Is(err, delayq.ErrNoTopic) {
		t.Errorf("after the scrapes, stats: %v; want ErrNoTopic", err)
	}
}

func TestObserveDelivery(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := mustNew(t, reg)
	m2 := mustNew(t, reg) // a second New on one registry shares the collectors
	m.ObserveDelivery("t", -time.Second, 2*time.Millisecond, nil)
	m2.ObserveDelivery("t", 3*time.Second, 70*time.Second, errors.New("x"))
	late := find(t, reg, "delayq_lateness_seconds", map[string]string{"topic": "t"}).GetHistogram()
	if late.GetSampleCount() != 2 || late.GetSampleSum() != 3 {
		t.Errorf("lateness count %d sum %v, want 2 and 3", late.GetSampleCount(), late.GetSampleSum())
	}
	if b := late.GetBucket()[0]; b.GetUpperBound() != 0.001 || b.GetCumulativeCount() != 1 {
		t.Errorf("first lateness bucket = %v, want le=0.001 count 1", b)
	}
	if n := len(late.GetBucket()); n != len(Buckets) {
		t.Errorf("%d buckets, want %d", n, len(Buckets))
	}
	if got := value(t, reg, "delayq_handler_duration_seconds", "topic", "t", "result", "error"); got != 1 {
		t.Errorf("error durations = %v, want 1", got)
	}
	if got := value(t, reg, "delayq_handler_duration_seconds", "topic", "t", "result", "ok"); got != 1 {
		t.Errorf("ok durations = %v, want 1", got)
	}
}

func TestNewConflictingCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "delayq_acked_total", Help: "other"}))
	if _, err := New(reg); err == nil {
		t.Error("New accepted a registry that already has delayq_acked_total with other labels")
	}
}

func mustNew(t testing.TB, reg prometheus.Registerer) *Metrics {
	t.Helper()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Another collector holding a delayq_ name with other labels is an error,
// not a panic.
func TestNewConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "delayq", Name: "lateness_seconds", Help: "other",
	}, []string{"queue"}))
	if m, err := New(reg); err == nil || m != nil {
		t.Fatalf("New with a conflicting collector = %v, %v; want an error", m, err)
	}
}
