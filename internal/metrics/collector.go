package metrics

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/prometheus/client_golang/prometheus"
)

// source is one AddConsumer call.
type source struct {
	topic    string
	client   *delayq.Client   // nil: no gauges
	consumer *delayq.Consumer // nil: no counters
}

// counterDef is one consumer counter: its name and how to read it.
type counterDef struct {
	name, help string
	get        func(s *delayq.ConsumerStats) int64
	desc       *prometheus.Desc
}

// counterDefs are the counters read from Consumer.Stats.
var counterDefs = []*counterDef{
	{name: "delivered_total", help: "Handler calls started.", get: func(s *delayq.ConsumerStats) int64 { return s.Delivered }},
	{name: "acked_total", help: "Deliveries acknowledged by the handler.", get: func(s *delayq.ConsumerStats) int64 { return s.Acked }},
	{name: "retried_total", help: "Failed deliveries scheduled for another attempt.", get: func(s *delayq.ConsumerStats) int64 { return s.Retried }},
	{name: "dead_total", help: "Messages moved to the dead set, out of attempts.", get: func(s *delayq.ConsumerStats) int64 { return s.Dead }},
	{name: "fenced_total", help: "Claims refused by the fence and held messages dropped because their lease ran out.", get: func(s *delayq.ConsumerStats) int64 { return s.Fenced }},
	{name: "redelivered_total", help: "In-flight messages requeued after their visibility deadline (a handler overran).", get: func(s *delayq.ConsumerStats) int64 { return s.Redelivered }},
	{name: "recovered_total", help: "In-flight messages of a lost owner returned to scheduled at takeover (a duplicate when one was running there).", get: func(s *delayq.ConsumerStats) int64 { return s.Recovered }},
	{name: "corrupt_total", help: "Records that could not be decoded, moved to the dead set with the decode error.", get: func(s *delayq.ConsumerStats) int64 { return s.Corrupt }},
	{name: "tombstones_total", help: "Claimed ids whose record had been deleted.", get: func(s *delayq.ConsumerStats) int64 { return s.Tombstones }},
	{name: "repaired_total", help: "Records re-indexed by the reconciler.", get: func(s *delayq.ConsumerStats) int64 { return s.Repaired }},
	{name: "superseded_total", help: "Claimed messages whose record a send or a reschedule replaced before their delivery started (not started: the newer version is delivered at its due) or while it ran (the newer version was scheduled).", get: func(s *delayq.ConsumerStats) int64 { return s.Superseded }},
	{name: "stale_total", help: "Claims by an index entry due before its record's due (left by a crashed write): delivered at the record's due.", get: func(s *delayq.ConsumerStats) int64 { return s.Stale }},
	{name: "leases_gained_total", help: "Partition leases acquired.", get: func(s *delayq.ConsumerStats) int64 { return s.LeasesGained }},
	{name: "leases_lost_total", help: "Partition leases lost or released.", get: func(s *delayq.ConsumerStats) int64 { return s.LeasesLost }},
}

func init() {
	for _, d := range counterDefs {
		d.desc = desc(d.name, d.help)
	}
	for _, g := range topicGauges {
		g.desc = desc(g.name, g.help+fleetWide)
	}
}

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("delayq_"+name, help, []string{"topic"}, nil)
}

// fleetWide ends the help of every topic gauge read from Redis: each
// worker that exports a topic reports the same value, so a sum over
// workers would count it once per worker.
const fleetWide = " Fleet-wide, read from Redis: every worker reports the same value; aggregate with max(), never sum()."

// topicGauge is one fleet-wide gauge of a topic: its name and how to read
// it from the topic's stats.
type topicGauge struct {
	name, help string
	get        func(ts *delayq.TopicStats) float64
	desc       *prometheus.Desc
}

// topicGauges are the gauges read from Inspector.Stats, one Redis read per
// topic and scrape.
var topicGauges = []*topicGauge{
	{name: "scheduled", help: "Messages waiting for their due time.", get: func(ts *delayq.TopicStats) float64 { return float64(ts.Scheduled) }},
	{name: "due_now", help: "Scheduled messages whose due time has come and that no consumer has claimed yet: the backlog more consumers would drain (0 while they keep up; a segment of messages written together counts once until claimed).", get: func(ts *delayq.TopicStats) float64 { return float64(ts.DueNow) }},
	{name: "lag_seconds", help: "How long the oldest message due now has waited past its due time; 0 when none is due.", get: func(ts *delayq.TopicStats) float64 { return ts.Lag.Seconds() }},
	{name: "inflight", help: "Messages claimed by a consumer and not yet acked, retried or dead.", get: func(ts *delayq.TopicStats) float64 { return float64(ts.InFlight) }},
	{name: "dead_messages", help: "Messages in the dead set.", get: func(ts *delayq.TopicStats) float64 { return float64(ts.Dead) }},
	{name: "consumers", help: "Live consumers of the topic (heartbeat current, not leaving), in every process; those past the partition count own no partition.", get: func(ts *delayq.TopicStats) float64 { return float64(ts.Consumers) }},
	{name: "partitions", help: "The topic's partition count: the most consumers that can own a partition.", get: func(ts *delayq.TopicStats) float64 { return float64(ts.Count) }},
	{name: "rate_limit", help: "The topic's rate limit, in deliveries per second the whole fleet starts; 0 when none.", get: func(ts *delayq.TopicStats) float64 { return ts.Limits.Rate }},
	{name: "concurrency_limit", help: "The topic's concurrency cap, deliveries running at once across the fleet; 0 when none.", get: func(ts *delayq.TopicStats) float64 { return float64(ts.Limits.Concurrency) }},
	{name: "paused", help: "1 while the topic is paused (no delivery starts, and due_now grows), else 0.", get: func(ts *delayq.TopicStats) float64 {
		if ts.Pause.Paused {
			return 1
		}
		return 0
	}},
}

