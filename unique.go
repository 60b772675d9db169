package delayq

import (
	"context"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// MaxUniqueFor is the longest uniqueness window, about 34 years: what
// the 5 bytes a finished id keeps for it hold (see docs/duplicates.md).
const MaxUniqueFor = time.Duration(store.MaxWindow) * time.Millisecond

// SetUniqueFor sets topic's default uniqueness window: a message sent to
// it with an ID of its own and no Message.UniqueFor keeps its id taken
// for d after its delivery succeeded (0: no window). A generated id gets
// no default: no other send can name it. Senders read the setting with
// the topic's layout, so a change reaches them within a second; it
// applies to messages sent from then on. It fails with ErrNoTopic for a
// topic that does not exist.
func (adm *Admin) SetUniqueFor(ctx context.Context, topic string, d time.Duration) error {
	c := adm.c
	ms, err := uniqueForMS(topic, d)
	if err != nil {
		return err
	}
	_, err = c.store.SetUniqueFor(ctx, topic, ms, false)
	c.forget(topic)
	return err
}

// windowText says a uniqueness window as the logs and delayq unique-for
// print it: "none" for 0, else as time.Duration prints it (in ms, as
// stored).
func windowText(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return (time.Duration(windowMS(d)) * time.Millisecond).String()
}

// windowMS is a uniqueness window as it is stored: in ms, a positive one
// at least 1.
func windowMS(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return ms
}

// UniqueFor returns topic's default uniqueness window (0: none). It
// fails with ErrNoTopic for a topic that does not exist.
func (ins *Inspector) UniqueFor(ctx context.Context, topic string) (time.Duration, error) {
	c := ins.c
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	return time.Duration(l.UniqueFor) * time.Millisecond, nil
}

// uniqueForMS checks a topic's uniqueness window and returns it in ms.
func uniqueForMS(topic string, d time.Duration) (int64, error) {
	if err := validateTopic(topic); err != nil {
		return 0, err
	}
	if d < 0 || d > MaxUniqueFor {
		return 0, fmt.Errorf("%w: uniqueness window %v of topic %s: want 0 to %v", ErrInvalid, d, topic, MaxUniqueFor)
	}
	return windowMS(d), nil
}
