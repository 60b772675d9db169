package delayq

import (
	"context"
	"time"
)

// TopicClocks are the times a topic's processes last wrote from their own
// clocks, for comparing the clocks of their hosts with another's (delayq
// doctor does): a value far ahead of a reader's clock was written by a
// clock ahead of it.
type TopicClocks struct {
	// Heartbeats are the heartbeat expiries of the topic's members, each
	// written as its writer's now plus three heartbeats (a lease, with
	// the defaults).
	Heartbeats []ClockMark
	// Slots are the expiries of the slots of the topic's concurrency cap,
	// each written as its holder's now plus a lease.
	Slots []ClockMark
	// RateClock is the latest clock a consumer gave the topic's rate
	// limit (zero: none took from it), and RateBehind how far that
	// consumer's clock was behind the fastest one's.
	RateClock  time.Time
	RateBehind time.Duration
}

// ClockMark is a time one process wrote from its clock.
type ClockMark struct {
	Holder string // the member's id, or the slot's holder
	At     time.Time
}

// Clocks reads topic's TopicClocks, up to limit heartbeats and slots: one
// round trip of three commands, each of one key.
func (ins *Inspector) Clocks(ctx context.Context, topic string, limit int) (*TopicClocks, error) {
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	c, err := ins.c.store.ReadClocks(ctx, topic, limit)
	if err != nil {
		return nil, err
	}
	out := &TopicClocks{RateClock: c.BucketClock, RateBehind: c.BucketOffset}
	for _, m := range c.Members {
		out.Heartbeats = append(out.Heartbeats, ClockMark{Holder: m.ID, At: time.UnixMilli(m.Expires)})
	}
	for _, s := range c.Slots {
		out.Slots = append(out.Slots, ClockMark{Holder: s.Member, At: time.UnixMilli(s.Score)})
	}
	return out, nil
}
