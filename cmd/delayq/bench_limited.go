package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/portable"
)

// limitedConfig is what the limited workload adds to benchConfig.
type limitedConfig struct {
	rate      float64       // the topic's rate limit, deliveries a second (--rate)
	consumers int           // consumers, each on a client of its own (--consumers)
	warmup    time.Duration // at each rate before its window (--warmup)
	window    time.Duration // measured at each rate (--window)
}

// Defaults of the limited workload's flags.
const (
	defaultLimitedRate      = 100
	defaultLimitedConsumers = 2
	defaultLimitedWarmup    = 3 * time.Second
	defaultLimitedWindow    = 20 * time.Second
)

// limitedPhase is what one window measured.
type limitedPhase struct {
	delivered    float64 // handler starts a second
	cmds         float64 // commands a second the consumers' clients sent
	backendCmds  float64 // commands a second the backends ran (--backends), scripts' included
	backendsRead bool
}

// idle formats p as the window before the backlog: the fleet's own cost.
func (p limitedPhase) idle() string {
	s := fmt.Sprintf("idle_cmds_per_s=%.1f", p.cmds)
	if p.backendsRead {
		s += fmt.Sprintf(" idle_backend_cmds_per_s=%.0f", p.backendCmds)
	}
	return s
}

// at formats p as the window at rate limit rate.
func (p limitedPhase) at(rate float64) string {
	perMsg := 0.0
	if p.delivered > 0 {
		perMsg = p.cmds / p.delivered
	}
	s := fmt.Sprintf("rate_limit=%s delivered_per_s=%.1f cmds_per_s=%.1f cmds_per_msg=%.2f",
		strconv.FormatFloat(rate, 'f', -1, 64), p.delivered, p.cmds, perMsg)
	if p.backendsRead {
		s += fmt.Sprintf(" backend_cmds_per_s=%.0f", p.backendCmds)
	}
	return s
}

// benchLimited is the limited workload: --consumers consumers (each on a
// client of its own, no-op handlers) of a topic with a rate limit of
// --rate. Each window comes after --warmup and lasts --window: one while
// the topic is empty (the fleet's own cost), then, with a fleet started
// anew, one with a backlog of n messages all due at once, and one with
// the same backlog at twice the rate. Each gives the deliveries a second, the commands a second the
// consumers' clients sent and, with --backends, the commands a second the
// backends ran (INFO stats, commands inside scripts included): what the
// topic costs follows its rate, not its backlog.
func benchLimited(ctx context.Context, cfg benchConfig) (string, error) {
	n := cfg.count(100000)
	lc := cfg.limited
	return onTopic(ctx, cfg, "limited", func(c *delayq.Client, topic string) (line string, err error) {
		if err := createTopic(ctx, cfg, c, topic); err != nil {
			return "", err
		}
		// Limited before any consumer runs: none ever drains it unlimited.
		if err := c.Admin().SetLimits(ctx, topic, delayq.Limits{Rate: lc.rate}); err != nil {
			return "", err
		}
		var delivered atomic.Int64
		handle := func(context.Context, *delayq.Delivery) error {
			delivered.Add(1)
			return nil
		}
		measure := func(fleet *fleet) (limitedPhase, error) {
			if err := waitFor(ctx, lc.warmup); err != nil {
				return limitedPhase{}, err
			}
			b0, err := sumBackends(ctx, cfg, portable.BackendCommandsProcessed)
			if err != nil {
				return limitedPhase{}, err
			}
			d0, c0, t0 := delivered.Load(), fleet.commands(), time.Now()
			if err := waitFor(ctx, lc.window); err != nil {
				return limitedPhase{}, err
			}
			d1, c1, took := delivered.Load(), fleet.commands(), time.Since(t0)
			b1, err := sumBackends(ctx, cfg, portable.BackendCommandsProcessed)
			if err != nil {
				return limitedPhase{}, err
			}
			if d1 >= int64(n) {
				return limitedPhase{}, fmt.Errorf("the backlog of %d messages ran out during a window: use a larger --n", n)
			}
			secs := took.Seconds()
			return limitedPhase{
				delivered: float64(d1-d0) / secs,
				cmds:      float64(c1-c0) / secs,
				// The first reading's own INFO (and AUTH) count in the second.
				backendCmds:  float64(b1-b0-cfg.infoCommands()) / secs,
				backendsRead: len(cfg.backends) > 0,
			}, nil
		}
		// The idle window has a fleet of its own: the reconciler of the
		// backlog's fleet then starts its sweeps with the backlog there, and
		// every window with a backlog is within the first of them (at 256
		// records a pass, a pass a partition every 5 s: about 2 min for
		// 100000 messages).
		idleFleet, err := startFleet(ctx, cfg, topic, lc.consumers, handle)
		if err != nil {
			return "", err
		}
		idle, err := measure(idleFleet)
		if err = errors.Join(err, idleFleet.stop()); err != nil {
			return "", err
		}

		if _, err := fill(ctx, cfg, c, numbered(topic, "l", n, cfg.body(), at(time.Now()))); err != nil {
			return "", err
		}
		fleet, err := startFleet(ctx, cfg, topic, lc.consumers, handle)
		if err != nil {
			return "", err
		}
		defer func() { err = errors.Join(err, fleet.stop()) }()
		slow, err := measure(fleet)
		if err != nil {
			return "", err
		}
		// The consumers are told of the change at once; the warm-up covers
		// the rest.
		if err := c.Admin().SetLimits(ctx, topic, delayq.Limits{Rate: 2 * lc.rate}); err != nil {
			return "", err
		}
		fast, err := measure(fleet)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("workload=limited n=%d consumers=%d window_s=%s %s %s %s",
			n, lc.consumers, strconv.FormatFloat(lc.window.Seconds(), 'f', -1, 64),
			idle.idle(), slow.at(lc.rate), fast.at(2*lc.rate)), nil
	})
}

