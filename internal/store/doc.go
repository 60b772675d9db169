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
package store
