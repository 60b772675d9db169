package delayq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// PartitionsInfo is a topic's partition count and the change of it that
// runs, if any.
type PartitionsInfo struct {
	Topic string `json:"topic"`
	// Count is the stored count: every message is in its partition of
	// Count, or of Next while a change runs.
	Count int `json:"partitions"`
	// Next is the count a running change goes to; 0 when none runs.
	Next int `json:"changing_to,omitempty"`
	// Since is when the running change began.
	Since *time.Time `json:"since,omitempty"`
	// Sources are the partitions the change moves messages out of (each
	// old partition when growing, those beyond Next when shrinking), and
	// Moved those of them with nothing left to move.
	Sources []int `json:"sources,omitempty"`
	Moved   []int `json:"moved,omitempty"`
	// Left is the number of messages in the sources not yet moved: an
	// upper bound on what remains to move (when growing, it counts the
	// messages that stay in their partition too).
	Left int64 `json:"left,omitempty"`
}

// Partitions returns topic's partition count and the progress of a
// change of it. It wraps ErrNoTopic when the topic does not exist.
func (c *Client) Partitions(ctx context.Context, topic string) (*PartitionsInfo, error) {
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	l, err := c.store.ReadLayout(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of topic %s: %w", topic, err)
	}
	if l.Count == 0 {
		return nil, store.NoTopic(topic)
	}
	info := &PartitionsInfo{Topic: topic, Count: l.Count}
	if !l.Changing() {
		return info, nil
	}
	since := time.UnixMilli(l.Since).UTC()
	info.Next, info.Since, info.Sources = l.Next, &since, l.Sources()
	moved, err := c.store.MovedMarks(ctx, topic, l)
	if err != nil {
		return nil, err
	}
	st, err := c.store.Stats(ctx, topic, l.Span())
	if err != nil {
		return nil, err
	}
	for _, p := range info.Sources {
		if moved[p] {
			info.Moved = append(info.Moved, p)
			continue
		}
		info.Left += st[p].Scheduled + st[p].InFlight + st[p].Dead
	}
	return info, nil
}

// SetPartitions changes topic's partition count to n, on the live topic:
// producers, consumers and lookups go on meanwhile. n must be a multiple
// or a divisor of the count, so that each message goes to a known
// partition. It returns at once, with the change started; the consumers
// of the topic move the messages, including those due far ahead, and end
// the change when none is left to move, at least half a minute after it
// began (see Partitions for its progress). Asking again for the count a
// change goes to, or for the count the topic has, changes nothing; asking
// for another count while a change runs fails with an error wrapping
// ErrChangeRunning.
func (c *Client) SetPartitions(ctx context.Context, topic string, n int) (*PartitionsInfo, error) {
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if err := partition.ValidateCount(n); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	l, err := c.store.ReadLayout(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of topic %s: %w", topic, err)
	}
	if l.Count == 0 {
		return nil, store.NoTopic(topic)
	}
	if n%l.Count != 0 && l.Count%n != 0 && !(l.Changing() && n == l.Next) {
		return nil, fmt.Errorf("%w: topic %q has %d partitions; a new count must be a multiple or a divisor of it: %s",
			ErrInvalid, topic, l.Count, allowedCounts(l.Count))
	}
	if _, err := c.store.BeginChange(ctx, topic, n, c.opts.Now().UnixMilli()); err != nil {
		return nil, err
	}
	// Consumers act at once, and this client reads the layout again.
	if err := c.store.Changed(ctx, topic); err != nil {
		c.log.Warn("signal a change", "topic", topic, "err", err)
	}
	c.forget(topic)
	return c.Partitions(ctx, topic)
}

// allowedCounts names the counts a topic of n partitions may change to.
func allowedCounts(n int) string {
	var div, mul []string
	for d := 1; d < n; d++ {
		if n%d == 0 {
			div = append(div, strconv.Itoa(d))
		}
	}
	for m := 2 * n; m <= partition.MaxPartitions && len(mul) < 4; m += n {
		mul = append(mul, strconv.Itoa(m))
	}
	out := ""
	if len(mul) > 0 {
		out = "multiples " + strings.Join(mul, ", ")
		if 5*n <= partition.MaxPartitions {
			out += fmt.Sprintf(" ... up to %d", partition.MaxPartitions/n*n)
		}
	}
	if len(div) > 0 {
		if out != "" {
			out += "; "
		}
		out += "divisors " + strings.Join(div, ", ")
	}
	return out
}
