package delayq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
	"github.com/robfig/cron/v3"
)

// The chain of a schedule's occurrences: each occurrence is a message of
// a derived id (ScheduleID) in the schedule's partition, and delivering
// one first writes the next (occurrence), once ever (see
// store.ChainSchedule). The definitions and their API are in schedule.go.

// ScheduleID returns the id of the occurrence at t of version version of
// schedule name, in a topic of n partitions (the count new messages go
// to): "@sched:<name>:<version>:<unix ms>:<suffix>", the suffix chosen so
// that every occurrence of the schedule lands in its partition,
// partition.For("@sched:"+name, n).
func ScheduleID(name string, version int64, t time.Time, n int) string {
	base := ScheduleIDPrefix + name + ":" + strconv.FormatInt(version, 10) + ":" + strconv.FormatInt(t.UnixMilli(), 10) + ":"
	want := schedulePartition(name, n)
	// Four characters of 32 give 2^20 variants: a miss at 4096 partitions
	// (partition.MaxPartitions) is a chance of e^-256.
	b := []byte(base + "0000")
	if !partition.Steer(b, len(base), n, want, 1<<20, func(b []byte, i int) {
		t := b[len(b)-4:]
		t[0], t[1], t[2], t[3] = crockford[i>>15], crockford[i>>10&31], crockford[i>>5&31], crockford[i&31]
	}) {
		panic(fmt.Sprintf("delayq: no occurrence id of schedule %q in partition %d of %d", name, want, n))
	}
	return string(b)
}

func schedulePartition(name string, n int) int { return partition.For(ScheduleIDPrefix+name, n) }

