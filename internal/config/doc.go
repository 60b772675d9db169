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
package config
