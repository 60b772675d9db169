package delayq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// TopicConfig is what the owner of a topic declares for it, as a
// worker's [[topic]] does: the partition count it is created with, and
// the settings proposed to it. Admin.ProposeTopic applies it; a
// Consumer only consumes.
type TopicConfig struct {
	// Topic is the topic. Required.
	Topic string
	// Partitions is the count the topic is created with if it does not
	// exist. An existing topic keeps its stored count: a different one
	// is logged as a warning that names both. 0: the client's
	// Options.Partitions (with AutoPartitions, brought within its Min and
	// Max).
	Partitions int
	// Limits are the fleet-wide limits the topic gets if its limits were
	// never set nor cleared (see Admin.SetLimits). nil: none proposed.
	Limits *Limits
	// UniqueFor is the default uniqueness window the topic gets if its
	// window was never set (see Admin.SetUniqueFor). nil: none proposed.
	UniqueFor *time.Duration
	// AutoPartitions turns on the topic's automatic partition count (see
	// Admin.SetAutoPartitions) if it was never set nor turned off. nil:
	// none proposed.
	AutoPartitions *AutoPartitions
	// Schedules are applied by the rule of Admin.ApplySchedules. Empty:
	// the topic's schedules are left alone.
	Schedules []Schedule
}

// Proposed is what ProposeTopic did with one setting of a TopicConfig.
type Proposed struct {
	Setting  string // "limits", "unique_for" or "auto_partitions"
	Proposed string // the configured value, as its String prints it
	Stored   string // the value that applies now
	Written  bool   // this call stored it: the topic had none decided
}

// TopicProposal is what ProposeTopic did.
type TopicProposal struct {
	Partitions int               // the topic's count
	Settings   []Proposed        // one per setting the config proposes
	Schedules  []ScheduleApplied // what became of each schedule
}

// ProposeTopic creates cfg.Topic if it does not exist and proposes cfg's
// settings to it. A proposed setting is stored only where the topic
// never had one decided (set, or cleared): otherwise the stored one
// applies, and a different one is logged as a warning that names both.
// So a restart never undoes a change made at run time (delayq limits
// --set), and a rolling deploy with two versions of a file never flips
// a setting. Every value is checked before anything is written.
//
// While Redis cannot be reached, it waits for it, as a consumer
// starting does, until ctx ends (then it returns ctx's error).
func (adm *Admin) ProposeTopic(ctx context.Context, cfg TopicConfig) (*TopicProposal, error) {
	c := adm.c
	if err := cfg.check(c); err != nil {
		return nil, err
	}
	log := c.opts.Logger.With("topic", cfg.Topic)
	// It waits for Redis as a consumer does: the outage is logged once,
	// by the store's Outage, and the failed tries quietly.
	defer c.store.Outage().Wait(0)()
	var out *TopicProposal
	err := c.whileUnreachable(ctx, nil, "propose topic: waiting for redis", []any{"topic", cfg.Topic}, func(ctx context.Context) error {
		var err error
		out, err = c.proposeTopic(ctx, cfg, log)
		return err
	})
	return out, err
}

// check validates cfg for ProposeTopic.
func (cfg *TopicConfig) check(c *Client) error {
	if err := validateTopic(cfg.Topic); err != nil {
		return err
	}
	if cfg.Partitions != 0 {
		if err := partition.ValidateCount(cfg.Partitions); err != nil {
			return fieldErr("TopicConfig.Partitions", cfg.Partitions, "is out of range 1..%d", partition.MaxPartitions)
		}
	}
	if cfg.Limits != nil {
		if err := cfg.Limits.Validate(); err != nil {
			return fmt.Errorf("TopicConfig.Limits: %w", err)
		}
	}
	if cfg.UniqueFor != nil {
		if _, err := uniqueForMS(cfg.Topic, *cfg.UniqueFor); err != nil {
			return fmt.Errorf("TopicConfig.UniqueFor: %w", err)
		}
	}
	if cfg.AutoPartitions != nil {
		if err := cfg.AutoPartitions.Validate(); err != nil {
			return fmt.Errorf("TopicConfig.AutoPartitions: %w", err)
		}
	}
	if err := c.checkSchedules(cfg.Schedules); err != nil {
		return fmt.Errorf("TopicConfig.Schedules: %w", err)
	}
	return nil
}

