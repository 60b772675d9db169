// Package cluster routes delayq's commands over a Redis Cluster, with
// redigo: a Router keeps the slot map (which master serves each of the
// 16384 slots, read with CLUSTER SLOTS), and its Conn sends each command
// to the master of its key's slot, follows MOVED, ASK and TRYAGAIN, and
// pipelines per node. Every command delayq sends has one key, and every
// key of a partition carries the hash tag {topic:p}: a partition lives
// on one slot, so its commands still go in one round trip, while the
// partitions of a topic spread over the masters.
//
// The router sends two commands beyond the portable set (CLUSTER SLOTS
// and ASKING), on connections dialed with portable's Cluster option, so
// that the proxy modes stay exactly as portable as before.
//
// Files:
//
//   - slot.go: a key's hash slot (Slot): CRC16 of its hash tag
//   - router.go: the slot map, read from the nodes and kept current
//     (Router, New, Refresh); the masters and their replicas (Shards)
//   - conn.go: the routing connection (Conn): pipelines per node,
//     redirections
package cluster
