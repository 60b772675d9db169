package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// benchTopic returns a new topic name for a run of workload:
// bench-<workload>-<random>.
func benchTopic(workload string) string {
	return "bench-" + workload + "-" + strings.ToLower(delayq.NewID(time.Now())[20:])
}

// onTopic runs run with a client of a new topic for a run of workload,
// then closes the client and drops the topic, whatever run returned: a
// run leaves nothing behind.
func onTopic(ctx context.Context, cfg benchConfig, workload string, run func(c *delayq.Client, topic string) (string, error)) (line string, err error) {
	topic := benchTopic(workload)
	c, err := cfg.client(topic)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, dropTopic(ctx, cfg, topic)) }() // after Close, and after every Close within run
	defer c.Close()
	return run(c, topic)
}

// dropTopic deletes every key of a run's topic once the run's clients
// are closed, even when the run failed or was interrupted (within
// dropTimeout): a run leaves nothing behind.
func dropTopic(ctx context.Context, cfg benchConfig, topic string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	c, err := cfg.c.client(io.Discard)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Admin().DeleteTopic(ctx, topic, delayq.DeleteTopicOptions{Force: true})
	if errors.Is(err, delayq.ErrNoTopic) { // the run failed before it made one
		return nil
	}
	return err
}

// dropTimeout bounds dropTopic.
const dropTimeout = 30 * time.Second

// createTopic creates a benchmark's topic with the configured count, as
// its first message would, and has c read its layout, so that neither
// is part of the timing.
func createTopic(ctx context.Context, cfg benchConfig, c *delayq.Client, topic string) error {
	if _, err := c.Admin().ProposeTopic(ctx, delayq.TopicConfig{Topic: topic, Partitions: cfg.c.partitions}); err != nil {
		return err
	}
	_, err := c.Inspector().Stats(ctx, topic)
	return err
}
