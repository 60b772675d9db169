package keys

import (
	"strconv"
	"strings"
)

// Reserved names. Besides message ids, the scheduled ZSET holds members,
// and the records HASH fields, of delayq's own. Each begins with a control
// character, which ids cannot contain, so none collides with an id (see
// IsIDField). The members beginning with \x00 are scored below 0, which
// keeps them out of every ZRANGEBYSCORE from 0.
const (
	// Fence is the reserved member of the scheduled ZSET that holds the
	// partition's fence: its score is minus the newest fencing token.
	Fence = "\x00fence"

	// GavePrefix begins the reserved members of the scheduled ZSET that
	// mark a graceful handover (see Gave).
	GavePrefix = "\x00gave:"

	// SegmentMark begins the name of a segment: its field of the records
	// HASH and its member of the scheduled ZSET (see SegmentField).
	SegmentMark = "\x01"

	// SegmentExtraField is the field of the records HASH that counts, with
	// HINCRBY, the messages held in segments minus the segments, so that
	// stats report messages and not index entries.
	SegmentExtraField = "\x03extra"

	// SegmentPendingMark begins the fields of the records HASH that mark a
	// segment not counted in SegmentExtraField yet (see
	// SegmentPendingField).
	SegmentPendingMark = "\x04"

	// SegmentLeftField is the field of the records HASH that counts, with
	// HINCRBY, the scripts that took messages out of segments (to records
	// of their own): a message that changes fields. An export reads it
	// around its scan of the records, and scans them again when it
	// changed (see delayq.Inspector.Export).
	SegmentLeftField = "\x05left"
	// ScheduleMark begins the field of the records HASH holding a
	// schedule's chain mark (see ScheduleMarkField).
	ScheduleMark = "\x06"
	// RunningMark begins the field of the records HASH that marks a
	// message whose delivery started (see RunningField).
	RunningMark = "\x07"
)

// RunningField is the field of the records HASH that marks the delivery
// of the message id as started: set by a consumer as it commits to the
// delivery, removed with the delivery's outcome. Delete, Reschedule and
// the policy sends read it in the same script as the record.
//
// Its value is the fencing token (decimal) of the partition owner that
// started the delivery, while the record is the one it started; a write
// that rewrites the record sets it to RunningReplaced, and one that
// removes the record removes the mark. So an ack whose token the mark
// holds removes the record without reading it (see store.Ack).
func RunningField(id string) string { return RunningMark + id }

// RunningReplaced is the value of a running mark whose record a write
// replaced after the delivery started: the delivery's ack compares the
// record with the one it delivered, and leaves the newer one.
const RunningReplaced = "r"

// ScheduleIDPrefix begins the id of every occurrence of a schedule; the
// schedule's occurrences and mark live in partition
// murmur3(ScheduleIDPrefix + name) % count (see SchedulePartition).
const ScheduleIDPrefix = "@sched:"

// ScheduleMarkField is the field of the records HASH, in the partition
// every occurrence of the schedule lands in, whose value is the id of the
// newest occurrence ever written for the schedule: the chain refuses to
// write that occurrence or an earlier one of the same version again, and
// any occurrence of an older version (see store.ChainSchedule).
func ScheduleMarkField(name string) string { return ScheduleMark + name }

// Gave is the reserved member of the scheduled ZSET that marks a graceful
// handover: GavePrefix + consumer id, scored minus the token of the owner
// that gave the partition up. Each names a consumer whose handlers may
// still be running on messages of the partition (see store.HandOver).
func Gave(consumer string) string { return GavePrefix + consumer }

// SegmentField is the field of the records HASH holding the segment whose
// message ids begin with prefix (store.SegmentPrefixLen characters), and
// the segment's member of the scheduled ZSET.
func SegmentField(prefix string) string { return SegmentMark + prefix }

// SegmentPendingField is the field of the records HASH (value "") saying
// that the segment whose ids begin with prefix is not counted in
// SegmentExtraField yet.
func SegmentPendingField(prefix string) string { return SegmentPendingMark + prefix }

// IsSegmentField says whether a field of the records HASH, or a member of
// the scheduled ZSET, is a segment (see SegmentField).
func IsSegmentField(name string) bool { return strings.HasPrefix(name, SegmentMark) }