// fleet is consumers of one topic, each with a client of its own, as
// separate processes would run them.
type fleet struct {
	clients   []*delayq.Client
	consumers []*delayq.Consumer
	cancel    context.CancelFunc
	done      chan error
}

// startFleet starts w consumers of topic running h and returns once they
// share its partitions: all owned, each consumer with its share.
func startFleet(ctx context.Context, cfg benchConfig, topic string, w int, h delayq.Handler) (*fleet, error) {
	rctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel, done: make(chan error, w)}
	for range w {
		c, err := cfg.client(topic)
		if err != nil {
			return nil, errors.Join(err, f.stop())
		}
		f.clients = append(f.clients, c)
		k, err := c.NewConsumer(delayq.ConsumerOptions{
			Topic: topic, Concurrency: cfg.concurrency, Prefetch: cfg.prefetch, ClaimBatch: cfg.claimBatch,
			PollInterval: cfg.poll,
		}, h)
		if err != nil {
			return nil, errors.Join(err, f.stop())
		}
		f.consumers = append(f.consumers, k)
		go func() { f.done <- k.Run(rctx) }()
	}
	info, err := f.clients[0].Inspector().Partitions(ctx, topic)
	if err != nil {
		return nil, errors.Join(err, f.stop())
	}
	share := info.Count / w
	for deadline := time.Now().Add(30 * time.Second); ; {
		total, least := 0, info.Count
		for _, k := range f.consumers {
			o := len(k.Stats().Owned)
			total += o
			least = min(least, o)
		}
		if total >= info.Count && least >= share {
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("%d consumers own %d of %d partitions after 30s (the fewest %d, want %d each)",
				w, total, info.Count, least, share), f.stop())
		}
		if err := waitFor(ctx, 10*time.Millisecond); err != nil {
			return nil, errors.Join(err, f.stop())
		}
	}
}

// commands returns the commands the fleet's clients have sent.
func (f *fleet) commands() int64 {
	var n int64
	for _, c := range f.clients {
		n += c.Commands()
	}
	return n
}

// stop stops the consumers, waits for them and closes their clients.
func (f *fleet) stop() error {
	f.cancel()
	var err error
	for range f.consumers {
		err = errors.Join(err, <-f.done)
	}
	for _, c := range f.clients {
		c.Close()
	}
	return err
}

// infoCommands is how many commands one read of the backends' commands
// processed sends them: an INFO each, after an AUTH with a password.
func (cfg benchConfig) infoCommands() int64 {
	per := int64(1)
	if cfg.c.password != "" {
		per = 2
	}
	return per * int64(len(cfg.backends))
}
