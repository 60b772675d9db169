// Package partition maps message ids to partitions and validates topic
// names and message ids. It is pure: it imports nothing that talks to Redis.
//
// The mapping is murmur3_32(id) % n. It is a wire format: changing it would
// strand every queued message in a partition its consumers no longer read,
// so it is pinned by known-answer tests.
//
// Files:
//
//   - partition.go: the mapping (For), id steering (Steer), the checks of
//     topic names, ids and counts, and murmur3
package partition
