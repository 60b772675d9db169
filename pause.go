package delayq

import (
	"context"
	"encoding/json"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// PauseOptions configures Admin.Pause. The zero value pauses until
// Resume.
type PauseOptions struct {
	// Until ends the pause by itself at that time (rounded up to the
	// millisecond). Zero: the topic stays paused until Resume.
	Until time.Time
}

// Pause stops every consumer of topic, across the fleet, from starting
// deliveries, within a second and without a restart: deliveries already
// running finish and are acked; messages claimed ahead and not started
// go back to scheduled at once, without counting an attempt; producers
// keep writing; messages that fall due wait in the scheduled set, and are
// delivered when the pause ends (at its Until, or at Resume), in due
// order per partition. Pausing a paused topic replaces its end. It fails
// with ErrNoTopic for a topic that does not exist, and ErrInvalid for an
// Until not in the future, and writes nothing then.
func (adm *Admin) Pause(ctx context.Context, topic string, opts PauseOptions) error {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return err
	}
	var until int64
	if !opts.Until.IsZero() {
		now := c.opts.Now()
		if !opts.Until.After(now) {
			return fieldErr("PauseOptions.Until", opts.Until.Format(time.RFC3339Nano), "is not in the future (now %s)",
				now.Format(time.RFC3339Nano))
		}
		until = clock.CeilMS(opts.Until).UnixMilli()
	}
	return c.store.SetPause(ctx, topic, true, until)
}

// Resume ends topic's pause (see Pause): its consumers start the
// messages that fell due meanwhile at once. Resuming a topic not paused
// does nothing. It fails with ErrNoTopic for a topic that does not exist.
func (adm *Admin) Resume(ctx context.Context, topic string) error {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return err
	}
	return c.store.SetPause(ctx, topic, false, 0)
}

// PauseState is a topic's pause, as Stats and Partitions report it.
type PauseState struct {
	// Paused: no delivery of the topic starts (see Admin.Pause).
	Paused bool `json:"paused,omitempty"`
	// PausedUntil is when the pause ends by itself; nil for a pause until
	// resumed.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
}

// MarshalJSON encodes the pause's end in RFC 3339 UTC with three-digit
// milliseconds (see PartitionStats.MarshalJSON).
func (p PauseState) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Paused      bool   `json:"paused"`
		PausedUntil string `json:"paused_until,omitempty"`
	}{p.Paused, wireTime(p.PausedUntil)})
}

// pauseState returns the pause of ctrl at now: a timed pause that ended
// is none.
func pauseState(ctrl store.Controls, now time.Time) PauseState {
	if !ctrl.PausedAt(now.UnixMilli()) {
		return PauseState{}
	}
	ps := PauseState{Paused: true}
	if ctrl.PausedUntil > 0 {
		t := time.UnixMilli(ctrl.PausedUntil)
		ps.PausedUntil = &t
	}
	return ps
}
