package delayq

import (
	"context"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/wire"
)

// controlsEvery is how often a consumer reads its topic's controls when
// no change of them was signalled (a signal is seen within a ChangePoll):
// a signal lost on the way (see store.SetPause) delays a change by this
// at most. A signal is lost only when its command fails after the
// control was stored (logged as a warning), so this is rare, and
// following the controls adds little to an idle topic's cost.
const controlsEvery = 30 * time.Second

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

// limitsAndChange returns the topic's limits, and a channel closed at
// the next change of its controls.
func (x *controls) limitsAndChange() (store.Limits, <-chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.c.Limits, x.ch
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
	now := k.c.opts.Now().UnixMilli()
	if old.Paused != ctrl.Paused || old.PausedUntil != ctrl.PausedUntil {
		switch {
		case pausedAt(ctrl, now):
			until := "resumed"
			if ctrl.PausedUntil > 0 {
				until = wire.Time(time.UnixMilli(ctrl.PausedUntil))
			}
			k.log.Info("topic paused", "until", until)
		case !ctrl.Paused && pausedAt(old, now):
			k.log.Info("topic resumed")
		}
		// A pause whose end has passed (as a consumer starting after it
		// reads it) changes nothing: it is not logged.
	}
	k.ctrl.set(ctrl)
}

// pausedAt reports whether c pauses the topic at now (unix ms): paused,
// until resumed or until a time still to come.
func pausedAt(c store.Controls, now int64) bool {
	return c.Paused && (c.PausedUntil == 0 || c.PausedUntil > now)
}
