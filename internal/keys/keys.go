// Package keys is delayq's key schema: the one place that builds Redis key
// names. The schema is a wire format: changing a key strands the data under
// the old one, so every function is pinned by a golden test.
//
// Every key of a partition carries the hash tag {topic:p}, so Codis puts a
// partition's keys on one slot and Twemproxy with hash_tag "{}" puts them on
// one server. Correctness does not depend on that co-location.
package keys

import "strconv"

// Fence is the reserved member of the scheduled ZSET that holds the
// partition's fence: its score is minus the newest fencing token. Message
// ids cannot contain control characters, so no id collides with it, and its
// negative score keeps it out of every ZRANGEBYSCORE from 0.
const Fence = "\x00fence"

// GavePrefix begins the reserved members of the scheduled ZSET that mark a
// graceful handover: GavePrefix + consumer id, scored minus the token of
// the owner that gave the partition up. Each names a consumer whose
// handlers may still be running on messages of the partition (see
// store.HandOver).
const GavePrefix = "\x00gave:"

func tag(ns, topic string, p int) string {
	return ns + ":{" + topic + ":" + strconv.Itoa(p) + "}:"
}

// Scheduled is a ZSET: message id -> due time (unix ms), plus the Fence
// member and one member per segment (see store.SegField).
func Scheduled(ns, topic string, p int) string { return tag(ns, topic, p) + "s" }

// InFlight is a ZSET: message id -> visibility deadline (unix ms).
func InFlight(ns, topic string, p int) string { return tag(ns, topic, p) + "i" }

// Dead is a ZSET: message id -> time it died (unix ms).
func Dead(ns, topic string, p int) string { return tag(ns, topic, p) + "d" }

// Records is a HASH: message id -> encoded record, plus segments, the
// marks of segments not counted yet and a counter (see store.SegField).
func Records(ns, topic string, p int) string { return tag(ns, topic, p) + "m" }

// Lease is a STRING: the redsync lock of the partition.
func Lease(ns, topic string, p int) string { return tag(ns, topic, p) + "lease" }

// Epoch is a STRING counter (INCR): the partition's fencing tokens.
func Epoch(ns, topic string, p int) string { return tag(ns, topic, p) + "epoch" }

// Owner is a STRING: "worker-id token" of the partition's lease holder,
// written with the lease's expiry, for stats.
func Owner(ns, topic string, p int) string { return tag(ns, topic, p) + "owner" }

// OfPartition is every key of partition p: a key added to a partition
// belongs here too.
func OfPartition(ns, topic string, p int) []string {
	return []string{
		Scheduled(ns, topic, p), InFlight(ns, topic, p), Dead(ns, topic, p), Records(ns, topic, p),
		Lease(ns, topic, p), Epoch(ns, topic, p), Owner(ns, topic, p),
	}
}

// Meta is a HASH of topic metadata: "partitions", "created".
func Meta(ns, topic string) string { return ns + ":{" + topic + "}:meta" }

// Members is a ZSET: consumer id -> heartbeat expiry (unix ms).
func Members(ns, topic string) string { return ns + ":{" + topic + "}:members" }

// Changes is a STRING counter (INCR) of the topic's membership and
// ownership changes: consumers bump it when they join, leave or give a
// partition up, and poll it to act on a change at once.
func Changes(ns, topic string) string { return ns + ":{" + topic + "}:changes" }

// Topics is a ZSET: topic name -> time first used (unix ms).
func Topics(ns string) string { return ns + ":topics" }
