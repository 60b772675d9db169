// Command auditcheck verifies the command audit of a test run: every
// command shape recorded in the log (DELAYQ_COMMAND_AUDIT) must be in the
// portable set (docs/portability.md), none may have been refused, and the log must show the core
// operations were exercised at all.
//
//	go run ./internal/portable/auditcheck .audit/commands.log
//
// Files:
//
//   - main.go: the check, and the shapes any full test run sends
//     (expected)
package main
