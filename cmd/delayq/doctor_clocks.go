package main

import (
	"context"
	"fmt"
	"time"

	"github.com/delayq/delayq"
)

// clockTopics is how many topics doctor looks at for clocks at most, and
// clockValues how many members and slots of each.
const clockTopics, clockValues = 200, 1000

// readClockHints returns clockHints of the topics the client o
// configures reaches (with one connection), with a hint of its own when
// they cannot be read.
func readClockHints(ctx context.Context, o delayq.Options, now time.Time) []string {
	o.PoolSize = 1
	c, err := delayq.New(o)
	var hints []string
	if err == nil {
		hints, err = clockHints(ctx, c.Inspector(), now)
		c.Close()
	}
	if err != nil {
		hints = append(hints, fmt.Sprintf("clock: could not read the topics' clocks: %v", err))
	}
	return hints
}

// clockHints compares what the processes of each topic wrote from their
// clocks (heartbeats, slots of the concurrency cap, the rate limit's
// bucket) with this host's clock, and returns a hint for each process
// that looks off by more than delayq.MaxClockSkew. A heartbeat expires
// three heartbeats (a lease, 10 s, with the defaults) after it is
// written, a slot a lease after: one further ahead was written by a clock
// ahead of this one, or by a process given a longer lease, which the
// hint says. Clock skew does not stall the limits (docs/guarantees.md),
// but due times are compared with each consumer's clock.
func clockHints(ctx context.Context, ins *delayq.Inspector, now time.Time) ([]string, error) {
	topics, err := ins.Topics(ctx)
	if err != nil {
		return nil, err
	}
	if len(topics) > clockTopics {
		topics = topics[:clockTopics]
	}
	const skew, window = delayq.MaxClockSkew, delayq.DefaultLease
	ahead := func(at time.Time) time.Duration { return at.Sub(now) - window }
	var hints []string
	for _, t := range topics {
		topic := t.Name
		c, err := ins.Clocks(ctx, topic, clockValues)
		if err != nil {
			return hints, err
		}
		for _, m := range c.Heartbeats {
			if d := ahead(m.At); d > skew {
				hints = append(hints, fmt.Sprintf("clock: member %s of topic %s heartbeats %v ahead of this host's clock beyond a lease (%v): its clock is ahead (or its lease longer than %v); keep hosts NTP-synchronised: a consumer ahead delivers early by as much",
					m.Holder, topic, d.Round(time.Second), window, window))
			}
		}
		for _, s := range c.Slots {
			if d := ahead(s.At); d > skew {
				hints = append(hints, fmt.Sprintf("clock: slot %q of topic %s's concurrency cap expires %v ahead of this host's clock beyond a lease (%v): its holder's clock is ahead (or its lease longer); keep hosts NTP-synchronised",
					s.Holder, topic, d.Round(time.Second), window))
			}
		}
		if d := c.RateClock.Sub(now); !c.RateClock.IsZero() && d > skew {
			hints = append(hints, fmt.Sprintf("clock: a consumer of topic %s took from its rate limit with a clock %v ahead of this host's: keep hosts NTP-synchronised",
				topic, d.Round(time.Second)))
		}
		if c.RateBehind > skew {
			hints = append(hints, fmt.Sprintf("clock: a consumer of topic %s took from its rate limit with a clock %v behind another consumer's: keep hosts NTP-synchronised",
				topic, c.RateBehind.Round(time.Second)))
		}
	}
	return hints, nil
}
