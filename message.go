package delayq

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/partition"
	"go.opentelemetry.io/otel/trace"
)

// Message is a message to enqueue.
type Message struct {
	// Topic to deliver to. Required: [A-Za-z0-9._-]{1,100}.
	Topic string
	// ID identifies the message in its topic: 1 to 200 bytes of UTF-8
	// without control characters. Empty means generate one, in the NewID
	// format: messages written together get ids that share their first
	// 22 characters (up to 16 at a time) and a partition, the last two
	// characters chosen for that (fewer commands, no duplicate check since
	// a generated id is new, and compact storage: see keys.SegmentField).
	// An id you give is checked against every message of the topic, in
	// its own partition: about two commands per partition a write touches,
	// sent in one round trip when the message is due a minute or more
	// ahead, in two otherwise.
	ID string
	// Body is delivered as is. At most Options.MaxBodyBytes.
	Body []byte
	// At is the due time. When zero, the message is due Delay from now
	// (now when Delay is zero too). Setting both is an error.
	At time.Time
	// Delay is the time from now to the due time, when At is zero.
	Delay time.Duration
	// MaxAttempts caps deliveries of this message; 0 means the consumer's
	// ConsumerOptions.MaxAttempts.
	MaxAttempts int
	// OnDuplicate is what the enqueue does when the ID exists in the
	// topic: Reject (the default: ErrDuplicate), Replace or Debounce.
	// Each decision is one script on the message's partition, so many
	// producers sending one id at once get one answer each and one
	// message. A message whose delivery is running when it is replaced
	// or debounced is not touched: the new one is delivered after it, at
	// its own due (see docs/duplicates.md).
	OnDuplicate OnDuplicate
	// MaxWait, with Debounce, bounds the window: the message is due at
	// the latest MaxWait after the first event of its window, however
	// many events push it back. 0: no bound.
	MaxWait time.Duration
	// UniqueFor keeps the id taken after the message's delivery
	// succeeded: until UniqueFor after its ack, a send of the id is
	// refused with a *FinishedError (an ErrDuplicate), whatever its
	// OnDuplicate, and Get reports the message as done. 0: the topic's
	// default (see Admin.SetUniqueFor) for a message whose ID you give,
	// none for a generated one. Milliseconds are kept; negative or above
	// MaxUniqueFor is an error. See docs/duplicates.md.
	UniqueFor time.Duration

	// trace is the traceparent the message stores (see startSend), ""
	// outside a trace.
	trace string

	// imported carries the rest of an imported message's record (see
	// Admin.Import): nil for an enqueue.
	imported *importedFields
}

// OnDuplicate is what an enqueue does when its message's id exists in
// the topic (scheduled, running, or dead).
type OnDuplicate string

const (
	// Reject leaves the existing message as it is and fails the enqueue
	// with ErrDuplicate (the zero value).
	Reject OnDuplicate = ""
	// Replace gives the existing message the new due time, body and max
	// attempts, its attempts reset ("remind the rider 30 minutes before
	// the new pick-up time").
	Replace OnDuplicate = "replace"
	// Debounce pushes the existing message back to the new due time, but
	// never past Message.MaxWait after the first event of its window, with
	// the latest body ("send the digest 5 minutes after the last change,
	// never more than 30 minutes after the first").
	Debounce OnDuplicate = "debounce"
)

// ParseOnDuplicate reads "reject", "replace" or "debounce".
func ParseOnDuplicate(s string) (OnDuplicate, error) {
	switch p := OnDuplicate(strings.TrimSpace(s)); p {
	case "reject":
		return Reject, nil
	case Replace, Debounce, Reject:
		return p, nil
	}
	return Reject, fmt.Errorf("%w: on duplicate %q: want reject, replace or debounce", ErrInvalid, s)
}

// String returns "reject", "replace" or "debounce".
func (p OnDuplicate) String() string {
	if p == Reject {
		return "reject"
	}
	return string(p)
}

// Outcome is what an enqueue did with its message.
type Outcome string

const (
	// OutcomeCreated: the id was new; the message was written.
	OutcomeCreated Outcome = "created"
	// OutcomeReplaced: the id existed; Replace rewrote its message.
	OutcomeReplaced Outcome = "replaced"
	// OutcomeDebounced: the id existed; Debounce pushed its message back.
	OutcomeDebounced Outcome = "debounced"
	// OutcomeRejected: the id existed; the enqueue failed (ErrDuplicate).
	OutcomeRejected Outcome = "rejected"
	// OutcomeFinished: the id is a delivered message's, within its
	// uniqueness window (see Message.UniqueFor); the enqueue failed with
	// a *FinishedError, which wraps ErrDuplicate.
	OutcomeFinished Outcome = "finished"
)

// SendResult is what a send did to one message (Send, SendAsync, and each
// message of SendBatch).
type SendResult struct {
	ID  string
	Due time.Time // the due time stored (for Debounce, capped by MaxWait)
	// Outcome says what the enqueue did: created, replaced, debounced,
	// or rejected (with Err wrapping ErrDuplicate); empty with any other
	// error.
	Outcome Outcome
	Err     error // nil when accepted; wraps ErrDuplicate or ErrInvalid otherwise
}

