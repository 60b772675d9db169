package delayq

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/delayq/delayq/internal/store"
)

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

// DeleteTopicOptions configures Client.DeleteTopic. The zero value
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
func (c *Client) TopicUsage(ctx context.Context, topic string) (*TopicUsage, error) {
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
func (c *Client) DeleteTopic(ctx context.Context, topic string, opts DeleteTopicOptions) (*TopicUsage, error) {
	u, err := c.TopicUsage(ctx, topic)
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
