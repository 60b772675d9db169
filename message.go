package delayq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
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
	// its own due (see the README's "Sending an id again").
	OnDuplicate OnDuplicate
	// MaxWait, with Debounce, bounds the window: the message is due at
	// the latest MaxWait after the first event of its window, however
	// many events push it back. 0: no bound.
	MaxWait time.Duration

	// trace is the traceparent the message stores (see startSend), ""
	// outside a trace.
	trace string

	// putOld is 1 + the old partition of the id during a change of the
	// partition count, when the id was found there (see writePuts).
	putOld int

	// imported carries the rest of an imported message's record (see
	// Client.Import): nil for an enqueue.
	imported *importedFields
}

// maxPipeline bounds the records one EnqueueBatch round trip carries.
const maxPipeline = 1024

// EnqueueResult is the outcome of one message of EnqueueBatch.
type EnqueueResult struct {
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

// msgName names a message in an error: its id quoted, or "a message with
// a generated id" before it has one.
func msgName(id string) string {
	if id == "" {
		return "a message with a generated id"
	}
	return strconv.Quote(id)
}

// Enqueue adds one message and returns its id. It wraps ErrDuplicate when
// the id is already queued in the topic and ErrInvalid for bad input.
//
// Concurrent calls are coalesced into batches (unless
// Options.DisableCoalescing): the call returns when its batch is written.
// If ctx ends first, the message may still be written; enqueue it again
// with the same id and treat ErrDuplicate as success. (A message whose id
// was to be generated has no id to retry with: give one to messages that
// must not be enqueued twice.)
func (c *Client) Enqueue(ctx context.Context, m Message) (string, error) {
	res, err := c.Send(ctx, m)
	return res.ID, err
}

// Send enqueues m as Enqueue does, and returns what it did: the message's
// id, the due time stored (for Debounce, capped by MaxWait) and the
// outcome: created, replaced, debounced, or rejected (with an error
// wrapping ErrDuplicate). See Message.OnDuplicate.
//
// Made under a span (see Options.TracerProvider), the send has a
// producer span, whose context the message stores: its deliveries' spans
// belong to that trace (see the README's "Tracing").
func (c *Client) Send(ctx context.Context, m Message) (EnqueueResult, error) {
	span, tp := c.startSend(ctx, m.Topic, 1)
	m.trace = tp
	res, err := c.send1(ctx, m)
	span.end(res, err)
	return res, err
}

// send1 is Send without its span.
func (c *Client) send1(ctx context.Context, m Message) (EnqueueResult, error) {
	if !c.opts.DisableCoalescing {
		return c.enqueueOne(ctx, m)
	}
	res, err := c.enqueueBatch(ctx, []Message{m})
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], res[0].Err
}

