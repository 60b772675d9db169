package testenv

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr puts the child in its own process group and asks the kernel
// to SIGKILL it if its parent dies without running its cleanups, so no
// server outlives a crashed or killed test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// startCmd starts cmd from one goroutine locked to its OS thread for the
// life of the process. Pdeathsig fires when the *thread* that forked the
// child exits, and Go may end threads (a locked goroutine that returns), so
// forking from a thread that never exits keeps Pdeathsig meaning "the test
// binary died".
func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives forever
			for r := range spawnCh {
				r.res <- r.cmd.Start()
			}
		}()
	})
	res := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, res: res}
	return <-res
}
