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
// New returns an error if reg refuses the collectors for another reason
// than their being registered already: something else registered delayq_*
// metrics with other labels.
func New(reg prometheus.Registerer) (*Metrics, error) {
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
	m := &Metrics{}
	var err error
	if m.lateness, err = register(reg, lateness); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, duration); err != nil {
		return nil, err
	}
	if m.coll, err = register(reg, newCollector(ScrapeTimeout)); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c with reg, or returns the equal collector already
// registered there.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("metrics: register delayq collectors: %w", err)
}

// AddConsumer exports the counters of consumer k (read from k.Stats at
// scrape time) and the queue gauges of topic (read with c.Stats at scrape
// time, within ScrapeTimeout; on an error the gauges are left out of that
// scrape and delayq_scrape_errors_total{topic} is incremented; a topic that
// does not exist has gauges of 0). Either c or
// k may be nil to export only the other part. Several consumers of one
// topic are summed; their topic's gauges are read once, with the client
// added first; adding the same consumer twice has no effect.
func (m *Metrics) AddConsumer(topic string, c *delayq.Client, k *delayq.Consumer) {
	m.coll.add(source{topic: topic, client: c, consumer: k})
}

// AddProxies reports the health of each of c's Redis addresses as
// delayq_proxy_up{addr}: 1 while it answers, 0 while it is skipped as
// down.
func (m *Metrics) AddProxies(c *delayq.Client) {
	m.coll.mu.Lock()
	defer m.coll.mu.Unlock()
	m.coll.proxies = c
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