// IsSegmentPendingField says whether a field of the records HASH is a
// segment's pending mark (see SegmentPendingField).
func IsSegmentPendingField(name string) bool { return strings.HasPrefix(name, SegmentPendingMark) }

// IsIDField says whether a field of the records HASH, or a member of an
// index ZSET, is a message id and not one of the reserved names.
func IsIDField(name string) bool { return len(name) > 0 && name[0] >= ' ' }

func tag(ns, topic string, p int) string {
	return ns + ":{" + topic + ":" + strconv.Itoa(p) + "}:"
}

// Scheduled is a ZSET: message id -> due time (unix ms), plus the Fence
// member, handover marks (Gave) and one member per segment (SegmentField).
func Scheduled(ns, topic string, p int) string { return tag(ns, topic, p) + "s" }

// InFlight is a ZSET: message id -> visibility deadline (unix ms).
func InFlight(ns, topic string, p int) string { return tag(ns, topic, p) + "i" }

// Dead is a ZSET: message id -> time it died (unix ms).
func Dead(ns, topic string, p int) string { return tag(ns, topic, p) + "d" }

// Records is a HASH: message id -> encoded record, plus segments
// (SegmentField), the marks of segments not counted yet
// (SegmentPendingField), two counters (SegmentExtraField,
// SegmentLeftField) and, in a schedule's partition, its chain mark
// (ScheduleMarkField). docs/architecture.md, Key layout, lists them all.
func Records(ns, topic string, p int) string { return tag(ns, topic, p) + "m" }

// Lease is a STRING: the redsync lock of the partition, valued LeaseValue.
func Lease(ns, topic string, p int) string { return tag(ns, topic, p) + "lease" }

// Epoch is a STRING counter (INCR, raised to the clock in ms): the
// partition's fencing tokens.
func Epoch(ns, topic string, p int) string { return tag(ns, topic, p) + "epoch" }

// OfPartition is every key of partition p: a key added to a partition
// belongs here too.
func OfPartition(ns, topic string, p int) []string {
	return []string{
		Scheduled(ns, topic, p), InFlight(ns, topic, p), Dead(ns, topic, p), Records(ns, topic, p),
		Lease(ns, topic, p), Epoch(ns, topic, p),
	}
}

// LeaseValue is the value delayq writes in a partition's lease: the
// worker's id, a space, and a random suffix that makes it unique. Stats
// read the owner from it (LeaseOwner).
func LeaseValue(worker, random string) string { return worker + " " + random }

// LeaseOwner returns the worker id of a lease value (see LeaseValue).
func LeaseOwner(v string) string {
	if i := strings.LastIndexByte(v, ' '); i >= 0 {
		return v[:i]
	}
	return v
}

// Meta is a HASH of topic metadata: fields MetaPartitions and MetaCreated,
// and while the partition count changes MetaNext, MetaSince, a
// MetaMovedPrefix field per source partition done, MetaMovedCount and,
// for a change that reversed another, MetaReversed; MetaPaused while the
// topic is paused.
func Meta(ns, topic string) string { return ns + ":{" + topic + "}:meta" }

