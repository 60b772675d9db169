package main

import (
	"testing"

	"github.com/delayq/delayq/internal/testenv"
	"go.uber.org/goleak"
)

// Every consumer, server and client a command starts must be stopped by
// the time it returns: no goroutine may outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(testenv.SpawnerFunc))
}
