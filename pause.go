package delayq

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
)

// PauseOptions configures Client.Pause. The zero value pauses until
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
func (c *Client) Pause(ctx context.Context, topic string, opts PauseOptions) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	var until int64
	if !opts.Until.IsZero() {
		now := c.opts.Now()
		if !opts.Until.After(now) {
			return fmt.Errorf("%w: PauseOptions.Until %s is not in the future (now %s)", ErrInvalid,
				opts.Until.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		}
		until = clock.CeilMS(opts.Until).UnixMilli()
	}
	return c.store.SetPause(ctx, topic, true, until)
}

// Resume ends topic's pause (see Pause): its consumers start the
// messages that fell due meanwhile at once. Resuming a topic not paused
// does nothing. It fails with ErrNoTopic for a topic that does not exist.
func (c *Client) Resume(ctx context.Context, topic string) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	return c.store.SetPause(ctx, topic, false, 0)
}

// PauseState is a topic's pause, as Stats and Partitions report it.
type PauseState struct {
	// Paused: no delivery of the topic starts (see Client.Pause).
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

// controlsEvery is how often a consumer reads its topic's controls when
// no change of them was signalled (a signal is seen within a ChangePoll):
// a signal lost on the way (see store.SetPause), as a lost wake-up,
// delays a change by this at most. As long as an idle partition's look,
// so that following the controls adds little to an idle topic's cost.
const controlsEvery = DefaultIdlePollInterval

// controls are a consumer's topic's controls as last read, which its
// partition loops and workers follow.
type controls struct {
	mu sync.Mutex
	c  store.Controls
	ch chan struct{} // closed at the next change of c
}

func newControls() *controls { return &controls{ch: make(chan struct{})} }

// set stores what was read, and tells the loops when it changed.
func (x *controls) set(c store.Controls) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c != x.c {
		x.c = c
		close(x.ch)
		x.ch = make(chan struct{})
	}
}

// pause is poller.Config.Pause.
func (x *controls) pause(now time.Time) (paused bool, until time.Time, changed <-chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.c.PausedAt(now.UnixMilli()) && x.c.PausedUntil > 0 {
		until = time.UnixMilli(x.c.PausedUntil)
	}
	return x.c.PausedAt(now.UnixMilli()), until, x.ch
}

// limits returns the topic's limits.
func (x *controls) limits() store.Limits {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.c.Limits
}

// auto returns the topic's automatic partition count.
func (x *controls) auto() store.Auto {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.c.Auto
}

// pausedAt reports whether the topic is paused at now.
func (x *controls) pausedAt(now time.Time) bool {
	paused, _, _ := x.pause(now)
	return paused
}

// followControls reads the topic's controls when their counter of the
// changes hash moves (within a ChangePoll of a change) and every
// controlsEvery besides, until ctx is done: one HMGET a read.
func (k *Consumer) followControls(ctx context.Context) {
	changed, unwatch := k.c.watch.subscribe(keys.ControlsField(k.opts.Topic), k.opts.ChangePoll)
	defer unwatch()
	t := time.NewTicker(controlsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
		// Bounded, and not cut off by ctx (see watcher.loop).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlsEvery)
		ctrl, ok, err := k.c.store.ReadControls(rctx, k.opts.Topic)
		cancel()
		switch {
		case err != nil:
			k.c.errLog.Log("read the topic's controls", err, "component", "consumer", "topic", k.opts.Topic)
		case ok: // a topic deleted under the consumer keeps its last controls
			k.setControls(ctrl)
		}
	}
}

// setControls stores the controls read, logging a change of the pause.
func (k *Consumer) setControls(ctrl store.Controls) {
	k.ctrl.mu.Lock()
	old := k.ctrl.c
	k.ctrl.mu.Unlock()
	if old.Paused != ctrl.Paused || old.PausedUntil != ctrl.PausedUntil {
		if ctrl.Paused {
			k.log.Info("topic paused", "until_ms", ctrl.PausedUntil)
		} else if old.Paused {
			k.log.Info("topic resumed")
		}
	}
	k.ctrl.set(ctrl)
}
