package delayq

import (
	"testing"

	"go.uber.org/goleak"
)

// Every consumer, coalescer and lease a test starts must be stopped by the
// end of the test run.
func TestMain(m *testing.M) {
	// testenv keeps one OS-thread-locked goroutine that spawns servers
	// with Pdeathsig (so they die with the test binary); it lives as long
	// as the process by design.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/delayq/delayq/internal/testenv.startCmd.func1.1"))
}
