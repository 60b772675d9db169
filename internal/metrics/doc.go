// Package metrics exports delayq's numbers to Prometheus for the worker
// daemon.
//
// The library itself knows nothing of Prometheus: it offers
// snapshots, Consumer.Stats and Client.Stats, and this package turns them
// into metrics when Prometheus scrapes. Nothing is copied on the hot path:
// the consumer counters are read from Consumer.Stats at scrape time, and
// the queue gauges (scheduled, in flight, dead) are read from Redis with
// Client.Stats at scrape time, bounded by ScrapeTimeout. A topic whose
// gauges cannot be read is left out of that scrape and counted in
// delayq_scrape_errors_total.
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
//	delayq_partitions_owned      gauge
//	delayq_scheduled             gauge    messages waiting for their due time
//	delayq_inflight              gauge
//	delayq_dead_messages         gauge    messages in the dead set now
//	delayq_scrape_errors_total   counter  failed reads of the gauges
//	delayq_lateness_seconds      histogram
//	delayq_handler_duration_seconds histogram, with result="ok"|"error"
package metrics
