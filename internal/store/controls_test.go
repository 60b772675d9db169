package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/testenv"
)

// A control stored whose signal to the consumers fails is reported as
// stored, not as a failure: the consumers read it within a few seconds
// anyway, and a caller told it failed would believe nothing changed.
func TestSetControlSignalLost(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	ctx := context.Background()
	const topic = "signal-lost"
	var failed int
	s, err := Open(Options{Conn: Conn{Addr: env.Backends[0]}, Hook: func(cmd string, args []any) error {
		if cmd == "HINCRBY" && len(args) > 1 && args[1] == keys.ControlsField(topic) {
			failed++
			return errors.New("injected: the signal is lost")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.EnsureTopic(ctx, topic, 2, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	want := Limits{Rate: 5, Concurrency: 2}
	if written, err := s.SetLimits(ctx, topic, want, false); err != nil || !written {
		t.Fatalf("SetLimits with the signal lost: written %v, %v; want written and no error", written, err)
	}
	if err := s.SetPause(ctx, topic, true, 0); err != nil {
		t.Fatalf("SetPause with the signal lost: %v", err)
	}
	if failed != 2 {
		t.Fatalf("the signal failed %d times, want 2: the test did not inject what it means to", failed)
	}
	c, ok, err := s.ReadControls(ctx, topic)
	if err != nil || !ok || c.Limits != want || !c.Paused {
		t.Fatalf("controls stored: %+v, %v, %v; want limits %+v and paused", c, ok, err, want)
	}
}
