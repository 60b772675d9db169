package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq"
	"github.com/prometheus/client_golang/prometheus"
)

// ScrapeTimeout bounds the Redis reads of one topic's gauges in a scrape.
const ScrapeTimeout = 2 * time.Second

// Buckets are the upper bounds, in seconds, of the lateness and handler
// duration histograms: 1ms to 60s, about three per decade.
var Buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds delayq's Prometheus metrics. It is safe for concurrent use.
type Metrics struct {
	lateness *prometheus.HistogramVec
	duration *prometheus.HistogramVec
	coll     *collector
}

// New returns Metrics registered with reg (prometheus.DefaultRegisterer
// when nil). Calling New twice with one registry returns Metrics that share
// the collectors already registered.
//
// New panics, as prometheus.MustRegister does, if reg refuses the
// collectors for another reason than their being registered already: that
// means something else registered delayq_* metrics with other labels, a
// programming error that no caller could handle.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	lateness := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "delayq",
		Name:      "lateness_seconds",
		Help:      "Time from a message's due time to the start of its delivery.",
		Buckets:   Buckets,
	}, []string{"topic"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "delayq",
		Name:      "handler_duration_seconds",
		Help:      "Time a handler took, by result (ok: acked, error: retried or dead).",
		Buckets:   Buckets,
	}, []string{"topic", "result"})
	return &Metrics{
		lateness: register(reg, lateness),
		duration: register(reg, duration),
		coll:     register(reg, newCollector(ScrapeTimeout)),
	}
}

// register registers c with reg, or returns the equal collector already
// registered there.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("metrics: register delayq collectors: %v", err))
}

// AddConsumer exports the counters of consumer k (read from k.Stats at
// scrape time) and the queue gauges of topic (read with c.Stats at scrape
// time, within ScrapeTimeout; on an error the gauges are left out of that
// scrape and delayq_scrape_errors_total{topic} is incremented). Either c or
// k may be nil to export only the other part. Several consumers of one
// topic are summed; adding the same consumer twice has no effect.
func (m *Metrics) AddConsumer(topic string, c *delayq.Client, k *delayq.Consumer) {
	m.coll.add(source{topic: topic, client: c, consumer: k})
}

// ObserveDelivery records one delivery of topic: lateness is the time from
// its due time to the start of the handler (negative values count as 0),
// duration is how long the handler ran and err what it returned.
func (m *Metrics) ObserveDelivery(topic string, lateness, duration time.Duration, err error) {
	if lateness < 0 {
		lateness = 0
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.lateness.WithLabelValues(topic).Observe(lateness.Seconds())
	m.duration.WithLabelValues(topic, result).Observe(duration.Seconds())
}
