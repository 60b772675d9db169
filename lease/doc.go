// Package lease gives a process exclusive, expiring ownership of a
// partition, in the shape of etcd's concurrency.Session: Acquire returns a
// Lease whose one keep-alive goroutine extends it every Expiry/3 (Expiry/2
// while its holder is idle, see SetIdle), whose Ctx is cancelled the
// moment it can no longer be trusted (Until minus a margin passed without
// a successful extension), and whose Release is idempotent.
//
// The lock is a redsync mutex (acquire is SET NX PX, extend and release are
// one-key scripts: all work through Codis and Twemproxy). redsync has no
// fencing tokens, so Acquire takes one from a caller-supplied counter (the
// partition's epoch key, raised to the clock) after every acquisition: a
// newer owner always holds a larger token, and storage refuses claims
// made under an older one.
//
// Files:
//
//   - lease.go: Acquire and the Lease: its keep-alive, fencing token,
//     Valid, SetIdle and Release
//   - manager.go: the Manager: membership (Membership), fair share,
//     acquiring and handing over partitions, a Work per owned partition
//   - share.go: the fair share: floor or ceil by rank (Share, Rank)
package lease
