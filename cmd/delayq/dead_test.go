package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/testenv"
)

// dead requeue and purge of an id that is no dead message of the topic
// fail with "not found" (exit 1), as the HTTP API answers 404, after
// doing the ids that are.
func TestDeadOpNotFound(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	base := []string{"--addr", env.Backends[0], "--topic", "deadnf"}
	with := func(args ...string) []string { return append(args, base...) }
	if _, _, err := runArgs(t, with("send", "--id", "d1", "--max-attempts", "1")...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runArgs(t, with("sub", "--count", "1", "--fail-attempts", "1", "--timeout", "20s")...); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "d1 dead", func() bool {
		out, _, err := runArgs(t, with("dead", "list")...)
		return err == nil && strings.Contains(out, "d1")
	})
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{with("dead", "requeue", "--id", "nope"), "requeued 0\n"},
		{with("dead", "purge", "--id", "nope", "--id", "nope"), "purged 0\n"},
		{with("dead", "requeue", "--id", "d1", "--id", "nope"), "requeued 1\n"},
	} {
		out, _, err := runArgs(t, tc.args...)
		var ue *usageError
		if out != tc.out || !errors.Is(err, delayq.ErrNotFound) || errors.As(err, &ue) || !strings.Contains(err.Error(), "1 of the") {
			t.Errorf("%q: stdout %q, err %v; want %q and a not found error", tc.args, out, err, tc.out)
		}
	}
	if out, _, err := runArgs(t, with("get", "--id", "d1")...); err != nil || !strings.Contains(out, `"scheduled"`) {
		t.Errorf("d1 after requeue: %v\n%s", err, out)
	}
}
