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
package delayq
