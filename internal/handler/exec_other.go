//go:build !unix

package handler

import "os/exec"

// ownGroup is a no-op without Unix process groups: cancelling the
// context kills the command itself only (exec.CommandContext's default).
func ownGroup(*exec.Cmd) {}
