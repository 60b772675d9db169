// Package portable knows the set of Redis commands that work through Codis
// and Twemproxy (the set in check.go; docs/portability.md lists it and says
// why each command is in or out) and refuses every other command before it
// is sent.
//
// Every connection delayq opens comes from Dial, which wraps the redigo
// connection in a checking Conn. The check is by shape: the command, its
// option words and its key count. A command outside the set, or with more
// than one key, returns an error wrapping ErrNotPortable and is never
// written to the socket.
//
// When the environment variable DELAYQ_COMMAND_AUDIT names a file, every
// process appends each distinct command shape it sends (or refuses) to that
// file, once per process, so a test run can prove which commands it sent
// (see cmd auditcheck).
//
// Files:
//
//   - check.go: the portable set and the check of each command's shape
//     (Check, Shape, RegisterScript), and CheckCluster for the connections of
//     the cluster router
//   - addrs.go: SplitAddrs, the check of a list of host:port addresses
//   - conn.go: the checking connection (Dial, Conn) and the audit of each
//     shape a process sends (Record)
//   - audit.go: the audit of a test run: the portable set written out
//     again as shapes, and ReadAudit
//   - errors.go: a peer that answers but will never serve: ErrAuth,
//     ErrNotRedis
//   - diag.go: INFO straight from a backend: its memory and settings
//     (BackendUsedMemory, BackendSettings); a cluster master's
//     cluster-require-full-coverage (ClusterFullCoverage)
//   - cpu.go: a backend's CPU time, from INFO cpu (BackendCPU)
//   - processed.go: the commands a backend has run, from INFO stats
//     (BackendCommandsProcessed)
package portable