// EnqueueBatch adds many messages, possibly of several topics, with a
// handful of pipelined commands per partition. Each message's outcome is in
// its slot of the result; the error is for failures of the whole call
// (after which some messages may have been accepted: enqueue them again and
// treat ErrDuplicate as success).
//
// Made under a span, the batch has one producer span, whose context
// every message of the batch stores.
func (c *Client) EnqueueBatch(ctx context.Context, msgs []Message) ([]EnqueueResult, error) {
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

func (c *Client) enqueueBatch(ctx context.Context, msgs []Message) ([]EnqueueResult, error) {
	now := c.opts.Now()
	res := make([]EnqueueResult, len(msgs))
	parts := make([]int, len(msgs))
	for i := range msgs {
		id, due, err := c.prepare(&msgs[i], now)
		res[i] = EnqueueResult{ID: id, Due: due, Err: err}
	}
	if err := c.write(ctx, now, msgs, parts, res); err != nil {
		return nil, err
	}
	return res, nil
}

// write stores the prepared messages: msgs[i] with its id and due time in
// res[i], unless res[i].Err is set already; parts is scratch space, one
// slot per message. It sets each message's outcome in res[i].Err; the
// error is for a failure of the whole write.
func (c *Client) write(ctx context.Context, now time.Time, msgs []Message, parts []int, res []EnqueueResult) error {
	ctx = c.retrying(ctx)
	if err := c.place(ctx, now, msgs, parts, res); err != nil {
		return err
	}
	// The messages to write, in groups of one topic, partition and
	// freshness, each group in the callers' order (a stable sort: after
	// steering, the usual batch is one group already).
	kind := make([]writeKind, len(msgs))
	idx := make([]int, 0, len(msgs))
	var puts []int
	for i := range msgs {
		if res[i].Err != nil {
			continue
		}
		if isPut(&msgs[i]) {
			puts = append(puts, i)
			continue
		}
		switch ahead := res[i].Due.Sub(now) >= freshAhead; {
		case msgs[i].imported != nil && msgs[i].imported.dead:
			kind[i] = writeDead
		case ahead && msgs[i].ID == "":
			kind[i] = writeFresh // a generated id is new to the topic: no duplicate check
		case ahead:
			kind[i] = writeAhead
		default:
			kind[i] = writeChecked
		}
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if d := strings.Compare(msgs[a].Topic, msgs[b].Topic); d != 0 {
			return d
		}
		if d := cmp.Compare(parts[a], parts[b]); d != 0 {
			return d
		}
		return cmp.Compare(kind[a], kind[b])
	})
	var groups []store.Group
	var members [][]int // the indexes of each group's messages
	for lo := 0; lo < len(idx); {
		first := idx[lo]
		hi := lo + 1
		for hi < len(idx) && msgs[idx[hi]].Topic == msgs[first].Topic && parts[idx[hi]] == parts[first] && kind[idx[hi]] == kind[first] {
			hi++
		}
		group := idx[lo:hi]
		lo = hi
		topic := msgs[first].Topic
		if kind[first] != writeFresh && len(group) > 1 {
			group = firstOfEach(group, msgs, res)
		}
		news := make([]store.NewMessage, len(group))
		recs := make([]store.Record, len(group)) // one allocation for the group
		for j, i := range group {
			recs[j] = store.Record{
				Due: res[i].Due.UnixMilli(), Created: now.UnixMilli(), Updated: now.UnixMilli(),
				MaxAttempts: msgs[i].MaxAttempts, Trace: msgs[i].trace, Body: msgs[i].Body,
			}
			news[j] = store.NewMessage{ID: res[i].ID, Record: &recs[j]}
			if imp := msgs[i].imported; imp != nil {
				imp.fill(&recs[j])
				news[j].DiedAt = imp.diedAt
			}
		}
		groups = append(groups, store.Group{
			Topic: topic, P: parts[first], Msgs: news,
			Fresh: kind[first] == writeFresh, Ahead: kind[first] == writeAhead, Dead: kind[first] == writeDead,
		})
		members = append(members, group)
	}
	// At most maxPipeline records per round trip.
	for lo := 0; lo < len(groups); {
		hi, n := lo, 0
		for hi < len(groups) && (hi == lo || n+len(groups[hi].Msgs) <= maxPipeline) {
			n += len(groups[hi].Msgs)
			hi++
		}
		errs, err := c.store.AddMany(ctx, groups[lo:hi])
		if err != nil {
			return fmt.Errorf("enqueue %d messages: %w", n, err)
		}
		for gi := lo; gi < hi; gi++ {
			for j, i := range members[gi] {
				res[i].Err = errs[gi-lo][j]
			}
		}
		lo = hi
	}
	if len(puts) > 0 {
		if err := c.writePuts(ctx, now, msgs, parts, res, puts); err != nil {
			return err
		}
		// The owners to wake: one group per partition of the sends.
		slices.SortStableFunc(puts, func(a, b int) int {
			return cmp.Or(strings.Compare(msgs[a].Topic, msgs[b].Topic), cmp.Compare(parts[a], parts[b]))
		})
		for lo := 0; lo < len(puts); {
			hi := lo + 1
			for hi < len(puts) && msgs[puts[hi]].Topic == msgs[puts[lo]].Topic && parts[puts[hi]] == parts[puts[lo]] {
				hi++
			}
			groups = append(groups, store.Group{Topic: msgs[puts[lo]].Topic, P: parts[puts[lo]]})
			members = append(members, puts[lo:hi])
			lo = hi
		}
	}
	for i := range res {
		if res[i].Outcome == "" {
			res[i].Outcome = outcomeOf(res[i].Err)
		}
	}
	c.wake(ctx, now, groups, members, res)
	return nil
}

