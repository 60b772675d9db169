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
//
// Files:
//
//   - poller.go: Config, the Store a loop needs, Run and the loop's turns:
//     expired in-flight messages, the reconciler's passes, writes back to
//     scheduled
//   - claim.go: the poll: an idle partition's look, the limits' grant, the
//     claim (ClaimStore)
//   - heap.go: messages claimed ahead, held until due, counted by when
//     they fall due (waiting)
//   - start.go: the start of held messages ahead of their due, by a lead
//     that grows with the messages due together, and their hand-over at
//     it (dispatchDue)
//   - dispatch.go: the shared handler workers and the claim bound
//     (Dispatcher); Msg and its outcomes
//   - deadline.go: the handler timeout, one context for the deliveries
//     of a partition that start together (handlerCtx)
//   - results.go: outcomes written in batches (OutcomeStore); the loop's exit
//   - takeover.go: returning a lost owner's messages (recoverLost), watching
//     givers, handing over (TakeoverStore)
//   - move.go: moving messages out of a source partition of a count change
//     (MoveStore)
//   - gate.go: the fleet-wide limits a loop's claims wait for (Gate)
//   - pause.go: a paused loop's turn: held messages go back (holdBack)
//   - errlog.go: one warning per outage for all the loops of a process
//     (ErrLog)
package poller
