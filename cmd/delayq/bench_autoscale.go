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
// makes the count do. The fleet leaves at the end, whatever happened.
func benchAutoscale(ctx context.Context, cfg benchConfig) (string, error) {
	ac := cfg.autoscale
	return onTopic(ctx, cfg, "autoscale", func(c *delayq.Client, topic string) (line string, err error) {
		settings, err := autoscaleTopic(ctx, cfg, c, topic)
		if err != nil {
			return "", err
		}
		fleet := &autoscaleFleet{cfg: cfg, topic: topic}
		defer func() { err = fleet.leaveAll(err) }()
		if err := fleet.join(ctx); err != nil {
			return "", err
		}
		sends := startAutoscaleSends(ctx, c, topic)
		tally, err := fleet.run(ctx, c, ac)
		if err != nil {
			sends.cancel()
			return "", err
		}
		sent, err := sends.stop()
		if err != nil {
			return "", err
		}
		if err := fleet.awaitDelivered(ctx, sent); err != nil {
			return "", err
		}
		return autoscaleLine(ac, settings, tally, sent, fleet.delivered.Load()), nil
	})
}

// autoscaleTopic creates the autoscale workload's topic with --partitions
// partitions (4 without it), sets its count automatic with the workload's
// shrink_after, and returns the settings stored. A fleet of 1 to 16
// crosses both thresholds of a topic of 4; the consumers' clients propose
// no count, so that none warns when the count has changed.
func autoscaleTopic(ctx context.Context, cfg benchConfig, c *delayq.Client, topic string) (*delayq.AutoPartitions, error) {
	create := cfg
	if create.c.partitions == 0 {
		create.c.partitions = defaultAutoscalePartitions
	}
	if err := createTopic(ctx, create, c, topic); err != nil {
		return nil, err
	}
	auto := delayq.AutoPartitions{ShrinkAfter: cfg.autoscale.shrinkAfter}
	if err := c.Admin().SetAutoPartitions(ctx, topic, &auto); err != nil {
		return nil, err
	}
	return c.Inspector().AutoPartitionsOf(ctx, topic)
}

// autoscaleFleet is the consumers of the autoscale workload's topic, each
// on a client of its own, and the deliveries they made. Its methods are
// called from one goroutine; delivered is safe for concurrent use.
type autoscaleFleet struct {
	cfg       benchConfig
	topic     string
	members   []autoscaleMember
	delivered atomic.Int64
}

// autoscaleMember is a consumer of the fleet: its client, what stops it
// and where its Run returns.
type autoscaleMember struct {
	c    *delayq.Client
	stop context.CancelFunc
	done chan error
}

// handle is the fleet's handler: it counts the delivery.
func (f *autoscaleFleet) handle(context.Context, *delayq.Delivery) error {
	f.delivered.Add(1)
	return nil
}

// join starts a consumer of the topic, on a client of its own, that runs
// until ctx is done or it leaves.
func (f *autoscaleFleet) join(ctx context.Context) error {
	mc, err := f.cfg.client(f.topic)
	if err != nil {
		return err
	}
	k, err := mc.NewConsumer(delayq.ConsumerOptions{Topic: f.topic, Concurrency: f.cfg.concurrency, PollInterval: f.cfg.poll}, f.handle)
	if err != nil {
		mc.Close()
		return err
	}
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(kctx) }()
	f.members = append(f.members, autoscaleMember{mc, cancel, done})
	return nil
}

// leave stops a consumer of the fleet taken at random, waits for it and
// closes its client; it returns the error its Run returned.
func (f *autoscaleFleet) leave() error {
	i := rand.IntN(len(f.members))
	m := f.members[i]
	f.members = append(f.members[:i], f.members[i+1:]...)
	m.stop()
	err := <-m.done
	m.c.Close()
	return err
}

// leaveAll makes every consumer of the fleet leave, and returns err with
// their errors joined to it.
func (f *autoscaleFleet) leaveAll(err error) error {
	for len(f.members) > 0 {
		err = errors.Join(err, f.leave())
	}
	return err
}

// autoscaleTally is what the run of the fleet did and saw.
type autoscaleTally struct {
	counts        []string // each change of the count seen, "4->8"
	joins, leaves int      // the consumers that joined and left
	last          string   // the change seen last, "" when none ran
}