// outcomeOf is the outcome of a message written without a policy (see
// Message.OnDuplicate), whose write ended with err: created, rejected as
// a duplicate, or none.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeCreated
	case errors.Is(err, ErrDuplicate):
		return OutcomeRejected
	}
	return ""
}

// WakeAhead: a message due sooner than this when written may fall due
// before its partition's owner looks again (an idle partition looks every
// ConsumerOptions.IdlePollInterval, at most 5s plus 10% jitter, and then
// claims what is due within 1.5 polls), so the write wakes the owner.
const WakeAhead = 7 * time.Second

// wake tells the owners of the partitions that got a message due within
// WakeAhead to poll now (see store.Wake): one command for the write,
// after its messages are written. A wake-up that is lost (the command
// fails, or the process dies before it) delays those messages by at most
// the owner's idle poll interval: it is only logged.
func (c *Client) wake(ctx context.Context, now time.Time, groups []store.Group, members [][]int, res []EnqueueResult) {
	var ps []store.TopicPartition
	soon := now.Add(WakeAhead)
	for gi, g := range groups {
		if g.Dead {
			continue // never delivered: no owner to wake
		}
		tp := store.TopicPartition{Topic: g.Topic, P: g.P}
		if len(ps) > 0 && ps[len(ps)-1] == tp {
			continue // groups of one partition are next to one another
		}
		for _, i := range members[gi] {
			if res[i].Err == nil && res[i].Due.Before(soon) {
				ps = append(ps, tp)
				break
			}
		}
	}
	c.wakeOwners(ctx, ps...)
}

// wakeOwners wakes the owners of partitions ps (see store.Wake). A lost
// wake-up only delays messages (see wake): it is logged at debug level.
func (c *Client) wakeOwners(ctx context.Context, ps ...store.TopicPartition) {
	if len(ps) == 0 {
		return
	}
	if err := c.store.Wake(ctx, ps); err != nil {
		c.log.Debug("wake the owners of partitions", "partitions", len(ps), "err", err)
	}
}

// firstOfEach returns the messages of group (indexes into msgs, in the
// callers' order) without those whose given id came earlier in it, whose
// result it sets to ErrDuplicate. Ids repeat only within a group: an id
// fixes its partition.
func firstOfEach(group []int, msgs []Message, res []EnqueueResult) []int {
	seen := make(map[string]bool, len(group))
	kept := group[:0]
	for _, i := range group {
		if id := msgs[i].ID; id != "" { // a generated id is unique: only given ones can repeat
			if seen[id] {
				res[i].Err = fmt.Errorf("%w: %q twice in one batch", ErrDuplicate, id)
				continue
			}
			seen[id] = true
		}
		kept = append(kept, i)
	}
	return kept
}

// Generated ids are steered into shared partitions, steerChunk messages
// at a time, like Kafka's sticky partitioner: the messages of a batch (or
// of concurrent single calls) then travel in a command or two instead of
// one or two per partition. Ids given by the caller keep their partition.
// Beyond maxSteerPartitions most ids would need more than the 1024 variants
// steerBytes tries, and ids are not steered.
const (
	steerChunk         = 512
	maxSteerPartitions = 256
	steerTries         = 4
)

// writeKind is how a message is written (see store.Group).
type writeKind int

const (
	writeFresh   writeKind = iota // generated id, due freshAhead or later: no duplicate check
	writeAhead                    // given id, due freshAhead or later: check and index in one round trip
	writeChecked                  // due sooner: check, then index
	writeDead                     // an imported dead message: check, then index as dead
)

// freshAhead is how far ahead a message must be due for its record and
// index entry to be written in one round trip (store.Group.Fresh and
// Ahead): farther than consumers claim ahead (1.5 poll intervals).
const freshAhead = time.Minute

// segmentMax is the most generated ids given one prefix, and so stored
// as one segment when due far enough ahead (see keys.SegmentField). Reading,
// deleting or rescheduling a message of a segment reads the whole segment
// (deleting and rescheduling rewrite it), so this bounds their cost;
// beyond 16 the memory saved per message is a few bytes.
const segmentMax = 16