// Fields of the Meta HASH.
const (
	// MetaPartitions is the topic's partition count, fixed on first use.
	MetaPartitions = "partitions"
	// MetaCreated is the time the topic was first used (unix ms).
	MetaCreated = "created"
	// MetaNext is the partition count a running change goes to.
	MetaNext = "next"
	// MetaSince is when the running change began (unix ms).
	MetaSince = "since"
	// MetaMovedPrefix + a partition number marks a source partition of
	// the running change as holding nothing left to move; its value is
	// the count the change goes to.
	MetaMovedPrefix = "moved:"
	// MetaMovedCount counts the messages the running change moved
	// (HINCRBY by the movers, after each pass).
	MetaMovedCount = "moved_messages"
	// MetaReversed is set (to "1") while the running change is the
	// reverse of one cancelled (see store.CancelChange): its moves wait
	// for those of the cancelled change to end.
	MetaReversed = "reversed"
	// MetaPaused is set while the topic is paused: to the end of the
	// pause (unix ms), or 0 for a pause until resumed (see
	// store.Controls).
	MetaPaused = "paused"
	// MetaLimits holds the topic's fleet-wide limits as JSON (see
	// store.Limits); "{}" once they were cleared, so that a worker's file
	// sets them only on a topic whose limits were never decided.
	MetaLimits = "limits"
	// MetaAuto holds the settings of the topic's automatic partition count
	// as JSON (see store.Auto); "{}" once it was turned off, so that a
	// worker's file turns it on only on a topic where it was never
	// decided.
	MetaAuto = "auto"
	// MetaAutoSignal is the change the automatic count wants, as
	// "<count>:<target>:<since unix ms>", while every check since then
	// wanted it (see store.AutoStep).
	MetaAutoSignal = "auto_signal"
	// MetaChanged is when the last change of the partition count ended
	// (unix ms).
	MetaChanged = "changed"
	// MetaAutoSeen is the time of the last check of the automatic count
	// (unix ms, on the clock of the consumer that made it), and
	// MetaAutoCooled how long the checks have seen since the last change
	// ended, as "<changed>:<ms>": each check adds the time since the one
	// before, at most a step, so that no clock can make a wish hold or a
	// cooldown pass by more than that at once (see store.AutoStep).
	MetaAutoSeen   = "auto_seen"
	MetaAutoCooled = "auto_cooled"
	// MetaMost is the largest partition count the topic has had, set
	// when a change begins: a shrink leaves the keys of the partitions
	// past the new count (their epoch, their fence), which a drop of the
	// topic deletes too.
	MetaMost = "most"
	// MetaUniqueFor is the topic's default uniqueness window (ms, see
	// store.Record.UniqueFor), read with its layout; "0" once it was set
	// to none, so that a worker's file sets it only on a topic where it
	// was never decided.
	MetaUniqueFor = "unique_for"
)

// Rate is a HASH: the token bucket of the topic's rate limit and its
// timeline (see store.TakeTokens), and the starts it granted in the last
// two whole seconds.
func Rate(ns, topic string) string { return ns + ":{" + topic + "}:rate" }

// Slots is a ZSET: the slots of the topic's concurrency cap held across
// the fleet, member "<consumer> <n>", score the slot's expiry (unix ms,
// by its holder's clock), which its holder pushes back while it lives;
// a slot is freed by a taker that saw its score unchanged for a lease
// (see store.TakeSlots), never by comparing it with a clock.
func Slots(ns, topic string) string { return ns + ":{" + topic + "}:slots" }

// Schedules is a HASH: schedule name -> the schedule's definition (JSON,
// see store.ScheduleDef), for the topic's recurring messages.
func Schedules(ns, topic string) string { return ns + ":{" + topic + "}:sched" }

// Members is a ZSET: consumer id -> heartbeat expiry (unix ms).
func Members(ns, topic string) string { return ns + ":{" + topic + "}:members" }

// Changes is a HASH: topic name -> counter (HINCRBY) of the topic's
// membership and ownership changes, and WakeField(topic, p) -> counter of
// the messages written due soon to a partition. Consumers bump their
// topic's counter when they join, leave or give a partition up, producers
// a partition's after writing to it, each with VersionField; a process
// reads the version per tick, and the counters of all the topics it
// consumes and partitions it owns in one HMGET when it moved, to act on a
// change, and poll a woken partition, at once.
func Changes(ns string) string { return ns + ":changes" }

// WakeField is the field of the Changes HASH whose counter a producer
// bumps after writing a message due soon to partition p of topic, and
// the partition's owner watches (":" cannot be in a topic's name).
func WakeField(topic string, p int) string { return topic + ":" + strconv.Itoa(p) }

// VersionField is the field of the Changes hash that every bump of one
// of its counters bumps too, so that a process reads it alone at each
// tick, and the counters it watches only when it moved (no topic's name
// is empty, so no other field starts with ":").
const VersionField = ":version"

// ControlsField is the field of the Changes hash whose counter a change
// of the topic's controls (see MetaPaused) bumps, and its consumers
// watch, to read the controls at once ("controls" is no partition
// number).
func ControlsField(topic string) string { return topic + ":controls" }

// SlotsField is the field of the changes HASH bumped when slots of
// topic's concurrency cap are given back, for consumers waiting for one
// to try again at once.
func SlotsField(topic string) string { return topic + ":slots" }

// Topics is a ZSET: topic name -> time first used (unix ms).
func Topics(ns string) string { return ns + ":topics" }
