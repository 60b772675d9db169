// Package wire holds the text forms delayq prints, shared by the root
// package's JSON, the CLI and the HTTP API, so that every output writes
// times and bodies the same way.
//
// Files:
//
//   - wire.go: the form of times (TimeLayout, Time) and of bodies (Body)
package wire
