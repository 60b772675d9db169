//go:build unix && !linux

package testenv

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the child in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// startCmd starts cmd.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
