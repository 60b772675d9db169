package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/poller"
)

// Delivery is a message handed to a Handler.
type Delivery struct {
	Topic     string
	ID        string
	Partition int
	Token     int64 // fencing token under which the message was claimed
	Attempt   int   // 1 for the first delivery
	// Due is the message's own due time: the time it was enqueued or
	// rescheduled for, kept by a redelivery after a fault (a lost owner, an
	// expired visibility deadline); after a failed attempt, the retry's
	// backoff due. Lateness is measured from it.
	Due  time.Time
	Body []byte
}

// Handler processes one delivery. Returning nil acks the message; an error
// retries it along the backoff ladder, or moves it to the dead set once its
// attempts are exhausted. ctx is cancelled at the handler timeout and when
// the partition's lease is lost. ctx carries the delivery's span
// (trace.SpanFromContext), a child of the enqueue's when the message was
// enqueued under one (see docs/tracing.md): spans the handler
// starts from ctx, and requests it propagates ctx to, join the message's
// trace.
type Handler func(ctx context.Context, d *Delivery) error

// handle runs one delivery (called by the dispatcher's workers, under a
// context that ends at the handler timeout: see poller.HandleFunc), whose
// start its partition loop wrote already (see store.StartMany): a
// message deleted, replaced or rescheduled before that never comes here.
// An occurrence of a schedule first writes the schedule's next one, and
// is acked without its handler when it is stale or skipped (see
// Client.occurrence). A message returned here unstarted (a pause, the
// delivery limit) goes back to scheduled with its start undone.
func (k *Consumer) handle(ctx context.Context, m *poller.Msg) (started bool, err error) {
	if k.ctrl.pausedAt(k.c.opts.Now()) {
		// Dequeued as the topic's pause began: not started, back to
		// scheduled at its due, no attempt spent (see Admin.Pause).
		return false, nil
	}
	if strings.HasPrefix(m.ID, ScheduleIDPrefix) {
		run, err := k.c.occurrence(ctx, k.opts.Topic, m.ID, m.Attempt())
		if err != nil {
			// Not started: back to scheduled at its due, tried again at
			// the next poll, without spending an attempt (a schedule of
			// max attempts 1 must not lose its chain to a Redis error).
			k.log.Warn("schedule step failed; the occurrence goes back to be tried again", "id", m.ID, "err", err)
			return false, nil
		}
		if !run {
			return true, nil
		}
	}
	if k.opts.Limit > 0 {
		n := k.delivered.Add(1)
		if n > int64(k.opts.Limit) {
			k.delivered.Add(-1)
			k.stop()
			return false, nil
		}
		if n == int64(k.opts.Limit) {
			defer k.stop()
		}
	} else {
		k.delivered.Add(1)
	}
	d := &Delivery{
		Topic: k.opts.Topic, ID: m.ID, Partition: m.Partition, Token: m.Token,
		Attempt: m.Attempt(), Due: m.Due, Body: m.Record.Body,
	}
	hctx, span := k.startDelivery(ctx, m)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
		k.endDelivery(span, m, err)
	}()
	err = k.h(hctx, d)
	if err != nil && errors.Is(context.Cause(ctx), poller.ErrHandlerTimeout) {
		err = fmt.Errorf("handler timed out after %v: %w", k.opts.Timeout, err)
	}
	return true, err
}
