package delayq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// AutoPartitions makes a topic's partition count follow its consumers:
// the count doubles (within Max) once the live consumers outnumber the
// partitions for GrowAfter, so that every consumer owns one, and halves
// (within Min) once they have been at most half the partitions for
// ShrinkAfter, so that idle partitions stop costing their owners' leases
// and polls, and a count doubled for a passing surge of consumers (a
// rolling deploy) comes back. A shrink never leads to a grow: after it
// each consumer still owns one partition or more. It never grows past
// the ceiling SetPartitions holds a person to (PartitionsCeiling).
// Damping: a wish must hold at every check for its time (any check that
// wants otherwise starts it again), one change runs at a time, and none
// begins until Cooldown after the last one ended; the times are the
// checking consumers' own, each bounded against the others' (a check
// adds at most a check interval and a fifth to the time a wish held, or
// to the time since the last change ended), so that one clock off by
// minutes neither begins a change at once nor holds one back. No
// leader: each consumer of the topic checks every AutoCheckEvery, and
// the first to see a wish through begins the change with one script,
// which begins at most one. A person's count wins: while the count is
// automatic, SetPartitions and CancelPartitions are refused
// (ErrAutoPartitions) and change nothing; turn it off first.
type AutoPartitions struct {
	// Min and Max bound the count: a topic below Min grows to it (to the
	// smallest multiple of its count from Min up, in one change, as far
	// as the ceiling allows), one above Max shrinks to the largest
	// divisor of its count within Max. Defaults: 1 and
	// MinPartitionsCeiling (64).
	Min int
	Max int
	// GrowAfter is how long the live consumers must outnumber the
	// partitions before the count doubles. Default DefaultAutoGrowAfter.
	GrowAfter time.Duration
	// ShrinkAfter is how long the live consumers must be at most half
	// the partitions before the count halves. Default
	// DefaultAutoShrinkAfter.
	ShrinkAfter time.Duration
	// Cooldown is the time after a change of the count ends before the
	// automatic count begins another. Default DefaultAutoCooldown.
	Cooldown time.Duration
}

// Defaults of AutoPartitions, and how often each consumer checks.
const (
	DefaultAutoGrowAfter   = 10 * time.Second
	DefaultAutoShrinkAfter = 10 * time.Minute
	DefaultAutoCooldown    = 10 * time.Second
	AutoCheckEvery         = 5 * time.Second
)

// withDefaults returns a with its zero fields set to their defaults.
func (a AutoPartitions) withDefaults() AutoPartitions {
	if a.Min == 0 {
		a.Min = 1
	}
	if a.Max == 0 {
		a.Max = max(MinPartitionsCeiling, a.Min)
	}
	if a.GrowAfter == 0 {
		a.GrowAfter = DefaultAutoGrowAfter
	}
	if a.ShrinkAfter == 0 {
		a.ShrinkAfter = DefaultAutoShrinkAfter
	}
	if a.Cooldown == 0 {
		a.Cooldown = DefaultAutoCooldown
	}
	return a
}

// Validate checks a, its defaults applied; the error wraps ErrInvalid and
// names the offending value.
func (a AutoPartitions) Validate() error {
	a = a.withDefaults()
	switch {
	case a.Min < 1 || a.Min > partition.MaxPartitions:
		return fieldErr("AutoPartitions.Min", a.Min, "is out of range: want 1 to %d", partition.MaxPartitions)
	case a.Max < a.Min || a.Max > partition.MaxPartitions:
		return fieldErr("AutoPartitions.Max", a.Max, "is out of range: want min (%d) to %d", a.Min, partition.MaxPartitions)
	case a.GrowAfter < 0 || a.ShrinkAfter < 0 || a.Cooldown < 0:
		return fmt.Errorf("%w: automatic partitions: grow after %v, shrink after %v, cooldown %v: none may be negative",
			ErrInvalid, a.GrowAfter, a.ShrinkAfter, a.Cooldown)
	}
	return nil
}

// MarshalJSON encodes a with its durations as strings ("15s").
func (a AutoPartitions) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Min         int    `json:"min"`
		Max         int    `json:"max"`
		GrowAfter   string `json:"grow_after"`
		ShrinkAfter string `json:"shrink_after"`
		Cooldown    string `json:"cooldown"`
	}{a.Min, a.Max, a.GrowAfter.String(), a.ShrinkAfter.String(), a.Cooldown.String()})
}

