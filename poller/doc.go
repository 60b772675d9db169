// Package poller runs the per-partition loop of a consumer: claim due
// messages in bounded batches (and those due within the next poll interval
// ahead of time, held in a local heap until due), hand them to a shared
// Dispatcher whose workers run the handler, apply the outcomes in batches
// (ack, retry along the backoff ladder, dead), requeue in-flight messages
// whose visibility deadline passed, and re-index records a crash left out
// of every index. A loop that takes a partition over returns the lost
// owner's in-flight messages at once, or, after a graceful handover,
// leaves the giver's running deliveries alone while the giver lives
// (takeover.go).
//
// The loop has the shape of asynq's forwarder and nsq's queueScanLoop:
// timer, bounded batch, again at once while batches come back full, reset
// with jitter; errors are logged and the loop goes on; only its context
// (the partition's lease) or its stop channel ends it.
package poller
