package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
)

// autoscaleConfig is what the autoscale workload adds to benchConfig.
type autoscaleConfig struct {
	duration    time.Duration // the run (--duration)
	maxFleet    int           // the most consumers at once (--max-consumers)
	shrinkAfter time.Duration // the topic's shrink_after (--shrink-after)
}

// Defaults of the autoscale workload's flags.
const (
	defaultAutoscaleDuration = 10 * time.Minute
	defaultAutoscaleFleet    = 16
	// defaultAutoscalePartitions is the count the topic starts at.
	defaultAutoscalePartitions = 4
	// defaultAutoscaleShrinkAfter is the topic's shrink_after: a minute,
	// so that a 10-minute run can shrink as well as grow.
	defaultAutoscaleShrinkAfter = time.Minute
	// autoscaleMinChange is the shortest change of the count: its settle
	// time (the library's default, 30 s).
	autoscaleMinChange = 30 * time.Second
)

// benchAutoscale is the autoscale workload: a topic of 4 partitions (or
// --partitions) on an automatic count (min 1, max 64, the default
// grow_after and cooldown, --shrink-after, default 1 minute)
// whose consumers join and leave at random for --duration: every 5 to 40
// s, 1 to 4 of them join or leave, between 1 and --max-consumers, each
// consumer on a client of its own, while messages fall due (20 a second,
// each 0 to 5 s after its send). It prints the changes of the count, the
// most the damping allows in that time (one per min(grow_after,
// shrink_after) + the shortest change + cooldown, plus one), and the
// deliveries against the messages due: what a fleet that comes and goes
// makes the count do.
func benchAutoscale(ctx context.Context, cfg benchConfig) (string, error) {
	ac := cfg.autoscale
	return onTopic(ctx, cfg, "autoscale", func(c *delayq.Client, topic string) (line string, err error) {
		// A fleet of 1 to 16 crosses both thresholds of a topic of 4; the
		// consumers' clients propose no count, so that none warns when the
		// count has changed.
		create := cfg
		if create.c.partitions == 0 {
			create.c.partitions = defaultAutoscalePartitions
		}
		if err := createTopic(ctx, create, c, topic); err != nil {
			return "", err
		}
		auto := delayq.AutoPartitions{ShrinkAfter: ac.shrinkAfter}
		if err := c.SetAutoPartitions(ctx, topic, &auto); err != nil {
			return "", err
		}
		settings, err := c.AutoPartitionsOf(ctx, topic)
		if err != nil {
			return "", err
		}
		var delivered atomic.Int64
		handle := func(context.Context, *delayq.Delivery) error {
			delivered.Add(1)
			return nil
		}
		type member struct {
			c    *delayq.Client
			stop context.CancelFunc
			done chan error
		}
		var members []member
		join := func() error {
			mc, err := cfg.client(topic)
			if err != nil {
				return err
			}
			k, err := mc.NewConsumer(delayq.ConsumerOptions{Topic: topic, Concurrency: cfg.concurrency, PollInterval: cfg.poll}, handle)
			if err != nil {
				mc.Close()
				return err
			}
			kctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- k.Run(kctx) }()
			members = append(members, member{mc, cancel, done})
			return nil
		}
		leave := func() error {
			i := rand.IntN(len(members))
			m := members[i]
			members = append(members[:i], members[i+1:]...)
			m.stop()
			err := <-m.done
			m.c.Close()
			return err
		}
		defer func() {
			for len(members) > 0 {
				err = errors.Join(err, leave())
			}
		}()
		if err := join(); err != nil {
			return "", err
		}

		// The messages: 20 a second, each due 0 to 5 s after its send.
		sent := 0
		sendCtx, stopSending := context.WithCancel(ctx)
		sending := make(chan error, 1)
		go func() {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-sendCtx.Done():
					sending <- nil
					return
				case <-t.C:
				}
				d := time.Duration(rand.IntN(5000)) * time.Millisecond
				if _, err := c.Enqueue(sendCtx, delayq.Message{Topic: topic, Delay: d}); err != nil && sendCtx.Err() == nil {
					sending <- err
					return
				}
				sent++
			}
		}()

		var counts []string
		last, changes, joins, leaves := "", 0, 0, 0
		end := time.Now().Add(ac.duration)
		nextMove := time.Now().Add(randBetween(5*time.Second, 40*time.Second))
		for time.Now().Before(end) {
			if err := waitFor(ctx, 500*time.Millisecond); err != nil {
				stopSending()
				return "", err
			}
			if info, err := c.Partitions(ctx, topic); err == nil {
				if now := fmt.Sprint(info.Count, "->", info.Next); info.Next != 0 && now != last {
					changes++
					counts = append(counts, now)
					last = now
				} else if info.Next == 0 {
					last = ""
				}
			}
			if time.Now().Before(nextMove) {
				continue
			}
			nextMove = time.Now().Add(randBetween(5*time.Second, 40*time.Second))
			k := 1 + rand.IntN(4)
			if rand.IntN(2) == 0 {
				for ; k > 0 && len(members) < ac.maxFleet; k-- {
					if err := join(); err != nil {
						stopSending()
						return "", err
					}
					joins++
				}
			} else {
				for ; k > 0 && len(members) > 1; k-- {
					if err := leave(); err != nil {
						stopSending()
						return "", err
					}
					leaves++
				}
			}
		}
		stopSending()
		if err := <-sending; err != nil {
			return "", err
		}
		// The messages sent are due within 5 s: wait for them.
		for deadline := time.Now().Add(time.Minute); delivered.Load() < int64(sent) && time.Now().Before(deadline); {
			if err := waitFor(ctx, 100*time.Millisecond); err != nil {
				return "", err
			}
		}
		step := min(settings.GrowAfter, settings.ShrinkAfter) + autoscaleMinChange + settings.Cooldown
		bound := int(ac.duration/step) + 1
		if len(counts) == 0 {
			counts = []string{"none"}
		}
		return fmt.Sprintf("workload=autoscale duration_s=%.0f joins=%d leaves=%d changes=%d damping_bound=%d changes_seen=%s messages=%d delivered=%d",
			ac.duration.Seconds(), joins, leaves, changes, bound, strings.Join(counts, ","), sent, delivered.Load()), nil
	})
}

// randBetween returns a random duration in [lo, hi).
func randBetween(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}
