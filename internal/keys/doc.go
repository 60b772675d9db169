// Package keys is delayq's key schema: the one place that builds the names
// of Redis keys, and the names delayq gives to hash fields, ZSET members
// and lease values of its own. The schema is a wire format: changing a name
// strands the data under the old one, so every name is pinned by a golden
// test.
//
// Every key of a partition carries the hash tag {topic:p}, so Codis puts a
// partition's keys on one slot and Twemproxy with hash_tag "{}" puts them on
// one server. Correctness does not depend on that co-location.
//
// Files:
//
//   - keys.go: every key, field and member name (Scheduled, Records,
//     Meta, Changes, ...), the reserved names and the lease value
package keys
