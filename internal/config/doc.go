// Package config reads the worker's TOML configuration (see config.toml at
// the top of the repository for a commented sample).
//
// A Config starts from the defaults (Default) and takes what the file sets.
// Parse rejects unknown keys, found with toml.MetaData.Undecoded, and
// invalid values: each problem is an *Error that names the key, its table,
// its line and what was expected, for example
//
//	unknown key "polll_interval" in [worker] at config.toml line 12; known keys: id, lease, poll_interval, idle_poll_interval, shutdown_timeout
//
// BurntSushi/toml does not export where a key is, and keeps one position
// per dotted name (so the keys of the second [[topic]] share the entry of
// the first); locate.go therefore scans the source itself to map each key,
// array index included, to its line.
//
// Files:
//
//   - config.go: Config and its tables (Redis, Worker, HTTP, Log, Topic,
//     Handler), with the defaults the library does not define (Default)
//   - parse.go: Load and Parse: the file's schema, its unknown keys, the
//     conversion of each value
//   - locate.go: the scan of the source that maps each key to its line
//   - validate.go: Validate: the checks of the values
//   - errors.go: Error, one per problem, with its key, table and line
//   - duplicate.go: a [[topic]]'s on_duplicate, max_wait and unique_for
//   - limits.go: the [topic.limits] table
//   - auto.go: the [topic.auto_partitions] table
//   - schedule.go: the [[topic.schedule]] tables (Schedule)
//   - tracing.go: the [tracing] table (Tracing) and its defaults
package config