var (
	ownedDesc        = desc("partitions_owned", "Partitions whose lease this process holds (sum() over workers: the partitions owned).")
	scrapeErrorsDesc = desc("scrape_errors_total", "Scrapes that could not read the topic's gauges from Redis.")
	proxyUpDesc      = prometheus.NewDesc("delayq_proxy_up", "1 while the Redis address (a proxy) answered its last connection attempt, 0 while it is skipped as down.", []string{"addr"}, nil)
)

// collector reads the consumers' and topics' numbers at scrape time. It is
// safe for concurrent use, as prometheus.Collector requires.
type collector struct {
	timeout time.Duration

	mu         sync.Mutex
	proxies    *delayq.Client // its addresses' health, when set
	sources    []source
	scrapeErrs map[string]float64 // topic -> failed gauge reads
}

var _ prometheus.Collector = (*collector)(nil)

func newCollector(timeout time.Duration) *collector {
	return &collector{timeout: timeout, scrapeErrs: map[string]float64{}}
}

func (c *collector) add(s source) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.sources {
		if o == s {
			return
		}
	}
	c.sources = append(c.sources, s)
	if s.client != nil {
		if _, ok := c.scrapeErrs[s.topic]; !ok {
			c.scrapeErrs[s.topic] = 0
		}
	}
}

// Describe sends the descriptors of every metric the collector makes.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range counterDefs {
		ch <- d.desc
	}
	for _, g := range topicGauges {
		ch <- g.desc
	}
	for _, d := range []*prometheus.Desc{ownedDesc, scrapeErrorsDesc, proxyUpDesc} {
		ch <- d
	}
}

// Collect reads every consumer's counters and, concurrently, every topic's
// gauges, each topic within c.timeout.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]source(nil), c.sources...)
	proxies := c.proxies
	c.mu.Unlock()
	if proxies != nil {
		for _, h := range proxies.Proxies() {
			up := 0.0
			if h.Up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(proxyUpDesc, prometheus.GaugeValue, up, h.Addr)
		}
	}

	// Counters, summed over the consumers of each topic.
	type sums struct {
		counters []int64
		owned    int
	}
	byTopic := map[string]*sums{}
	clients := map[string]*delayq.Client{} // the first client of each topic
	for _, s := range sources {
		if s.client != nil && clients[s.topic] == nil {
			clients[s.topic] = s.client
		}
		if s.consumer == nil {
			continue
		}
		st := s.consumer.Stats()
		sm := byTopic[s.topic]
		if sm == nil {
			sm = &sums{counters: make([]int64, len(counterDefs))}
			byTopic[s.topic] = sm
		}
		for i, d := range counterDefs {
			sm.counters[i] += d.get(&st)
		}
		sm.owned += len(st.Owned)
	}
	for topic, sm := range byTopic {
		for i, d := range counterDefs {
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(sm.counters[i]), topic)
		}
		ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, float64(sm.owned), topic)
	}

	// Gauges, one Redis read per topic (Inspector.Stats: one pipeline over
	// the partitions and the members, and the topic's layout and
	// controls), all topics at once.
	topics := make([]string, 0, len(clients))
	for t := range clients {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	stats := make([]*delayq.TopicStats, len(topics))
	var wg sync.WaitGroup
	for i, t := range topics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			ts, err := clients[t].Inspector().Stats(ctx, t)
			if errors.Is(err, delayq.ErrNoTopic) {
				// Not created yet (its consumer is starting) or deleted:
				// nothing queued, and nothing failed.
				ts, err = &delayq.TopicStats{Topic: t}, nil
			}
			if err != nil {
				c.mu.Lock()
				c.scrapeErrs[t]++
				c.mu.Unlock()
				return
			}
			stats[i] = ts
		}()
	}
	wg.Wait()
	for i, t := range topics {
		if ts := stats[i]; ts != nil {
			for _, g := range topicGauges {
				ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.get(ts), t)
			}
		}
	}
	c.mu.Lock()
	for t, n := range c.scrapeErrs {
		ch <- prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.CounterValue, n, t)
	}
	c.mu.Unlock()
}