// String describes a, its defaults applied.
func (a AutoPartitions) String() string {
	a = a.withDefaults()
	return fmt.Sprintf("auto %d-%d, grow after %v, shrink after %v, cooldown %v", a.Min, a.Max, a.GrowAfter, a.ShrinkAfter, a.Cooldown)
}

func (a AutoPartitions) toStore() store.Auto {
	a = a.withDefaults()
	return store.Auto{Min: a.Min, Max: a.Max, GrowAfterMS: a.GrowAfter.Milliseconds(),
		ShrinkAfterMS: a.ShrinkAfter.Milliseconds(), CooldownMS: a.Cooldown.Milliseconds()}
}

func autoFromStore(a store.Auto) *AutoPartitions {
	if !a.On() {
		return nil
	}
	return &AutoPartitions{Min: a.Min, Max: a.Max, GrowAfter: time.Duration(a.GrowAfterMS) * time.Millisecond,
		ShrinkAfter: time.Duration(a.ShrinkAfterMS) * time.Millisecond, Cooldown: time.Duration(a.CooldownMS) * time.Millisecond}
}

// SetAutoPartitions turns on topic's automatic partition count with the
// settings a (zero fields take their defaults), or turns it off (a nil).
// Every consumer of the topic follows it within a second. The stored
// settings are the truth: a worker's file turns it on only on a topic
// where it was never set nor turned off (see
// TopicConfig.AutoPartitions). It fails with ErrNoTopic for a topic
// that does not exist and ErrInvalid for bad settings, and writes nothing
// then.
func (adm *Admin) SetAutoPartitions(ctx context.Context, topic string, a *AutoPartitions) error {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return err
	}
	var st store.Auto
	if a != nil {
		if err := a.Validate(); err != nil {
			return err
		}
		st = a.toStore()
	}
	_, err := c.store.SetAuto(ctx, topic, st, false)
	return err
}

// AutoPartitionsOf returns topic's automatic partition count, its
// defaults applied; nil when it is off. It fails with ErrNoTopic for a
// topic that does not exist.
func (ins *Inspector) AutoPartitionsOf(ctx context.Context, topic string) (*AutoPartitions, error) {
	c := ins.c
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	ctrl, ok, err := c.store.ReadControls(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.NoTopic(topic)
	}
	return autoFromStore(ctrl.Auto), nil
}

