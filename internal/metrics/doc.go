// Package metrics exports delayq's numbers to Prometheus for the worker
// daemon.
//
// The library itself knows nothing of Prometheus: it offers
// snapshots, Consumer.Stats and Inspector.Stats, and this package turns them
// into metrics when Prometheus scrapes. Nothing is copied on the hot path:
// the consumer counters are read from Consumer.Stats at scrape time, and
// the topic gauges (scheduled, due now, lag, in flight, dead, consumers,
// partitions, limits, paused) are read from Redis with Inspector.Stats at
// scrape time, once per topic, bounded by ScrapeTimeout. A topic whose
// gauges cannot be read is left out of that scrape and counted in
// delayq_scrape_errors_total.
//
// Counters and delayq_partitions_owned are this process's: sum them over
// workers. The topic gauges are the fleet's: every worker that exports a
// topic reads the same value from Redis, so aggregate them with max()
// (sum() would count them once per worker). An autoscaler scales on
// max(delayq_due_now{topic="T"}); docs/autoscaling.md has a KEDA example.
//
// The only metrics fed by the caller are the two histograms, through
// ObserveDelivery: how late each delivery started and how long its handler
// ran.
//
// Every metric is named delayq_* and has a topic label:
//
//	delayq_delivered_total       counter  handler calls started
//	delayq_acked_total           counter
//	delayq_retried_total         counter
//	delayq_dead_total            counter  messages moved to the dead set
//	delayq_fenced_total          counter
//	delayq_redelivered_total     counter
//	delayq_recovered_total       counter
//	delayq_corrupt_total         counter
//	delayq_tombstones_total      counter
//	delayq_repaired_total        counter
//	delayq_leases_gained_total   counter
//	delayq_leases_lost_total     counter
//	delayq_partitions_owned      gauge    partitions this process holds
//	delayq_scheduled             gauge    fleet-wide: messages waiting for their due time
//	delayq_due_now               gauge    fleet-wide: scheduled messages due and not claimed
//	delayq_lag_seconds           gauge    fleet-wide: wait of the oldest of them past its due
//	delayq_inflight              gauge    fleet-wide
//	delayq_dead_messages         gauge    fleet-wide: messages in the dead set now
//	delayq_consumers             gauge    fleet-wide: live consumers
//	delayq_partitions            gauge    fleet-wide: the partition count
//	delayq_rate_limit            gauge    fleet-wide: deliveries per second, 0: none
//	delayq_concurrency_limit     gauge    fleet-wide: deliveries at once, 0: none
//	delayq_paused                gauge    fleet-wide: 1 while paused
//	delayq_scrape_errors_total   counter  failed reads of the gauges
//	delayq_lateness_seconds      histogram
//	delayq_handler_duration_seconds histogram, with result="ok"|"error"
//
// Files:
//
//   - metrics.go: Metrics, New, AddConsumer, AddProxies, ObserveDelivery
//     and the histograms' buckets
//   - collector.go: the collector that reads the counters and the topic
//     gauges at scrape time
package metrics
