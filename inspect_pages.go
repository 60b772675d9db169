package delayq

import (
	"context"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// The reads of this file browse what a namespace holds a page at a time,
// as the web dashboard does: each is a bounded number of pipelined round
// trips of one-key commands, whatever the number of topics or messages
// (no SCAN, no read of a whole sorted set), so that browsing a topic of
// millions of messages does not block Redis. They write nothing.

// defaultListLimit is the limit of the List methods of this file when
// given none.
const defaultListLimit = 100

// listOf returns topic's layout, as the client keeps it, and limit, or
// defaultListLimit for none, for the List methods of this file.
func (c *Client) listOf(ctx context.Context, topic string, limit int) (store.Layout, int, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	l, err := c.topicLayout(ctx, topic)
	return l, limit, err
}

// maxDueBuckets bounds the intervals DueCounts counts.
const maxDueBuckets = 1000

// TopicList is a bounded list of a namespace's topics.
type TopicList struct {
	Topics []TopicInfo `json:"topics"`
	// Total is how many topics the namespace has, listed or not.
	Total int64 `json:"total"`
}

// ListTopics lists the first limit topics of the client's namespace
// (limit <= 0: 100), oldest first, with their partition counts and
// consumers, and how many topics there are in all: two round trips,
// whatever the number of topics. Like Topics, it reads the namespace's
// registry of topics, not the keyspace; a topic listed whose metadata is
// gone (deleted meanwhile) has Partitions 0. As Topic does, the client
// keeps the counts it read for the reads that follow.
func (ins *Inspector) ListTopics(ctx context.Context, limit int) (*TopicList, error) {
	c := ins.c
	if limit <= 0 {
		limit = defaultListLimit
	}
	names, total, err := c.store.TopicsRange(ctx, limit)
	if err != nil {
		return nil, err
	}
	heads, err := c.store.TopicHeads(ctx, names, c.opts.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	out := &TopicList{Topics: make([]TopicInfo, len(heads)), Total: total}
	for i, h := range heads {
		out.Topics[i] = c.summary(h)
	}
	return out, nil
}

// Topic returns topic's partition count and consumers, read now rather
// than as the client keeps them: one round trip. The client keeps the
// count it read, so that the reads that follow (Stats, ListScheduled and
// the others that go by the count the client keeps for a second) see it
// rather than an older one. It wraps ErrNoTopic when the topic does not
// exist.
func (ins *Inspector) Topic(ctx context.Context, topic string) (*TopicInfo, error) {
	c := ins.c
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	heads, err := c.store.TopicHeads(ctx, []string{topic}, c.opts.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	s := c.summary(heads[0])
	if s.Partitions < 1 {
		return nil, store.NoTopic(topic)
	}
	return &s, nil
}

// summary returns the TopicInfo of h, and keeps its layout, read now,
// as the topic's (see topicLayout): the reads that follow use it rather
// than an older one.
func (c *Client) summary(h store.TopicHead) TopicInfo {
	s := TopicInfo{Name: h.Name, Partitions: h.Layout.Count, Live: h.Live, Leaving: h.Leaving}
	if h.Layout.Changing() {
		s.Next = h.Layout.Next
	}
	if h.Layout.Count < 1 {
		c.forget(h.Name)
		return s
	}
	c.mu.Lock()
	c.topics[h.Name] = topicLayout{l: h.Layout, at: time.Now()}
	c.mu.Unlock()
	return s
}

// ConsumerInfo is a member of a topic, a consumer that joined it, as
// Consumers reports it.
type ConsumerInfo struct {
	ID string
	// Expires is when its heartbeat expires unless it beats again (each
	// beat puts it a lease ahead); past for a consumer that stopped
	// without leaving, until the topic's members are swept.
	Expires time.Time
	// Leaving: it is handing its partitions over (shutting down).
	Leaving bool
}

// TopicConsumers is who consumes a topic: its members and the leases of
// its partitions.
type TopicConsumers struct {
	Topic string
	// Members are the topic's members, expired ones included, up to the
	// limit asked: leaving ones first, then by heartbeat expiry. More
	// says the topic has more.
	Members []ConsumerInfo
	More    bool
	// LeaseTTLs holds, for each partition the topic's messages may be in
	// (those of both counts while a change runs, as in
	// TopicStats.Partitions), how long its lease has left: 0 when no
	// consumer holds it. PartitionStats.Owner names the holder.
	LeaseTTLs []time.Duration
}

// Consumers reads topic's members, up to limit of them (limit <= 0:
// 100), and what the lease of each of its partitions has left: two round
// trips. It wraps ErrNoTopic when the topic does not exist.
func (ins *Inspector) Consumers(ctx context.Context, topic string, limit int) (*TopicConsumers, error) {
	c := ins.c
	l, limit, err := c.listOf(ctx, topic, limit)
	if err != nil {
		return nil, err
	}
	members, err := c.store.Members(ctx, topic, limit+1)
	if err != nil {
		return nil, err
	}
	ttls, err := c.store.LeaseTTLs(ctx, topic, l.Span())
	if err != nil {
		return nil, err
	}
	out := &TopicConsumers{Topic: topic, LeaseTTLs: make([]time.Duration, len(ttls))}
	if len(members) > limit {
		members, out.More = members[:limit], true
	}
	for _, m := range members {
		out.Members = append(out.Members, ConsumerInfo{ID: m.ID, Expires: time.UnixMilli(m.Expires), Leaving: m.Leaving})
	}
	for p, ms := range ttls {
		out.LeaseTTLs[p] = time.Duration(max(ms, 0)) * time.Millisecond
	}
	return out, nil
}

// DueCounts is how many of a topic's scheduled messages fall due in each
// interval of a range, as Inspector.DueCounts counts them.
type DueCounts struct {
	Topic string
	From  time.Time
	Step  time.Duration
	// Overdue counts the entries due before From, still scheduled (no
	// consumer has claimed them).
	Overdue int64
	// Counts[i] counts the entries due from From + i*Step to before
	// From + (i+1)*Step.
	Counts []int64
}

// DueCounts counts topic's scheduled index entries due before from and
// in each of n intervals of step from it, to the millisecond: what falls
// due in each minute of the next hour, say. step is at least a
// millisecond and n 1 to 1000; it costs one round trip of n+1 ZCOUNTs a
// partition. A segment (see docs/architecture.md, Segments) counts once,
// at its earliest due time. It wraps ErrNoTopic when the topic does not
// exist.
func (ins *Inspector) DueCounts(ctx context.Context, topic string, from time.Time, step time.Duration, n int) (*DueCounts, error) {
	c := ins.c
	if step < time.Millisecond {
		return nil, fieldErr("DueCounts.step", step, "is under a millisecond")
	}
	if n < 1 || n > maxDueBuckets {
		return nil, fieldErr("DueCounts.n", n, "is out of range 1..%d", maxDueBuckets)
	}
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	step = step.Truncate(time.Millisecond)
	overdue, counts, err := c.store.DueCounts(ctx, topic, l.Span(), from.UnixMilli(), step.Milliseconds(), n)
	if err != nil {
		return nil, err
	}
	return &DueCounts{Topic: topic, From: time.UnixMilli(from.UnixMilli()), Step: step, Overdue: overdue, Counts: counts}, nil
}

// ScheduledCursor is a position in the due order of a topic's scheduled
// messages, where ListScheduled reads a page from: after every index
// entry due before Due (unix milliseconds), and after the first Skip[p]
// entries of partition p due at Due exactly (those of earlier pages).
// The zero value is the start.
type ScheduledCursor struct {
	Due  int64
	Skip map[int]int
}

// ScheduledEntry is a scheduled message of a page of ListScheduled.
type ScheduledEntry struct {
	ID        string
	Partition int
	// Due is the due time of its index entry (for a segment, the
	// message's own).
	Due time.Time
	// Segment: the message is stored in a segment, with the others of
	// the write that sent it (see docs/architecture.md, Segments); they
	// are listed together, at the segment's earliest due time.
	Segment bool
	// Info is the message, State StateScheduled; nil when its index
	// entry has no record (deleted meanwhile).
	Info *Info
}

// ScheduledPage is a page of a topic's scheduled messages.
type ScheduledPage struct {
	Entries []ScheduledEntry
	// Next is the cursor of the page after this one, and More says that
	// page may hold entries.
	Next ScheduledCursor
	More bool
}

// ListScheduled returns the page of topic's scheduled messages at
// cursor after: up to limit index entries (limit <= 0: 100) in due order
// (partition, then id, among equal due times), a segment being one entry
// listed as the messages it holds. It reads at most limit entries of each
// partition, then their records: two round trips. Messages move while
// pages are read: each page is a snapshot, and one rescheduled between
// two reads may be listed twice, or not at all. Skip entries of
// partitions the topic does not have are ignored. It wraps ErrNoTopic
// when the topic does not exist.
func (ins *Inspector) ListScheduled(ctx context.Context, topic string, after ScheduledCursor, limit int) (*ScheduledPage, error) {
	c := ins.c
	l, limit, err := c.listOf(ctx, topic, limit)
	if err != nil {
		return nil, err
	}
	n := l.Span()
	cur := store.ScheduledCursor{Due: max(after.Due, 0)}
	for p, k := range after.Skip {
		if p >= 0 && p < n && k > 0 {
			if cur.Skip == nil {
				cur.Skip = map[int]int{}
			}
			cur.Skip[p] = k
		}
	}
	page, next, more, err := c.store.ScheduledPage(ctx, topic, n, cur, limit)
	if err != nil {
		return nil, err
	}
	out := &ScheduledPage{Next: ScheduledCursor{Due: next.Due, Skip: next.Skip}, More: more}
	for _, e := range page {
		se := ScheduledEntry{ID: e.ID, Partition: e.P, Due: time.UnixMilli(e.Due), Segment: e.Segment}
		if e.Record != nil {
			se.Info = infoOf(topic, e.ID, e.P, e.Record)
			// As Get says it: an entry earlier than its record waits for
			// the record's due.
			due := e.Due
			if e.Record.Corrupt == nil && e.Record.Due > due {
				due = e.Record.Due
			}
			se.Info.State, se.Info.Due = StateScheduled, msTime(due)
		}
		out.Entries = append(out.Entries, se)
	}
	return out, nil
}

// DeadEntry is a dead message as ListRecentDead reports it.
type DeadEntry struct {
	ID        string
	Partition int
	DiedAt    time.Time
	// Info is the message, State StateDead; nil when its dead entry has
	// no record (purged meanwhile).
	Info *Info
}

// ListRecentDead returns the limit most recent deaths of topic's
// messages (limit <= 0: 100), latest first (partition, then id, among
// equal times): it reads at most limit entries of each partition's dead
// set, then their records, two round trips whatever the partition count.
// Unlike ListDead, it lists a dead entry whose record is gone, with a nil
// Info. It wraps ErrNoTopic when the topic does not exist.
func (ins *Inspector) ListRecentDead(ctx context.Context, topic string, limit int) ([]DeadEntry, error) {
	c := ins.c
	l, limit, err := c.listOf(ctx, topic, limit)
	if err != nil {
		return nil, err
	}
	list, err := c.store.DeadPage(ctx, topic, l.Span(), limit)
	if err != nil {
		return nil, err
	}
	out := make([]DeadEntry, 0, len(list))
	for _, d := range list {
		e := DeadEntry{ID: d.ID, Partition: d.P, DiedAt: time.UnixMilli(d.DiedAt)}
		if d.Record != nil {
			e.Info = infoOf(topic, d.ID, d.P, d.Record)
			e.Info.State, e.Info.DiedAt = StateDead, msTime(d.DiedAt)
		}
		out = append(out, e)
	}
	return out, nil
}