// AutoState is what a topic's automatic count sees and wants, as
// Partitions reports it.
type AutoState struct {
	// Settings are the automatic count's, its defaults applied.
	Settings AutoPartitions `json:"settings"`
	// Target is the count it wants (0: none), wanted at every check
	// since Since; the change begins at Due at the earliest (its
	// GrowAfter or ShrinkAfter after Since, and its Cooldown after the
	// last change ended), while the wish holds.
	Target int        `json:"target,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Due    *time.Time `json:"due,omitempty"`
	// LastChange is when the last change of the count ended.
	LastChange *time.Time `json:"last_change,omitempty"`
}

// autoState reads the state of the automatic count a of topic whose
// count is count.
func (c *Client) autoState(ctx context.Context, topic string, a *AutoPartitions, count int) (*AutoState, error) {
	st, err := c.store.ReadAutoState(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := &AutoState{Settings: *a}
	if st.Changed > 0 {
		t := time.UnixMilli(st.Changed).UTC()
		out.LastChange = &t
	}
	if st.Signal.Target > 0 && st.Signal.Count == count {
		out.Target = st.Signal.Target
		since := time.UnixMilli(st.Signal.Since).UTC()
		after := a.GrowAfter
		if out.Target < count {
			after = a.ShrinkAfter
		}
		due := since.Add(after)
		if st.Changed > 0 {
			due = maxTime(due, time.UnixMilli(st.Changed).Add(a.Cooldown).UTC())
		}
		out.Since, out.Due = &since, &due
	}
	return out, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// autoTarget is the count an automatic count a wants for a topic of
// count partitions and live consumers, and how long the wish must hold;
// 0 when it wants none. It is pure, and every count it wants is a
// multiple or a divisor of count, so that any change can run:
//
//   - above Max, the largest divisor of count within Max (one change,
//     whether count is even or odd);
//   - below Min, the smallest multiple of count from Min up, as far as
//     Max and the ceiling SetPartitions holds a person to without Force
//     (PartitionsCeiling of live) allow; where the ceiling is all that
//     stops it, the largest multiple under the ceiling, and the rest
//     once more consumers raise it; where no multiple of count lies
//     between Min and Max at all (a count of 4, min 5, max 7), the
//     largest divisor of count that has one (2, then 6);
//   - within the bounds, double while the live consumers outnumber the
//     partitions (never past Max or the ceiling), and shrink to the
//     largest divisor from Min up that still gives each consumer one
//     (half an even count) once they are at most half the count. After
//     a shrink the consumers are at most the count, so it never calls
//     for a grow back; and a count doubled for a passing surge of
//     consumers (a rolling deploy) halves again once they are back.
func autoTarget(a AutoPartitions, count, live int) (int, time.Duration) {
	hi := min(a.Max, PartitionsCeiling(live), partition.MaxPartitions)
	switch {
	case count > a.Max:
		return largestDivisor(count, 1, a.Max), a.ShrinkAfter
	case count < a.Min:
		m := (a.Min + count - 1) / count * count // the smallest multiple from Min up
		switch {
		case m <= hi:
			return m, a.GrowAfter
		case m <= a.Max: // only the ceiling stops it: as far as that
			if up := hi / count * count; up > count {
				return up, a.GrowAfter
			}
			return 0, 0
		}
		// No multiple of count between Min and Max: down to a divisor
		// with one.
		for d := count - 1; d >= 1; d-- {
			if count%d == 0 && (a.Min+d-1)/d*d <= a.Max {
				return d, a.ShrinkAfter
			}
		}
		return 0, 0
	case live > count && count*2 <= hi:
		return count * 2, a.GrowAfter
	case live*2 <= count:
		if d := largestDivisor(count, max(a.Min, live, 1), count-1); d > 0 {
			return d, a.ShrinkAfter
		}
	}
	return 0, 0
}

// largestDivisor returns the largest divisor of n from lo to hi; 0 when
// there is none.
func largestDivisor(n, lo, hi int) int {
	for d := min(hi, n); d >= lo; d-- {
		if n%d == 0 {
			return d
		}
	}
	return 0
}

// followAuto checks the topic's automatic partition count every
// AutoCheckEvery (jittered), while it is on: the live consumers against
// the count, and a change begun when a wish held long enough (see
// AutoPartitions).
func (k *Consumer) followAuto(ctx context.Context) {
	every := AutoCheckEvery
	if k.opts.autoCheck > 0 {
		every = k.opts.autoCheck
	}
	for {
		t := time.NewTimer(clock.Jitter(every))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		a := autoFromStore(k.ctrl.auto())
		if a == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		if err := k.autoCheck(rctx, *a, autoStep(every)); err != nil {
			k.c.errLog.Log("check the automatic partition count", err, "component", "consumer", "topic", k.opts.Topic)
		}
		cancel()
	}
}

// autoStep is the most one check of the automatic count adds to the
// time a wish held and to the time since the last change ended, for
// checks every every: a little more than the longest time between two
// checks of one consumer (every, jittered by 10%), so that a fleet with
// sound clocks counts real time, and one clock off by minutes adds no
// more than that per check (see store.AutoStep).
func autoStep(every time.Duration) time.Duration { return every + every/5 }

// autoCheck is one check of the automatic count a; step: see autoStep.
func (k *Consumer) autoCheck(ctx context.Context, a AutoPartitions, step time.Duration) error {
	topic := k.opts.Topic
	l, err := k.c.store.ReadLayout(ctx, topic)
	if err != nil {
		return err
	}
	live, err := k.c.liveConsumers(ctx, topic)
	if err != nil {
		return err
	}
	target, after := 0, time.Duration(0)
	if !l.Changing() {
		target, after = autoTarget(a, l.Count, live)
	}
	begun, _, err := k.c.store.AutoStep(ctx, topic, store.AutoCheck{
		Count: l.Count, Target: target, AfterMS: after.Milliseconds(), CooldownMS: a.Cooldown.Milliseconds(),
		StepMS: step.Milliseconds(), NowMS: k.c.opts.Now().UnixMilli(),
	})
	if err != nil || !begun {
		return err
	}
	k.log.Info("automatic partition count: change begun", "from", l.Count, "to", target, "live_consumers", live)
	k.c.changed(ctx, topic)
	return nil
}
