package delayq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
	"github.com/delayq/delayq/poller"
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
	// Since is when the running change began (or was cancelled).
	Since *time.Time `json:"since,omitempty"`
	// Cancelled: the running change is the reverse of a cancelled one,
	// from the count that change went to back to its old count, Next
	// (see CancelPartitions).
	Cancelled bool `json:"cancelled,omitempty"`
	// Sources are the partitions the change moves messages out of (each
	// old partition when growing, those beyond Next when shrinking), and
	// Moved those of them with nothing left to move.
	Sources []int `json:"sources,omitempty"`
	Moved   []int `json:"moved,omitempty"`
	// MovedMessages counts the messages the change moved so far.
	MovedMessages int64 `json:"moved_messages,omitempty"`
	// Left is the number of messages in the sources not marked moved,
	// those that stay in their partition included.
	Left int64 `json:"left,omitempty"`
	// ToMove is how many of Left have to move: exact when shrinking
	// (ToMoveExact), an estimate when growing: what the sources held
	// (there now, or moved) times the share of ids whose partition
	// changes (1 - Count/Next), less MovedMessages.
	ToMove      int64 `json:"to_move,omitempty"`
	ToMoveExact bool  `json:"to_move_exact,omitempty"`
	// SettleUntil is the earliest time the change can end, with the
	// consumers' default settle time (poller.DefaultMoveSettle after
	// Since): until then writes begun with the old layout may land.
	SettleUntil *time.Time `json:"settle_until,omitempty"`
	// Consumers counts the topic's live consumers (heartbeat current,
	// not leaving), and OwnedSources the sources not marked moved whose
	// lease one of them holds. Only the owners of the sources move
	// messages: with no consumer, the change waits for one.
	Consumers    int `json:"consumers"`
	OwnedSources int `json:"owned_sources,omitempty"`
	// Pause is the topic's pause (see Admin.Pause); Partitions sets it,
	// the Change of TopicStats leaves it to TopicStats.Pause.
	Pause PauseState `json:"pause"`
	// Auto is the topic's automatic count and what it wants (see
	// Admin.SetAutoPartitions); nil when the count is set by hand.
	// Partitions sets it, the Change of TopicStats does not.
	Auto *AutoState `json:"auto,omitempty"`
}

// MarshalJSON encodes the change's progress with its times in RFC 3339
// UTC with three-digit milliseconds (see PartitionStats.MarshalJSON).
func (p PartitionsInfo) MarshalJSON() ([]byte, error) {
	type plain PartitionsInfo
	return json.Marshal(struct {
		plain
		Since       string `json:"since,omitempty"`
		SettleUntil string `json:"settle_until,omitempty"`
	}{plain(p), wireTime(p.Since), wireTime(p.SettleUntil)})
}

