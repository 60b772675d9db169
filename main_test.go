package delayq

import (
	"fmt"
	"os"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
	"go.uber.org/goleak"
)

// TestMain starts the Twemproxy (with two backends) the examples run
// against, as $DELAYQ_ADDR; the tests start servers of their own. Every
// consumer, coalescer and lease a test starts must be stopped by the end
// of the run.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := testenv.StartDaemon("", testenv.Options{Backends: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		return 1
	}
	os.Setenv("DELAYQ_ADDR", env.Proxy)
	code := m.Run()
	env.Stop()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction(testenv.SpawnerFunc)); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	return code
}
