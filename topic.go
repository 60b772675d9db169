package delayq

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// validateTopic checks a topic's name. The rules for names and ids live
// in package partition, beside the hash they feed: a client, the worker's
// configuration and the command line all check them there.
func validateTopic(topic string) error {
	if err := partition.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// layoutTTL is how long a client uses a topic's layout before it reads
// it again (at its next use). A change of the partition count waits
// longer than that before it moves messages (see moveDelay), so that
// every client writes to and looks in the partitions of both counts by
// then.
const layoutTTL = time.Second

// topicLayout is a topic's layout as read at some time.
type topicLayout struct {
	l  store.Layout
	at time.Time
}

// ensureTopic checks the topic's name, records the topic on its first
// use (with Options.Partitions) and returns its layout, read again when
// older than layoutTTL. Only writes that put messages in the topic (or
// a schedule that will) call it: the others call topicLayout.
func (c *Client) ensureTopic(ctx context.Context, topic string) (store.Layout, error) {
	return c.ensureTopicAs(ctx, topic, c.opts.Partitions, c.partitionsSet)
}

// ensureTopicAs is ensureTopic with n as the count of a topic it creates;
// set says n was configured, so that a topic stored with another count is
// worth a warning (once per client, topic and configured count).
func (c *Client) ensureTopicAs(ctx context.Context, topic string, n int, set bool) (store.Layout, error) {
	if err := validateTopic(topic); err != nil {
		return store.Layout{}, err
	}
	now := time.Now()
	t, known, fresh := c.cached(topic, now)
	if fresh && !set {
		return t.l, nil
	}
	if !fresh {
		var err error
		var l store.Layout
		if known {
			l, err = c.store.ReadLayout(ctx, topic)
		} else {
			l, err = c.store.EnsureTopic(ctx, topic, n, c.opts.Now().UnixMilli())
		}
		if err == nil && l.Count < 1 {
			// Deleted since this client read it: created again.
			l, err = c.store.EnsureTopic(ctx, topic, n, c.opts.Now().UnixMilli())
		}
		if err != nil {
			return store.Layout{}, err
		}
		t = topicLayout{l: l, at: now}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topics[topic] = t
	if set {
		c.warnCount(topic, t.l.Count, n)
	}
	return t.l, nil
}

// warnCount logs, once per client, topic and configured count n, that
// the topic's stored count differs from n. c.mu is held.
func (c *Client) warnCount(topic string, stored, n int) {
	key := topic + "\x00" + strconv.Itoa(n)
	if stored != n && !c.warned[key] {
		c.warned[key] = true
		c.log.Warn("topic has another partition count than configured: using the stored count",
			"topic", topic, "stored", stored, "configured", n)
	}
}

// topicLayout checks the topic's name and returns its layout, read again
// when older than layoutTTL, as ensureTopic does, but never creates the
// topic: for one that does not exist it fails with an error wrapping
// ErrNoTopic and writes nothing. Reads, deletes and reschedules call it.
func (c *Client) topicLayout(ctx context.Context, topic string) (store.Layout, error) {
	if err := validateTopic(topic); err != nil {
		return store.Layout{}, err
	}
	now := time.Now()
	if t, _, fresh := c.cached(topic, now); fresh {
		return t.l, nil
	}
	l, err := c.store.ReadLayout(ctx, topic)
	if err != nil {
		return store.Layout{}, err
	}
	if l.Count < 1 {
		c.forget(topic)
		return store.Layout{}, store.NoTopic(topic)
	}
	c.mu.Lock()
	c.topics[topic] = topicLayout{l: l, at: now}
	if c.partitionsSet {
		c.warnCount(topic, l.Count, c.opts.Partitions)
	}
	c.mu.Unlock()
	return l, nil
}

// cached returns the layout of topic this client keeps, whether it keeps
// one, and whether that one is younger than layoutTTL at now.
func (c *Client) cached(topic string, now time.Time) (t topicLayout, known, fresh bool) {
	c.mu.Lock()
	t, known = c.topics[topic]
	c.mu.Unlock()
	return t, known, known && now.Sub(t.at) < layoutTTL
}

// forget drops the layout of topic this client keeps, so that its next
// use reads the topic again.
func (c *Client) forget(topic string) {
	c.mu.Lock()
	delete(c.topics, topic)
	c.mu.Unlock()
}

// readTopic reads topic's layout now, not as cached, and wraps ErrNoTopic
// when the topic does not exist.
func (c *Client) readTopic(ctx context.Context, topic string) (store.Layout, error) {
	if err := validateTopic(topic); err != nil {
		return store.Layout{}, err
	}
	l, err := c.store.ReadLayout(ctx, topic)
	if err != nil {
		return store.Layout{}, err
	}
	if l.Count < 1 {
		return store.Layout{}, store.NoTopic(topic)
	}
	return l, nil
}

// maxMembersRead bounds the consumers DeleteTopic reads from a topic's
// members.
const maxMembersRead = 1000

// TopicUsage is what a topic holds and who uses it: what DeleteTopic
// checks before it deletes the topic.
type TopicUsage struct {
	Topic string `json:"topic"`
	// Count is the topic's partition count, and ChangingTo the count a
	// running change goes to (0 when none runs).
	Count      int   `json:"partition_count"`
	ChangingTo int   `json:"changing_to,omitempty"`
	Scheduled  int64 `json:"scheduled"`
	InFlight   int64 `json:"inflight"`
	Dead       int64 `json:"dead"`
	Schedules  int64 `json:"schedules"`
	// Consumers are the ids of the consumers live on the topic: those
	// whose membership heartbeat has not expired, and the owners of its
	// partitions' leases.
	Consumers []string `json:"consumers,omitempty"`
}

// Empty reports whether the topic holds no message and no schedule.
func (u *TopicUsage) Empty() bool {
	return u.Scheduled+u.InFlight+u.Dead+u.Schedules == 0
}

// inUse says why the topic may not be deleted without force: what it
// holds, who consumes it, the change that runs. "" when nothing does.
func (u *TopicUsage) inUse() string {
	var why []string
	if !u.Empty() {
		why = append(why, fmt.Sprintf("it holds %s (%d scheduled, %d in flight, %d dead) and %s",
			plural(u.Scheduled+u.InFlight+u.Dead, "message"), u.Scheduled, u.InFlight, u.Dead, plural(u.Schedules, "schedule")))
	}
	if len(u.Consumers) > 0 {
		them := "them"
		if len(u.Consumers) == 1 {
			them = "it"
		}
		why = append(why, fmt.Sprintf("%s live on it (%s): stop %s first",
			plural(int64(len(u.Consumers)), "consumer is"), strings.Join(u.Consumers, ", "), them))
	}
	if u.ChangingTo > 0 {
		why = append(why, fmt.Sprintf("a change of its partition count from %d to %d runs", u.Count, u.ChangingTo))
	}
	return strings.Join(why, "; ")
}

// plural formats n and noun, the noun's first word in the plural unless
// n is 1 ("consumer is" becomes "consumers are").
func plural(n int64, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	switch {
	case strings.HasSuffix(noun, " is"):
		noun = strings.TrimSuffix(noun, " is") + "s are"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// DeleteTopicOptions configures Admin.DeleteTopic. The zero value
// deletes only a topic nothing uses.
type DeleteTopicOptions struct {
	// Force deletes the topic whatever it holds and whoever uses it: its
	// messages (scheduled, in flight or dead) and schedules are deleted
	// with it. Consumers of the topic should be stopped first: one still
	// running fails (the topic does not exist) until it is stopped, and a
	// consumer or producer started on the topic creates it again, empty.
	// Default false: a topic that holds messages or schedules, that a
	// consumer is live on, or whose partition count is being changed, is
	// not deleted (ErrTopicInUse).
	Force bool
}

// TopicUsage reads what topic holds and who uses it. It wraps ErrNoTopic
// when the topic does not exist.
func (ins *Inspector) TopicUsage(ctx context.Context, topic string) (*TopicUsage, error) {
	c := ins.c
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	st, err := c.store.Stats(ctx, topic, l.Span())
	if err != nil {
		return nil, err
	}
	u := &TopicUsage{Topic: topic, Count: l.Count}
	if l.Changing() {
		u.ChangingTo = l.Next
	}
	var live []string
	for _, ps := range st {
		u.Scheduled += ps.Scheduled
		u.InFlight += ps.InFlight
		u.Dead += ps.Dead
		if ps.Owner != "" {
			live = append(live, ps.Owner)
		}
	}
	if u.Schedules, err = c.store.ScheduleCount(ctx, topic); err != nil {
		return nil, err
	}
	members, err := c.store.Members(ctx, topic, maxMembersRead)
	if err != nil {
		return nil, err
	}
	now := c.opts.Now().UnixMilli()
	for _, m := range members {
		if m.Expires >= now { // leaving ones too: they still hand over
			live = append(live, m.ID)
		}
	}
	slices.Sort(live)
	u.Consumers = slices.Compact(live)
	return u, nil
}

// DeleteTopic deletes topic: every key of its partitions, its schedules,
// its members, its metadata and its entry among the topics. It refuses,
// with an error wrapping ErrTopicInUse that says why, a topic that holds
// messages or schedules, that a consumer is live on, or whose partition
// count is being changed, unless opts.Force (see DeleteTopicOptions). It
// returns what the topic held when it was deleted, or when it refuses,
// and wraps ErrNoTopic when the topic does not exist.
//
// Producers and consumers of the topic should be stopped first: a
// message sent while the topic is deleted may be deleted with it, and a
// later write to the topic creates it again. A delete cut short (an
// error) can be run again.
func (adm *Admin) DeleteTopic(ctx context.Context, topic string, opts DeleteTopicOptions) (*TopicUsage, error) {
	c := adm.c
	u, err := c.Inspector().TopicUsage(ctx, topic)
	if err != nil {
		return nil, err
	}
	if why := u.inUse(); why != "" && !opts.Force {
		return u, fmt.Errorf("%w: topic %q: %s", ErrTopicInUse, topic, why)
	}
	err = c.store.DropTopic(ctx, topic)
	c.forget(topic)
	if err != nil {
		return u, err
	}
	c.log.Info("topic deleted", "topic", topic, "scheduled", u.Scheduled, "inflight", u.InFlight,
		"dead", u.Dead, "schedules", u.Schedules, "consumers", u.Consumers)
	return u, nil
}