// proposeTopic is one try of ProposeTopic.
func (c *Client) proposeTopic(ctx context.Context, cfg TopicConfig, log *slog.Logger) (*TopicProposal, error) {
	proposed, set := cfg.Partitions, cfg.Partitions != 0
	if !set {
		proposed, set = c.opts.Partitions, c.partitionsSet
	}
	if a := cfg.AutoPartitions; a != nil && cfg.Partitions == 0 {
		// A topic created on an automatic count starts within its bounds.
		b := a.withDefaults()
		proposed, set = min(max(proposed, b.Min), b.Max), false
	}
	l, err := c.ensureTopicAs(ctx, cfg.Topic, proposed, set)
	if err != nil {
		return nil, err
	}
	out := &TopicProposal{Partitions: l.Count}
	if len(cfg.Schedules) > 0 {
		out.Schedules, err = c.Admin().ApplySchedules(ctx, cfg.Topic, cfg.Schedules)
		for _, a := range out.Schedules {
			log.Info("schedule applied", "schedule", a.Name, "action", a.Action)
		}
		if err != nil {
			return nil, fmt.Errorf("topic %s: apply schedules: %w", cfg.Topic, err)
		}
	}
	for _, p := range c.proposals(cfg) {
		got, err := p.propose(ctx, log)
		if err != nil {
			return nil, err
		}
		out.Settings = append(out.Settings, got)
	}
	return out, nil
}

// proposal is one setting of a TopicConfig, with how to store it where
// the topic has none decided and how to read the stored one.
type proposal struct {
	setting, want string
	set, differ   string // the log lines of a write and of a difference
	write         func(context.Context) (bool, error)
	stored        func(context.Context) (string, error)
}

// proposals returns the settings cfg proposes.
func (c *Client) proposals(cfg TopicConfig) []proposal {
	topic := cfg.Topic
	var ps []proposal
	if cfg.Limits != nil {
		want := *cfg.Limits
		ps = append(ps, proposal{
			setting: "limits", want: want.String(),
			set:    "topic limits set",
			differ: "the topic's stored limits differ from the configured ones; the stored ones apply (change them with delayq limits)",
			write: func(ctx context.Context) (bool, error) {
				return c.store.SetLimits(ctx, topic, storeLimits(want), true)
			},
			stored: func(ctx context.Context) (string, error) {
				stored, err := c.Inspector().Limits(ctx, topic)
				return stored.String(), err
			},
		})
	}
	if cfg.UniqueFor != nil {
		d := *cfg.UniqueFor
		ps = append(ps, proposal{
			setting: "unique_for", want: windowText(d),
			set:    "topic uniqueness window set",
			differ: "the topic's stored uniqueness window differs from the configured one; the stored one applies (change it with delayq unique-for)",
			write: func(ctx context.Context) (bool, error) {
				written, err := c.store.SetUniqueFor(ctx, topic, windowMS(d), true)
				if written {
					c.forget(topic)
				}
				return written, err
			},
			stored: func(ctx context.Context) (string, error) {
				stored, err := c.Inspector().UniqueFor(ctx, topic)
				return windowText(stored), err
			},
		})
	}
	if cfg.AutoPartitions != nil {
		want := cfg.AutoPartitions.withDefaults()
		ps = append(ps, proposal{
			setting: "auto_partitions", want: want.String(),
			set:    "automatic partition count set",
			differ: "the topic's stored automatic partition count differs from the configured one; the stored one applies (change it with delayq partitions --auto)",
			write: func(ctx context.Context) (bool, error) {
				return c.store.SetAuto(ctx, topic, want.toStore(), true)
			},
			stored: func(ctx context.Context) (string, error) {
				stored, err := c.Inspector().AutoPartitionsOf(ctx, topic)
				if err != nil || stored == nil {
					return "off", err
				}
				return stored.String(), nil
			},
		})
	}
	return ps
}

// propose writes the setting where the topic never had one decided
// (logging it), else reads the stored one and warns when it is not the
// configured one. Settings compare by their String, which says what
// applies.
func (p proposal) propose(ctx context.Context, log *slog.Logger) (Proposed, error) {
	out := Proposed{Setting: p.setting, Proposed: p.want}
	written, err := p.write(ctx)
	if err != nil {
		return out, err
	}
	if written {
		log.Info(p.set, "setting", p.want)
		out.Stored, out.Written = p.want, true
		return out, nil
	}
	if out.Stored, err = p.stored(ctx); err != nil {
		return out, err
	}
	if out.Stored != p.want {
		log.Warn(p.differ, "stored", out.Stored, "configured", p.want)
	}
	return out, nil
}

// Backoff of a start (a consumer's, ProposeTopic) while Redis cannot be
// reached.
const (
	startRetryMin = 100 * time.Millisecond
	startRetryMax = 2 * time.Second
)

// whileUnreachable runs f until it returns anything but a failure to
// reach Redis (store.Unavailable), with backoff between tries, logging
// what, with attrs, through the client's error log (the outage itself is
// logged once, by the store's Outage). It returns f's last error, or
// ctx's when ctx ends first; stop, when closed, ends the wait as ctx
// does but with nil.
func (c *Client) whileUnreachable(ctx context.Context, stop <-chan struct{}, what string, attrs []any, f func(context.Context) error) error {
	wait := startRetryMin
	for {
		err := f(ctx)
		switch {
		case err == nil || !store.Unavailable(err):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		c.errLog.Log(what, err, attrs...)
		t := time.NewTimer(clock.Jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-stop:
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, startRetryMax)
	}
}
