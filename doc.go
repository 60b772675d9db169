// Package delayq is a delay queue on Redis that works behind Codis and
// Twemproxy: every command it sends has exactly one key and is in the
// portable set those proxies route (no BLPOP, MULTI, pub/sub or multi-key
// scripts; docs/portability.md lists it and says why).
//
// A producer enqueues a message for a topic with a due time; a Consumer
// delivers it to a Handler at that time, at least once, retrying failures
// along a backoff ladder and moving messages that exhaust their attempts to
// a dead set. Anyone may Get, Delete or Reschedule a message by id until it
// is delivered.
//
// Each topic is split into partitions (murmur3 of the id, see package
// partition). Consumers own partitions through leases with fencing tokens
// (package lease) and poll them (package poller).
//
// Files:
//
//   - client.go: Options, Client, New, Close; the proxies' health
//   - inspect_admin.go: Inspector and Admin, the views of a Client that
//     read and that change what a namespace holds
//   - inspect_pages.go: the Inspector's bounded reads, a page at a time
//     (ListTopics, Topic, ListScheduled, ListRecentDead, DueCounts,
//     Consumers), which the dashboard reads with
//   - inspect_clocks.go: TopicClocks and Inspector.Clocks, the times a
//     topic's processes wrote from their own clocks
//   - topic.go: a topic's name check, the client's cache of layouts
//     (ensureTopic, topicLayout); TopicUsage and DeleteTopic
//   - topic_list.go: TopicInfo and Topics, the topics of a namespace
//   - message.go: a Message (OnDuplicate, Outcome) and its checks
//     (prepare); Send, SendBatch, SendAsync
//   - coalescer.go: the coalescer: concurrent Send and SendAsync
//     calls gathered into batches
//   - batch.go: the write of a batch: placement (place), the writes
//     (write, writePuts), wake-ups (wake)
//   - id.go: generated ids (NewID) and their steering into one partition
//   - id_from.go: ids from content (IDFrom)
//     (steerer)
//   - info.go: State, Info; Get, Delete, DeleteMany, Reschedule; a
//     message's places during a change of the count (places)
//   - stats.go: PartitionStats, TopicStats, Stats
//   - dead.go: the dead set: ListDead, RequeueDead, PurgeDead
//   - consumer.go: the Consumer: NewConsumer, Run, Shutdown, Stats; the
//     lease manager's Work per owned partition (pollerConfig)
//   - consumer_options.go: ConsumerOptions and their defaults
//   - delivery.go: Delivery, Handler, and each delivery (handle)
//   - controls.go: a consumer's topic controls (pause, limits, automatic
//     count) as last read
//   - pause.go: Pause, Resume, PauseState
//   - limits.go: Limits, SetLimits, LimitsState
//   - unique.go: a topic's default uniqueness window (SetUniqueFor, MaxUniqueFor)
//   - provision.go: what a topic's owner declares (TopicConfig, ProposeTopic)
//   - limiter.go: a consumer's claims to the fleet-wide limits (its loops'
//     poller.Gate)
//   - kept_acks.go: acks written after a lost lease
//   - partitions.go: Partitions, SetPartitions, CancelPartitions (changing
//     a topic's count)
//   - autopartitions.go: the automatic count: AutoPartitions,
//     SetAutoPartitions, each consumer's checks
//   - watcher.go: the one read per tick of the changes' version, and of
//     the counters when it moved
//   - export.go: Export and ExportJSON
//   - exported_message.go: ExportedMessage and its JSON line
//   - exported_schedule.go: schedules in exports: ExportedSchedule,
//     ExportSchedules, ImportSchedule
//   - exported_controls.go: controls in exports: ExportedControls,
//     ExportControls, ImportControls
//   - import.go: Import and ImportJSON
//   - schedule.go: schedules: Schedule, ScheduleInfo, SetSchedule ...
//     DeleteSchedule, the file's apply rule (ApplySchedules)
//   - schedule_spec.go: a schedule's cron spec: parsing, next occurrences,
//     ValidateSchedule
//   - schedule_chain.go: occurrence ids and each occurrence's chain step
//     (occurrence)
//   - trace.go: the spans of sends and deliveries
//   - errors.go: the sentinel errors
package delayq