// ParseScheduleID splits an occurrence's id: the schedule's name and
// version and the occurrence's time. ok is false for any other id.
func ParseScheduleID(id string) (name string, version int64, at time.Time, ok bool) {
	rest, found := strings.CutPrefix(id, ScheduleIDPrefix)
	if !found {
		return "", 0, time.Time{}, false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 4 {
		return "", 0, time.Time{}, false
	}
	v, err1 := strconv.ParseInt(parts[1], 10, 64)
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || validateScheduleName(parts[0]) != nil {
		return "", 0, time.Time{}, false
	}
	return parts[0], v, time.UnixMilli(ms), true
}

// startChain writes the first occurrence of version cur of a schedule
// after the change (after from, when set), or when it is paused its
// retire mark; either removes the pending occurrence of an older version.
func (c *Client) startChain(ctx context.Context, topic, name string, cur *schedRecord, from time.Time) error {
	l, err := c.ensureTopic(ctx, topic)
	if err != nil {
		return err
	}
	p := schedulePartition(name, l.PlaceCount())
	if cur.Paused {
		floor, err := c.markFloor(ctx, topic, name, l)
		if err != nil {
			return err
		}
		mark := ScheduleIDPrefix + name + ":" + strconv.FormatInt(cur.Version, 10) + ":0:"
		_, _, err = c.store.ChainSchedule(ctx, store.TopicPartition{Topic: topic, P: p}, store.ChainStep{Name: name, Version: cur.Version, Mode: store.ChainRetire, ID: mark, Floor: floor})
		return err
	}
	cs, err := parseSpec(name, cur.Spec, cur.TZ)
	if err != nil {
		return err
	}
	// From the change's own time, which ScheduleInfo.Next counts @every
	// from too, or for a repair from now.
	at := next(cs, time.UnixMilli(cur.Updated))
	if !from.IsZero() {
		nx := cur.info(topic, name).Next(from, 1)
		if len(nx) == 0 {
			return nil
		}
		at = nx[0]
	}
	_, err = c.writeOccurrence(ctx, occurrenceWrite{topic: topic, name: name, def: cur, at: at, layout: l, now: c.opts.Now()})
	return err
}

// ensureChain restarts the chain of def, an active schedule, from its
// next occurrence after now when it is cut: no occurrence of its version
// was written (a failure between the change and its first occurrence),
// or the newest one written is gone (deleted by id). A chain that runs
// always has its newest occurrence stored: it is acked only after it
// wrote its successor.
func (c *Client) ensureChain(ctx context.Context, topic, name string, def *schedRecord) error {
	if def.Paused {
		return nil
	}
	l, err := c.ensureTopic(ctx, topic)
	if err != nil {
		return err
	}
	mark, live, err := c.scheduleMarkLive(ctx, topic, name, l)
	if err != nil {
		return err
	}
	from := c.opts.Now()
	if _, v, at, ok := ParseScheduleID(mark); ok && v >= def.Version {
		if live {
			return nil
		}
		// Its newest occurrence was deleted: the chain goes on after it
		// (the mark refuses that occurrence again).
		if at.After(from) {
			from = at
		}
	}
	c.log.Info("schedule chain restarted", "topic", topic, "schedule", name, "mark", mark)
	return c.startChain(ctx, topic, name, def, from)
}

// occurrenceWrite is an occurrence of a schedule to write (see
// writeOccurrence).
type occurrenceWrite struct {
	topic, name string
	def         *schedRecord // the definition it is of (its version)
	at          time.Time    // when it is due
	layout      store.Layout // the topic's, as read: it places the occurrence
	now         time.Time    // the record's created and updated time
}

// writeOccurrence writes the occurrence o (once ever: see
// store.ChainSchedule) and wakes its partition's owner when it is due
// soon.
func (c *Client) writeOccurrence(ctx context.Context, o occurrenceWrite) (int, error) {
	n := o.layout.PlaceCount()
	tp := store.TopicPartition{Topic: o.topic, P: schedulePartition(o.name, n)}
	id := ScheduleID(o.name, o.def.Version, o.at, n)
	rec := &store.Record{Due: o.at.UnixMilli(), Created: o.now.UnixMilli(), Updated: o.now.UnixMilli(), MaxAttempts: o.def.MaxAttempts, Body: o.def.Body}
	floor, err := c.markFloor(ctx, o.topic, o.name, o.layout)
	if err != nil {
		return 0, err
	}
	outcome, _, err := c.store.ChainSchedule(ctx, tp, store.ChainStep{
		Name: o.name, Version: o.def.Version, Mode: store.ChainOccurrence, ID: id, DueMS: o.at.UnixMilli(), Record: rec, Floor: floor,
	})
	if err != nil {
		return outcome, err
	}
	if outcome == store.ChainAdded {
		// As an enqueue does: the owner is woken when the occurrence is
		// due before it would look again.
		if o.at.Before(o.now.Add(WakeAhead)) {
			c.wakeOwners(ctx, tp)
		}
	}
	return outcome, nil
}

// occurrence runs the chain step of an occurrence a consumer of topic is
// about to deliver (before its handler, so that a slow or failing handler
// does not hold the chain back): it writes the schedule's next occurrence
// from the definition stored now, and says whether to run the handler.
// An occurrence of a version no longer stored (the schedule changed,
// was paused or deleted) is not run, and writes nothing. attempt is the
// delivery's (1 for the first). An error leaves the occurrence to be
// retried (its retry runs this again).
func (c *Client) occurrence(ctx context.Context, topic, id string, attempt int) (run bool, err error) {
	name, version, at, ok := ParseScheduleID(id)
	if !ok {
		return true, nil
	}
	def, err := c.readSchedule(ctx, topic, name)
	if err != nil {
		return false, err
	}
	if def == nil || def.Version != version || def.Paused {
		c.log.Debug("stale occurrence acked without its handler", "topic", topic, "id", id)
		return false, nil
	}
	cs, err := parseSpec(name, def.Spec, def.TZ)
	if err != nil {
		return false, err
	}
	now := c.opts.Now()
	nxt := next(cs, at)
	run = true
	// Only a first delivery judges what was missed: a retry of a failed
	// occurrence runs whenever its backoff brings it.
	if attempt == 1 && now.Sub(at) > MissedAfter && !nxt.IsZero() && !nxt.After(now) {
		run, nxt = catchUp(cs, at, now, def.Policy)
		if !run {
			c.log.Info("missed occurrence skipped", "topic", topic, "schedule", name, "at", at, "next", nxt, "policy", def.Policy)
		}
	}
	if nxt.IsZero() {
		return run, nil // the spec has no occurrence left
	}
	l, err := c.ensureTopic(ctx, topic)
	if err != nil {
		return false, err
	}
	if _, err := c.writeOccurrence(ctx, occurrenceWrite{topic: topic, name: name, def: def, at: nxt, layout: l, now: now}); err != nil {
		return false, err
	}
	return run, nil
}

// catchUpSteps bounds the occurrences catchUp walks through.
const catchUpSteps = 200_000

// catchUp decides, for the occurrence at delivered at now with later
// occurrences due already (the fleet was down), whether to run it and
// which occurrence to write next: with PolicySkip the latest due, skipping
// at; with PolicyAll the next after at, unless MaxCatchUp or more are due
// after at, then the oldest of the latest MaxCatchUp, skipping at. Past
// catchUpSteps occurrences it skips to the first after now.
func catchUp(cs cron.Schedule, at, now time.Time, policy Policy) (run bool, nxt time.Time) {
	limit := 1
	if policy == PolicyAll {
		limit = MaxCatchUp
	}
	ring := make([]time.Time, limit) // the latest due: the count-th at ring[(count-1)%limit]
	count := 0
	for t := at; ; {
		n := next(cs, t)
		if n.IsZero() || n.After(now) {
			break
		}
		if count++; count > catchUpSteps {
			return false, next(cs, now)
		}
		ring[(count-1)%limit] = n
		t = n
	}
	if count < limit {
		return true, ring[0]
	}
	return false, ring[count%limit] // the oldest of the latest limit
}

// markFloor returns, while l's change of the partition count runs, the
// schedule's mark in its partition of the old count when that is not its
// partition of the new one: the change moves it (store.MoveScan), and
// until it has, a chain step in the new place must not write what the
// old mark says was written (see store.ChainSchedule). "" otherwise.
func (c *Client) markFloor(ctx context.Context, topic, name string, l store.Layout) (string, error) {
	if !l.Changing() {
		return "", nil
	}
	old := schedulePartition(name, l.Count)
	if old == schedulePartition(name, l.Next) {
		return "", nil
	}
	return c.store.ScheduleMark(ctx, store.TopicPartition{Topic: topic, P: old}, name)
}

// scheduleMarkLive returns the schedule's mark and whether its occurrence
// still has its record (see store.ScheduleMarkLive), from its partition
// in l's placing count, or during a change from its partition of the old
// count when the mark there is the newer (not moved yet).
func (c *Client) scheduleMarkLive(ctx context.Context, topic, name string, l store.Layout) (string, bool, error) {
	mark, live, err := c.store.ScheduleMarkLive(ctx, store.TopicPartition{Topic: topic, P: schedulePartition(name, l.PlaceCount())}, name)
	if err != nil || !l.Changing() || schedulePartition(name, l.Count) == schedulePartition(name, l.Next) {
		return mark, live, err
	}
	oldMark, oldLive, err := c.store.ScheduleMarkLive(ctx, store.TopicPartition{Topic: topic, P: schedulePartition(name, l.Count)}, name)
	if err != nil {
		return "", false, err
	}
	if newerMark(oldMark, mark) {
		return oldMark, oldLive, nil
	}
	return mark, live, nil
}

// newerMark reports whether schedule mark a is newer than b: of a later
// version, or of the same version and a later occurrence.
func newerMark(a, b string) bool {
	_, av, at, aok := ParseScheduleID(a)
	_, bv, bt, bok := ParseScheduleID(b)
	switch {
	case !aok:
		return false
	case !bok:
		return true
	case av != bv:
		return av > bv
	}
	return at.After(bt)
}