// place records each message's topic on its first use and gives each
// message its partition (in parts[i]) in its topic's stored layout, and
// an id to each whose id is generated (in res[i].ID): steered while the
// count is at most maxSteerPartitions. During a change of the count, new
// messages go to their partition in the new count, and a given id is
// checked against the message of that id in its old partition too. A
// topic that cannot be read fails its messages (in res[i].Err), or the
// whole write when ctx ended.
func (c *Client) place(ctx context.Context, now time.Time, msgs []Message, parts []int, res []EnqueueResult) error {
	type topicRead struct {
		topic string
		l     store.Layout
		err   error
	}
	var seen []topicRead // a write has a topic or a few: a list beats a map
	layout := func(topic string) (store.Layout, error) {
		for _, t := range seen {
			if t.topic == topic {
				return t.l, t.err
			}
		}
		l, err := c.ensureTopic(ctx, topic)
		seen = append(seen, topicRead{topic, l, err})
		return l, err
	}
	var lookups []store.Lookup // given ids to look for in their old partition
	var lookedUp [][]int       // the messages of each lookup's ids
	var st steerer
	for i := range msgs {
		parts[i] = -1
		if res[i].Err != nil {
			continue
		}
		l, err := layout(msgs[i].Topic)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			res[i].Err = err
			continue
		}
		switch id, n := msgs[i].ID, l.PlaceCount(); {
		case id != "":
			parts[i] = l.Place(id)
			if old := l.Old(id); old != parts[i] {
				tp := store.TopicPartition{Topic: msgs[i].Topic, P: old}
				j := slices.IndexFunc(lookups, func(lk store.Lookup) bool { return lk.TopicPartition == tp })
				if j < 0 {
					j = len(lookups)
					lookups, lookedUp = append(lookups, store.Lookup{TopicPartition: tp}), append(lookedUp, nil)
				}
				lookups[j].IDs, lookedUp[j] = append(lookups[j].IDs, id), append(lookedUp[j], i)
			}
		case n <= maxSteerPartitions:
			res[i].ID, parts[i] = st.next(now, msgs[i].Topic, n)
		default:
			res[i].ID = NewID(now)
			parts[i] = partition.For(res[i].ID, n)
		}
	}
	if len(lookups) == 0 {
		return nil
	}
	// Before the write, which checks the new partition: a move writes
	// there before it removes the message from the old one.
	there, err := c.store.Exists(ctx, lookups)
	if err != nil && ctx.Err() != nil {
		return err
	}
	for j, lk := range lookups {
		for k, i := range lookedUp[j] {
			switch {
			case err != nil:
				res[i].Err = err
			case there[j][k] && isPut(&msgs[i]):
				msgs[i].putOld = lk.P + 1 // sent to the message where it lives
			case there[j][k]:
				res[i].Err = fmt.Errorf("%w: %q in topic %s", ErrDuplicate, lk.IDs[k], lk.Topic)
			}
		}
	}
	return nil
}

// steerer gives generated ids their partitions (see place): each
// steerChunk of them goes to a partition chosen at random, and up to
// segmentMax of them share a prefix, a new id's first
// store.SegmentPrefixLen characters. Each id is that prefix, two
// characters for its place among the ids sharing it, and two chosen to
// land it in the partition. When no choice of the two lands there (for
// about 2% of places with 256 partitions), the next place is tried, up to
// steerTries; a message for which all fail (about one in 10^7 at 256)
// gets an id of its own, in that id's partition. A new topic starts a new
// chunk. The zero value is ready to use.
type steerer struct {
	topic        string
	target, left int
	place        int  // the next id's place among those sharing the prefix
	started      bool // a prefix was drawn
	id           [26]byte
}

// next returns a new id of topic, a topic of n partitions, and its
// partition.
func (s *steerer) next(now time.Time, topic string, n int) (string, int) {
	if s.left == 0 || topic != s.topic {
		s.topic, s.target, s.left = topic, rand.IntN(n), steerChunk
	}
	if !s.started {
		s.place, s.started = segmentMax, true
	}
	for range steerTries {
		if s.place == segmentMax {
			copy(s.id[:], NewID(now)[:store.SegmentPrefixLen])
			s.place = 0
		}
		s.id[22], s.id[23] = crockford[s.place>>5], crockford[s.place&31]
		s.place++ // once only, steered or not: the next try is another id
		if steerBytes(&s.id, s.target, n) {
			s.left--
			return string(s.id[:]), s.target
		}
	}
	id := NewID(now)
	return id, partition.For(id, n)
}
