package delayq

import (
	"context"
	"errors"
)

// Consumer delivers a topic's messages to a Handler. It owns every
// partition whose lease it can get. Create it with Client.NewConsumer and
// start it with Run. Its methods are safe for concurrent use.
type Consumer struct {
	c    *Client
	opts ConsumerOptions
	h    Handler
}

// NewConsumer returns a consumer of opts.Topic. It validates the options
// but does not connect.
func (c *Client) NewConsumer(opts ConsumerOptions, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("delayq: nil handler")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Consumer{c: c, opts: opts, h: h}, nil
}

// Run consumes until ctx is done, Shutdown is called or Limit deliveries
// have started, then shuts down gracefully: it stops claiming, returns held
// messages to scheduled at once, waits up to ShutdownTimeout for running
// handlers, releases its leases and returns nil. It returns an error only
// if it could not start (bad topic, partition count mismatch).
func (k *Consumer) Run(ctx context.Context) error { return errors.New("unimplemented") }

// Shutdown makes Run stop gracefully and waits until it returned or ctx is
// done. Safe to call more than once.
func (k *Consumer) Shutdown(ctx context.Context) error { return nil }

// Stats returns a snapshot of the consumer's counters.
func (k *Consumer) Stats() ConsumerStats { return ConsumerStats{} }

// ID returns the consumer's id.
func (k *Consumer) ID() string { return k.opts.ID }
