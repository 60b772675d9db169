// Package store holds every Redis command of the queue itself: messages,
// claims, outcomes, leases' tokens and fence, membership, layouts, moves,
// exports and schedules (redsync's lease commands run on this package's
// pool), and every connection it opens is package portable's checking
// one. Two other places use redigo: package portable itself, whose Dial
// wraps every connection and which sends INFO straight to backends (not
// through the check, but audited) for benchmarks and doctor; and
// cmd/delayq's doctor, which runs every shape of the portable set
// (docs/portability.md) through a portable connection to a proxy. See
// docs/architecture.md, Packages.
//
// Every operation is a short sequence
// of one-key commands from the portable set, ordered so that a process
// killed between any two of them loses nothing: destinations are written
// before sources are removed, and a record is removed before its index
// entries, so a crash leaves either a record the reconciler re-indexes or an
// index entry without a record (a tombstone, dropped when met).
//
// Commands that do not depend on each other are pipelined; a command that
// must not run before another one has taken effect waits for its reply
// (with Twemproxy and no hash tag, the keys of one partition may live on
// different servers, and pipelined commands to different servers may run
// in any order).
//
// "Now" is always passed in by the caller, in unix milliseconds.
//
// Files:
//
//   - store.go: Store, Open, the pool and its retried dials (WithRetry)
//   - retry.go: what runs again under WithRetry: a failed dial, a round
//     trip whose connection broke (redo)
//   - proxies.go: several proxies and their health
//   - outage.go: no address answering: logged once at its start, summed up
//     at its end
//   - pipeline.go: pipelines and their replies (pipe, pipeScripts,
//     roundTrip, do, steps)
//   - scripts.go: the Lua scripts, each with its KEYS, ARGV and reply (some
//     sit beside their callers: those of put.go, limits.go, controls.go,
//     schedule.go, ...)
//   - partition.go: a partition of a topic (TopicPartition)
//   - record.go: the record codec (Record, DecodeRecord) and a finished id's (Done, DecodeDone)
//   - done.go: finished ids: FinishedError, a topic's default window (SetUniqueFor), and the sends that meet a Done (settleDones)
//   - segment.go: segments: many messages in one field
//   - add.go: enqueue (Add, AddMany and its round trips), Exists in an old
//     partition
//   - put.go: replace and debounce (Puts)
//   - get.go: Get
//   - reschedule.go: Reschedule
//   - delete.go: Delete and DeleteMany
//   - claim.go: NextDue, ClaimBegin, explode, Begin; ClaimIndexOnly (tests
//     only)
//   - start.go: the start of a delivery and its running mark (StartMany)
//   - outcomes.go: Ack, Moves, CorruptMove, Expired
//   - fence.go: fencing tokens (NextToken) and the fence (RaiseFence)
//   - handover.go: TakeOver, HandOver, Givers, InFlightIDs
//   - reconcile.go: the reconciler's HSCAN pass (Reconcile)
//   - members.go: heartbeats into the members ZSET
//   - wake.go: the changes hash: wake-ups and change counters (Wake,
//     Changed, Changes)
//   - dead.go: the dead set: ListDead, RequeueDead, PurgeDead
//   - stats.go: the counts of a topic's partitions (Stats)
//   - layout.go: a topic's stored partition count (Layout, ReadLayout)
//   - topic.go: EnsureTopic, Topics, DropTopic (every key of a topic)
//   - change.go: a change of the count: BeginChange, CancelChange,
//     MarkMoved, CountMoved
//   - move.go: the steps of a move during a change of the count (MoveScan)
//   - progress.go: a change's progress (ChangeProgress)
//   - auto.go: the automatic count's settings and its one-script check
//     (AutoStep)
//   - controls.go: the pause (SetPause, ReadControls)
//   - limits.go: the limits (SetLimits), the token bucket (TakeTokens) and
//     the concurrency slots (TakeSlots)
//   - schedule.go: schedule definitions and the occurrence chain
//     (ChainSchedule)
//   - export.go: a partition's export scan (ExportScan)
//   - import_done.go: an import's finished ids (PutDones)
//   - browse.go: the dashboard's bounded reads
//   - clocks.go: what a topic's processes wrote from their clocks, for
//     delayq doctor (ReadClocks)
//   - errors.go: the sentinel errors, FencedError, UnreachableError, the
//     no-topic error
package store
