package delayq

import (
	"context"
	"fmt"
)

// Single Enqueue calls from many goroutines are coalesced, like kafka-go's
// Writer: a few flusher goroutines each take the first waiting call and
// every other call already queued (up to coalesceMax), and write them with
// one EnqueueBatch (two pipelined round trips for all their partitions).
// Calls that arrive while a batch is in flight form the next batch, so
// batches grow with load and a lone call waits for nothing.
const (
	coalesceFlushers = 2
	coalesceMax      = 512
)

type enqReq struct {
	ctx  context.Context
	m    Message
	done chan EnqueueResult
}

func (c *Client) startCoalescer() {
	c.coalesceOnce.Do(func() {
		c.enq = make(chan *enqReq, coalesceMax)
		for range coalesceFlushers {
			c.wg.Add(1)
			go c.flusher()
		}
	})
}

func (c *Client) flusher() {
	defer c.wg.Done()
	batch := make([]*enqReq, 0, coalesceMax)
	for {
		select {
		case <-c.closed:
			return
		case r := <-c.enq:
			batch = append(batch[:0], r)
		}
	gather:
		for len(batch) < coalesceMax {
			select {
			case r := <-c.enq:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		c.flush(batch)
	}
}

func (c *Client) flush(batch []*enqReq) {
	msgs := make([]Message, 0, len(batch))
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() != nil { // the caller gave up before the write: skip it
			r.done <- EnqueueResult{ID: r.m.ID, Err: r.ctx.Err()}
			continue
		}
		msgs = append(msgs, r.m)
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout+c.opts.WriteTimeout+2*c.opts.ReadTimeout)
	defer cancel()
	res, err := c.enqueueBatch(ctx, msgs)
	for i, r := range live {
		if err != nil {
			r.done <- EnqueueResult{ID: r.m.ID, Err: err}
		} else {
			r.done <- res[i]
		}
	}
}

// enqueueOne is Enqueue through the coalescer.
func (c *Client) enqueueOne(ctx context.Context, m Message) (string, error) {
	c.startCoalescer()
	r := &enqReq{ctx: ctx, m: m, done: make(chan EnqueueResult, 1)}
	select {
	case c.enq <- r:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-c.closed:
		return "", fmt.Errorf("enqueue: %w", ErrClosed)
	}
	select {
	case res := <-r.done:
		return res.ID, res.Err
	case <-c.stopped:
		select {
		case res := <-r.done:
			return res.ID, res.Err
		default:
			return "", fmt.Errorf("enqueue: %w", ErrClosed)
		}
	case <-ctx.Done():
		// The write may still happen: enqueue again with the same id and
		// treat ErrDuplicate as success.
		return "", ctx.Err()
	}
}