// validateID checks a given message id.
func validateID(id string) error {
	if err := partition.ValidateID(id); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// prepare validates m and returns its id and due time. An empty id stays
// empty: place gives it one as the batch is written, when the topic's
// partition count is known.
func (c *Client) prepare(m *Message, now time.Time) (id string, due time.Time, err error) {
	id = m.ID
	if id != "" {
		if err := validateID(id); err != nil {
			return id, due, err
		}
		if strings.HasPrefix(id, ScheduleIDPrefix) {
			return id, due, fmt.Errorf("%w: message id %q begins with %q, which is reserved for the occurrences of schedules", ErrInvalid, id, ScheduleIDPrefix)
		}
	}
	if len(m.Body) > c.opts.MaxBodyBytes {
		return id, due, fmt.Errorf("%w: body of %s is %d bytes, the limit is %d", ErrInvalid, msgName(id), len(m.Body), c.opts.MaxBodyBytes)
	}
	if m.MaxAttempts < 0 {
		return id, due, fmt.Errorf("%w: MaxAttempts %d of %s is negative", ErrInvalid, m.MaxAttempts, msgName(id))
	}
	if m.UniqueFor < 0 || m.UniqueFor > MaxUniqueFor {
		return id, due, fmt.Errorf("%w: UniqueFor %v of %s: want 0 to %v", ErrInvalid, m.UniqueFor, msgName(id), MaxUniqueFor)
	}
	if err := checkPolicy(m); err != nil {
		return id, due, err
	}
	switch {
	case !m.At.IsZero() && m.Delay != 0:
		return id, due, fmt.Errorf("%w: message %s sets both At and Delay", ErrInvalid, msgName(id))
	case !m.At.IsZero():
		due = m.At
	case m.Delay < 0:
		return id, due, fmt.Errorf("%w: Delay %v of %s is negative", ErrInvalid, m.Delay, msgName(id))
	default:
		due = now.Add(m.Delay)
	}
	if due.UnixMilli() <= 0 {
		return id, due, fmt.Errorf("%w: due time %v of %s is before 1970", ErrInvalid, due, msgName(id))
	}
	return id, clock.CeilMS(due), nil
}

// checkPolicy checks m's OnDuplicate and MaxWait.
func checkPolicy(m *Message) error {
	switch m.OnDuplicate {
	case Reject, Replace, Debounce:
	default:
		return fmt.Errorf("%w: OnDuplicate %q of %s: want reject, replace or debounce", ErrInvalid, string(m.OnDuplicate), msgName(m.ID))
	}
	switch {
	case m.MaxWait < 0:
		return fmt.Errorf("%w: MaxWait %v of %s is negative", ErrInvalid, m.MaxWait, msgName(m.ID))
	case m.MaxWait > 0 && m.OnDuplicate != Debounce:
		return fmt.Errorf("%w: MaxWait %v of %s without OnDuplicate debounce: it bounds a debounce window", ErrInvalid, m.MaxWait, msgName(m.ID))
	}
	return nil
}

// msgName names a message in an error: its id quoted, or "a message with
// a generated id" before it has one.
func msgName(id string) string {
	if id == "" {
		return "a message with a generated id"
	}
	return strconv.Quote(id)
}

// Send adds one message and returns what it did: the message's id, the
// due time stored (for Debounce, capped by MaxWait) and the outcome:
// created, replaced, debounced, or rejected (with an error wrapping
// ErrDuplicate). See Message.OnDuplicate. Bad input wraps ErrInvalid.
//
// Concurrent calls are coalesced into batches (unless
// Options.DisableCoalescing): the call returns when its batch is written.
// If ctx ends first, the message may still be written; send it again
// with the same id and treat ErrDuplicate as success. (A message whose id
// was to be generated has no id to retry with: give one to messages that
// must not be sent twice.)
//
// Made under a span (see Options.TracerProvider), the send has a
// producer span, whose context the message stores: its deliveries' spans
// belong to that trace (see docs/tracing.md).
func (c *Client) Send(ctx context.Context, m Message) (SendResult, error) {
	span, tp := c.startSend(ctx, m.Topic, 1)
	m.trace = tp
	res, err := c.send1(ctx, m)
	span.end(res, err)
	return res, err
}

// send1 is Send without its span.
func (c *Client) send1(ctx context.Context, m Message) (SendResult, error) {
	if !c.opts.DisableCoalescing {
		return c.enqueueOne(ctx, m)
	}
	res, err := c.enqueueBatch(ctx, []Message{m})
	if err != nil {
		return SendResult{}, err
	}
	return res[0], res[0].Err
}

// enqueueOne is Send through the coalescer. (Recycling its requests
// through a sync.Pool measured no faster: see docs/benchmarks.md,
// Measured design choices.)
func (c *Client) enqueueOne(ctx context.Context, m Message) (SendResult, error) {
	r := &enqReq{done: make(chan SendResult, 1)}
	if err := c.prepareRequest(ctx, r, m); err != nil {
		return SendResult{ID: m.ID, Err: err}, err
	}
	if err := c.co.send(ctx, r); err != nil {
		return SendResult{}, err
	}
	select {
	case res := <-r.done:
		return res, res.Err
	case <-ctx.Done():
		// The write may still happen: enqueue again with the same id and
		// treat ErrDuplicate as success.
		return SendResult{}, ctx.Err()
	}
}

// request validates m at the call (generating an empty id, turning a Delay
// into a due time) and wraps it for the flushers.
func (c *Client) request(ctx context.Context, m Message) (*enqReq, error) {
	r := &enqReq{}
	return r, c.prepareRequest(ctx, r, m)
}

// prepareRequest prepares r for m, as request does.
func (c *Client) prepareRequest(ctx context.Context, r *enqReq, m Message) error {
	if err := validateTopic(m.Topic); err != nil {
		return err
	}
	id, due, err := c.prepare(&m, c.opts.Now())
	if err != nil {
		return err
	}
	r.ctx, r.m, r.res = ctx, m, SendResult{ID: id, Due: due}
	return nil
}

// SendBatch adds many messages, possibly of several topics, with a
// handful of pipelined commands per partition. Each message's outcome is in
// its slot of the result; the error is for failures of the whole call
// (after which some messages may have been accepted: send them again and
// treat ErrDuplicate as success).
//
// Made under a span, the batch has one producer span, whose context
// every message of the batch stores.
func (c *Client) SendBatch(ctx context.Context, msgs []Message) ([]SendResult, error) {
	select {
	case <-c.co.closed:
		return nil, fmt.Errorf("enqueue: %w", ErrClosed)
	default:
	}
	var span *sendSpan
	if trace.SpanContextFromContext(ctx).IsValid() { // before batchTopic's loop
		var tp string
		span, tp = c.startSend(ctx, batchTopic(msgs), len(msgs))
		msgs = slices.Clone(msgs) // the caller's are left as they are
		for i := range msgs {
			msgs[i].trace = tp
		}
	}
	res, err := c.enqueueBatch(ctx, msgs)
	if err == nil && len(res) == 1 {
		span.end(res[0], res[0].Err) // as Send's
	} else {
		span.endErr(err)
	}
	return res, err
}

// batchTopic is the topic of msgs, or "" when they have several.
func batchTopic(msgs []Message) string {
	if len(msgs) == 0 {
		return ""
	}
	for _, m := range msgs[1:] {
		if m.Topic != msgs[0].Topic {
			return ""
		}
	}
	return msgs[0].Topic
}

func (c *Client) enqueueBatch(ctx context.Context, msgs []Message) ([]SendResult, error) {
	now := c.opts.Now()
	ws := make([]pendingWrite, len(msgs))
	for i := range msgs {
		id, due, err := c.prepare(&msgs[i], now)
		ws[i] = pendingWrite{msg: &msgs[i], res: SendResult{ID: id, Due: due, Err: err}}
	}
	if err := c.write(ctx, now, ws); err != nil {
		return nil, err
	}
	return results(ws), nil
}

// SendAsync queues m for the client's coalescer and returns without
// waiting for the write: single calls from many goroutines travel in
// batches of up to 512 messages, at about the rate of SendBatch.
//
// done, when not nil, is called exactly once with what the write did, as
// Send returns it: the message's id, the due stored and the outcome
// (res.Err nil once it is stored, an error wrapping ErrDuplicate, or the
// write's failure, after which the message may or may not be stored:
// send it again with the same id and treat ErrDuplicate as success, from
// done itself if you like). The callbacks of one batch run in order on a
// goroutine of their own, so done may run concurrently for different
// messages. Close writes every queued message and returns after every
// callback returned.
//
// The returned error is for messages refused before queueing, and done is
// then not called: bad input (wrapping ErrInvalid), ctx ending while the
// queue was full (4096 calls; ctx bounds only that wait), or a closed
// client. A Delay is turned into a due time at the call; an empty ID is
// generated at the write (see Message.ID), and done gets it. m.Body is
// not copied: do not change it before done is called. Made under a span,
// the call has a producer span, as Send has, which ends with the write.
func (c *Client) SendAsync(ctx context.Context, m Message, done func(SendResult)) error {
	span, tp := c.startSend(ctx, m.Topic, 1)
	m.trace = tp
	r, err := c.request(context.WithoutCancel(ctx), m)
	if err != nil {
		span.endErr(err)
		return err
	}
	r.cb = func(SendResult) {}
	if done != nil {
		r.cb = done
	}
	if span != nil {
		cb := r.cb
		r.cb = func(res SendResult) {
			span.end(res, res.Err)
			cb(res)
		}
	}
	if err := c.co.send(ctx, r); err != nil {
		span.endErr(err)
		return err
	}
	return nil
}
