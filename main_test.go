package delayq

import (
	"github.com/delayq/delayq/internal/testenv"
	"testing"

	"go.uber.org/goleak"
)

// Every consumer, coalescer and lease a test starts must be stopped by the
// end of the test run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(testenv.SpawnerFunc))
}