// Partitions returns topic's partition count and the progress of a
// change of it. It wraps ErrNoTopic when the topic does not exist.
func (ins *Inspector) Partitions(ctx context.Context, topic string) (*PartitionsInfo, error) {
	c := ins.c
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	var st []store.PartitionStats
	if l.Changing() {
		if st, err = c.store.Stats(ctx, topic, l.Span()); err != nil {
			return nil, err
		}
	}
	info, err := c.changeInfo(ctx, topic, l, st)
	if err != nil {
		return nil, err
	}
	ctrl, _, err := c.store.ReadControls(ctx, topic)
	if err != nil {
		return nil, err
	}
	info.Pause = pauseState(ctrl, c.opts.Now())
	if a := autoFromStore(ctrl.Auto); a != nil {
		if info.Auto, err = c.autoState(ctx, topic, a, l.Count); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// changeInfo returns the PartitionsInfo of layout l of topic, from st,
// the stats of its partitions 0..l.Span()-1 (nil when no change runs).
func (c *Client) changeInfo(ctx context.Context, topic string, l store.Layout, st []store.PartitionStats) (*PartitionsInfo, error) {
	info := &PartitionsInfo{Topic: topic, Count: l.Count}
	var err error
	if info.Consumers, err = c.liveConsumers(ctx, topic); err != nil {
		return nil, err
	}
	if !l.Changing() {
		return info, nil
	}
	since := time.UnixMilli(l.Since).UTC()
	settle := since.Add(poller.DefaultMoveSettle)
	info.Next, info.Since, info.SettleUntil, info.Cancelled = l.Next, &since, &settle, l.Reversed
	pr, err := c.store.ChangeProgress(ctx, topic, l, st)
	if err != nil {
		return nil, err
	}
	info.Sources, info.Moved, info.MovedMessages = pr.Sources, pr.Marked, pr.Moved
	info.Left, info.ToMove, info.ToMoveExact, info.OwnedSources = pr.Left, pr.ToMove, pr.ToMoveExact, pr.Owned
	return info, nil
}

// liveConsumers counts topic's members whose heartbeat is current and
// that are not leaving.
func (c *Client) liveConsumers(ctx context.Context, topic string) (int, error) {
	return c.store.LiveMembers(ctx, topic, c.opts.Now().UnixMilli())
}

// Partition count ceiling: SetPartitions refuses to grow a topic past
// max(MinPartitionsCeiling, PartitionsPerConsumer x live consumers)
// partitions unless PartitionsOptions.Force. Each partition costs its
// owner a lease kept alive and a loop that polls, idle or not, and Redis
// the commands of both (measured in docs/architecture.md, "The cost of a
// partition"); past 32 partitions a consumer gains no parallelism (16
// handlers by default) and only adds idle load.
const (
	MinPartitionsCeiling  = 64
	PartitionsPerConsumer = 32
)

// PartitionsCeiling is the largest count SetPartitions grows a topic with
// consumers live consumers to without PartitionsOptions.Force.
func PartitionsCeiling(consumers int) int {
	return max(MinPartitionsCeiling, PartitionsPerConsumer*consumers)
}

// PartitionsOptions are the options of SetPartitions. The zero value is
// the default.
type PartitionsOptions struct {
	// Force grows the count past PartitionsCeiling of the topic's live
	// consumers. Default false: such a count fails with an error
	// wrapping ErrTooManyPartitions.
	Force bool
}

// SetPartitions changes topic's partition count to n, on the live topic:
// producers, consumers and lookups go on meanwhile. n must be a multiple
// or a divisor of the count, so that each message goes to a known
// partition, and at most PartitionsCeiling of the topic's live consumers
// unless opts.Force (ErrTooManyPartitions). It returns at once, with the
// change started; the consumers of the topic move the messages, including
// those due far ahead, and end the change when none is left to move, at
// least half a minute after it began (see Partitions for its progress).
// Asking again for the count a change goes to, or for the count the topic
// has, changes nothing; asking, while a change runs, for the count it
// started from cancels it (see CancelPartitions); asking for another
// count while a change runs fails with an error wrapping
// ErrChangeRunning. While the topic's count is automatic (see
// SetAutoPartitions) it fails with an error wrapping ErrAutoPartitions
// and changes nothing: a person's count wins over the automation, which
// would otherwise undo it within minutes, so the automation is turned
// off first, by the person (SetAutoPartitions with nil).
func (adm *Admin) SetPartitions(ctx context.Context, topic string, n int, opts PartitionsOptions) (*PartitionsInfo, error) {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if err := partition.ValidateCount(n); err != nil {
		return nil, fieldErr("SetPartitions.n", n, "is out of range 1..%d", partition.MaxPartitions)
	}
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := c.refuseAuto(ctx, topic, l); err != nil {
		return nil, err
	}
	if l.Changing() && n == l.Count {
		return c.cancel(ctx, topic, l)
	}
	if n%l.Count != 0 && l.Count%n != 0 && !(l.Changing() && n == l.Next) {
		return nil, fieldErr("SetPartitions.n", n, "is not a multiple or a divisor of topic %q's %d partitions: %s",
			topic, l.Count, allowedCounts(l.Count))
	}
	if n > l.Count && !(l.Changing() && n == l.Next) && !opts.Force {
		live, err := c.liveConsumers(ctx, topic)
		if err != nil {
			return nil, err
		}
		if ceil := PartitionsCeiling(live); n > ceil {
			return nil, fmt.Errorf("%w: %d partitions for topic %q is past the ceiling of %d for %s (max(%d, %d per consumer)): "+
				"each partition costs its owner a lease and a polling loop, about %s when idle; run more consumers first, or force it",
				ErrTooManyPartitions, n, topic, ceil, plural(int64(live), "live consumer"), MinPartitionsCeiling, PartitionsPerConsumer, partitionCost)
		}
	}
	if _, err := c.store.BeginChange(ctx, topic, n, c.opts.Now().UnixMilli()); err != nil {
		if l.Reversed && errors.Is(err, ErrChangeRunning) {
			// --cancel does nothing on a cancelled change: say what does.
			return nil, fmt.Errorf("%w: topic %q is moving back from %d to %d partitions (a cancelled change); wait for it to end (delayq partitions --topic %s --wait), or go to %d again (--set %d)",
				ErrChangeRunning, topic, l.Count, l.Next, topic, l.Count, l.Count)
		}
		return nil, err
	}
	c.changed(ctx, topic)
	return c.Inspector().Partitions(ctx, topic)
}

// partitionCost is the measured cost of an idle partition to the
// consumer that owns it (docs/partitions.md).
const partitionCost = "75 KB of memory, 0.004% of a CPU and 0.9 Redis commands a second"

// CancelPartitions cancels the change of topic's partition count that
// runs: it becomes its reverse, a change from the count it went to back
// to the count it started from, which the consumers run like any change
// (see PartitionsInfo.Cancelled). No message is lost: one moved already
// is found in its new partition until it is moved back, one written to
// the new count meanwhile is moved too. Cancelling a change cancelled
// already changes nothing. It fails with an error wrapping ErrNoChange
// when no change runs, and with one wrapping ErrAutoPartitions, changing
// nothing, while the topic's count is automatic (see SetPartitions): the
// automation would begin its change again once the reverse ended.
func (adm *Admin) CancelPartitions(ctx context.Context, topic string) (*PartitionsInfo, error) {
	c := adm.c
	l, err := c.readTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := c.refuseAuto(ctx, topic, l); err != nil {
		return nil, err
	}
	if !l.Changing() {
		return nil, fmt.Errorf("%w: topic %q has %d partitions, and no change of them to cancel", ErrNoChange, topic, l.Count)
	}
	if l.Reversed {
		return c.Inspector().Partitions(ctx, topic)
	}
	return c.cancel(ctx, topic, l)
}

// refuseAuto returns the error of a change or cancel by hand of topic,
// whose layout is l, when its count is automatic (see store.AutoOn). It
// is read first so that the refusal comes before any other complaint
// about the count; the scripts that begin and cancel a change refuse it
// too, so that a count turned automatic meanwhile is not changed.
func (c *Client) refuseAuto(ctx context.Context, topic string, l store.Layout) error {
	ctrl, _, err := c.store.ReadControls(ctx, topic)
	if err != nil {
		return err
	}
	if ctrl.Auto.On() {
		return store.AutoOn(topic, l)
	}
	return nil
}

// cancel reverses the change l runs.
func (c *Client) cancel(ctx context.Context, topic string, l store.Layout) (*PartitionsInfo, error) {
	after, err := c.store.CancelChange(ctx, topic, l, c.opts.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	if !after.Changing() {
		return nil, fmt.Errorf("%w: the change of topic %q from %d to %d partitions ended before it could be cancelled (it has %d now)",
			ErrNoChange, topic, l.Count, l.Next, after.Count)
	}
	c.changed(ctx, topic)
	return c.Inspector().Partitions(ctx, topic)
}

// changed makes the consumers and this client read topic's layout again
// at once.
func (c *Client) changed(ctx context.Context, topic string) {
	if err := c.store.Changed(ctx, topic); err != nil {
		c.log.Warn("signal a change", "topic", topic, "err", err)
	}
	c.forget(topic)
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