// run moves the fleet for ac's duration, every 5 to 40 s (move), and
// reads the topic's count every 500 ms (see), until the duration is over
// or ctx is done.
func (f *autoscaleFleet) run(ctx context.Context, c *delayq.Client, ac autoscaleConfig) (autoscaleTally, error) {
	var t autoscaleTally
	end := time.Now().Add(ac.duration)
	nextMove := time.Now().Add(randBetween(5*time.Second, 40*time.Second))
	for time.Now().Before(end) {
		if err := waitFor(ctx, 500*time.Millisecond); err != nil {
			return t, err
		}
		t.see(ctx, c, f.topic)
		if time.Now().Before(nextMove) {
			continue
		}
		nextMove = time.Now().Add(randBetween(5*time.Second, 40*time.Second))
		if err := f.move(ctx, &t, ac.maxFleet); err != nil {
			return t, err
		}
	}
	return t, nil
}

// see reads the count of topic and tallies a change of it not seen yet
// (a failed read is skipped: the next one tells).
func (t *autoscaleTally) see(ctx context.Context, c *delayq.Client, topic string) {
	info, err := c.Inspector().Partitions(ctx, topic)
	if err != nil {
		return
	}
	if now := fmt.Sprint(info.Count, "->", info.Next); info.Next != 0 && now != t.last {
		t.counts = append(t.counts, now)
		t.last = now
	} else if info.Next == 0 {
		t.last = ""
	}
}

// move makes 1 to 4 consumers join the fleet, or leave it, at random,
// keeping it between 1 and maxFleet, and tallies them.
func (f *autoscaleFleet) move(ctx context.Context, t *autoscaleTally, maxFleet int) error {
	k := 1 + rand.IntN(4)
	if rand.IntN(2) == 0 {
		for ; k > 0 && len(f.members) < maxFleet; k-- {
			if err := f.join(ctx); err != nil {
				return err
			}
			t.joins++
		}
		return nil
	}
	for ; k > 0 && len(f.members) > 1; k-- {
		if err := f.leave(); err != nil {
			return err
		}
		t.leaves++
	}
	return nil
}

// awaitDelivered waits, up to a minute, until the fleet delivered sent
// messages: those sent are due within 5 s.
func (f *autoscaleFleet) awaitDelivered(ctx context.Context, sent int) error {
	for deadline := time.Now().Add(time.Minute); f.delivered.Load() < int64(sent) && time.Now().Before(deadline); {
		if err := waitFor(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// autoscaleSends is the messages of the autoscale workload, sent by a
// goroutine of their own: 20 a second, each due 0 to 5 s after its send.
type autoscaleSends struct {
	cancel context.CancelFunc // ends the sends
	done   chan error         // the sends' end: nil, or the error that ended them
	sent   int                // written by the goroutine, read after done
}

// startAutoscaleSends starts sending the workload's messages to topic
// with c, until stop (or cancel, or ctx being done).
func startAutoscaleSends(ctx context.Context, c *delayq.Client, topic string) *autoscaleSends {
	sendCtx, cancel := context.WithCancel(ctx)
	s := &autoscaleSends{cancel: cancel, done: make(chan error, 1)}
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sendCtx.Done():
				s.done <- nil
				return
			case <-t.C:
			}
			d := time.Duration(rand.IntN(5000)) * time.Millisecond
			if _, err := c.Send(sendCtx, delayq.Message{Topic: topic, Delay: d}); err != nil && sendCtx.Err() == nil {
				s.done <- err
				return
			}
			s.sent++
		}
	}()
	return s
}

// stop ends the sends and returns how many were sent, or the error that
// ended them before.
func (s *autoscaleSends) stop() (int, error) {
	s.cancel()
	if err := <-s.done; err != nil {
		return 0, err
	}
	return s.sent, nil
}

// autoscaleLine is the workload's line: the run's duration, the fleet's
// moves, the changes of the count seen against the most the damping of
// settings allows in that time, and the messages sent and delivered.
func autoscaleLine(ac autoscaleConfig, settings *delayq.AutoPartitions, t autoscaleTally, sent int, delivered int64) string {
	step := min(settings.GrowAfter, settings.ShrinkAfter) + autoscaleMinChange + settings.Cooldown
	bound := int(ac.duration/step) + 1
	changes, counts := len(t.counts), t.counts
	if len(counts) == 0 {
		counts = []string{"none"}
	}
	return fmt.Sprintf("workload=autoscale duration_s=%.0f joins=%d leaves=%d changes=%d damping_bound=%d changes_seen=%s messages=%d delivered=%d",
		ac.duration.Seconds(), t.joins, t.leaves, changes, bound, strings.Join(counts, ","), sent, delivered)
}

// randBetween returns a random duration in [lo, hi).
func randBetween(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}
