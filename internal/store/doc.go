// Package store is the only package that talks to Redis (besides redsync,
// which runs on this package's pool). Every operation is a short sequence
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
package store
