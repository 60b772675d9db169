package delayq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
)

// The operations of the crash matrix (see crash_test.go): how each one is
// set up, run through a dying connection, and judged.

// afterByRecord decides the outcome by the record alone: still there =>
// delivered (an enqueue that wrote it, even if never indexed; an ack or
// delete that did not remove it), gone => never delivered (index entries
// left behind are tombstones).
func afterByRecord(t *testing.T, cs *crashCase) {
	if cs.found(t) != nil {
		cs.expect = outDelivered
	} else {
		cs.expect = outGone
	}
	cs.minAt = time.UnixMilli(cs.due)
}

// afterDoneOrRecord is the outcome of an ack of a message with a
// uniqueness window: its Done => acked for good, never delivered again;
// its record => delivered again (its ack then leaves the Done); neither
// => lost.
func afterDoneOrRecord(t *testing.T, cs *crashCase) {
	switch in := cs.found(t); {
	case in == nil:
		t.Fatalf("%s: neither the record nor its Done after a crashed ack", cs.name())
	case in.State == StateDone:
		cs.expect = outGone
	default:
		cs.expect = outDelivered
	}
	cs.minAt = time.UnixMilli(cs.due)
}

// refusedAsFinished is nil for a send refused as finished (see
// FinishedError), the outcome its operation wants, and err otherwise.
func refusedAsFinished(err error) error {
	var fe *FinishedError
	if errors.As(err, &fe) {
		return nil
	}
	if err == nil {
		return errors.New("a send of a finished id within its window was accepted")
	}
	return err
}

// afterKept is the outcome of an operation that must never lose the
// message: whatever index it is in (scheduled, in flight, dead, or none
// while its record exists: the reconciler's case), it ends as out.
func afterKept(op string, out crashOutcome) func(t *testing.T, cs *crashCase) {
	return func(t *testing.T, cs *crashCase) {
		if cs.found(t) == nil {
			t.Errorf("%s: record lost by a crashed %s", cs.name(), op)
		}
		cs.expect = out
		cs.minAt = time.UnixMilli(cs.due)
	}
}

// afterRescheduled: a crashed reschedule keeps the message, scheduled at
// the old due time or, once its record has the new one, at the new.
func afterRescheduled(t *testing.T, cs *crashCase) {
	in := cs.found(t)
	if in == nil {
		t.Fatalf("%s: record lost by a crashed reschedule", cs.name())
	}
	if in.State != StateScheduled {
		t.Errorf("%s: state %s after a crashed reschedule, want scheduled", cs.name(), in.State)
	}
	cs.expect = outDelivered
	cs.minAt = time.UnixMilli(min(cs.due, cs.newDue))
	if in.Due.UnixMilli() == cs.newDue { // the record has the new due time
		cs.minAt = time.UnixMilli(cs.newDue)
		cs.note = "moved"
	}
}

// addAhead adds cs.id as an Ahead group, due at cs.due, or 300 ms after
// it when the message is in flight already (an enqueue of a duplicate).
func addAhead(ctx context.Context, cs *crashCase, fs *store.Store) error {
	due := cs.due
	if cs.rec0 != nil {
		due += 300
	}
	errs, err := fs.AddMany(ctx, []store.Group{{Topic: cs.topic, P: cs.p, Ahead: true,
		Msgs: []store.NewMessage{{ID: cs.id, Record: newRecord(time.UnixMilli(due), 0)}}}})
	if err != nil {
		return err
	}
	return errs[0][0]
}

// failed is the claimed record after a failed delivery.
func (cs *crashCase) failed() store.Record {
	r := *cs.rec0
	r.Attempts++
	r.LastError = "boom"
	r.Updated = time.Now().UnixMilli()
	return r
}

// addSoon enqueues cs.id with store.Add, due in 200 ms.
func addSoon(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
	cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
	errs, err := fs.Add(ctx, cs.tp(), []store.NewMessage{{ID: cs.id, Record: newRecord(time.UnixMilli(cs.due), 0)}})
	if err != nil {
		return err
	}
	return errs[0]
}

var crashOps = []*crashOp{
	{
		// store.Add: HSETNX, then ZADD of what was new.
		name:  "enqueue",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 200*time.Millisecond, 0, false) },
		run:   addSoon,
		after: afterByRecord,
	},
	{
		// store.AddMany of a Fresh group (generated ids): HMSET and ZADD
		// in one pipeline, either of which may land first.
		name:  "enqueue-fresh",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 200*time.Millisecond, 0, false) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
			_, err := fs.AddMany(ctx, []store.Group{{Topic: cs.topic, P: cs.p, Fresh: true,
				Msgs: []store.NewMessage{{ID: cs.id, Record: newRecord(time.UnixMilli(cs.due), 0)}}}})
			return err
		},
		after: afterByRecord,
	},
	{
		// store.AddMany of an Ahead group (an id given, due far enough
		// ahead): HSETNX and ZADD NX in one pipeline.
		name:  "enqueue-ahead",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 200*time.Millisecond, 0, false) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
			return addAhead(ctx, cs, fs)
		},
		after: afterByRecord,
	},
	{
		// An Ahead enqueue whose id has a stale index entry, due sooner
		// (left by a delete cut short): HSETNX, ZADD NX (which keeps the
		// stale entry), then ZADD of the new due. Until that last one,
		// a claim meets the stale entry and must hold the message to its
		// record's due: never early.
		name: "enqueue-ahead-stale",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 500*time.Millisecond, 0, false)
			addEntry(t, cs.tg.nodeOf(t, keys.Scheduled(DefaultNamespace, cs.topic, cs.p)), cs.topic, cs.p, cs.id, time.Now().Add(50*time.Millisecond))
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(400 * time.Millisecond)).UnixMilli()
			return addAhead(ctx, cs, fs)
		},
		after: afterByRecord,
	},
	{
		// An Ahead enqueue of an id in flight: HSETNX (refused), ZADD NX
		// (adds an entry beside the in-flight one), then unindexScript
		// removes it. The message is delivered once, at its own due:
		// the next owner returns what was in flight at takeover.
		name:  "enqueue-ahead-duplicate",
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 0) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			err := addAhead(ctx, cs, fs)
			if errors.Is(err, ErrDuplicate) {
				return nil
			}
			if err == nil {
				return errors.New("a duplicate id was accepted")
			}
			return err
		},
		after: afterKept("duplicate enqueue", outDelivered),
	},
	{
		// An Ahead enqueue of two duplicates, the one in flight and the
		// witness scheduled: ZADD NX adds an entry for the first only, and
		// its count does not say which, so the records are read before the
		// added entry is removed: HSETNX twice, ZADD NX, HMGET, then
		// unindexScript. The witness keeps its own entry.
		name:  "enqueue-ahead-duplicates",
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 0) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			rec := func() *store.Record { return newRecord(time.UnixMilli(cs.due+300), 0) }
			errs, err := fs.AddMany(ctx, []store.Group{{Topic: cs.topic, P: cs.p, Ahead: true,
				Msgs: []store.NewMessage{{ID: cs.id, Record: rec()}, {ID: cs.witness, Record: rec()}}}})
			if err != nil {
				return err
			}
			for _, err := range errs[0] {
				if !errors.Is(err, ErrDuplicate) {
					return fmt.Errorf("duplicate enqueue: %v, want ErrDuplicate", err)
				}
			}
			return nil
		},
		after: afterKept("duplicate enqueue", outDelivered),
	},
	{
		// I2: the producer retries the enqueue after the crash.
		name:  "enqueue-again",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 200*time.Millisecond, 0, false) },
		run:   addSoon,
		after: func(t *testing.T, cs *crashCase) {
			written := cs.found(t) != nil
			_, err := cs.c.Send(cs.ctx(), Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), Delay: 200 * time.Millisecond})
			switch {
			case written && !errors.Is(err, ErrDuplicate):
				t.Errorf("%s: enqueue again after a crash that wrote the record: %v, want ErrDuplicate", cs.name(), err)
			case !written && err != nil:
				t.Errorf("%s: enqueue again after a crash that wrote nothing: %v, want success", cs.name(), err)
			}
			cs.expect = outDelivered
			cs.minAt = time.UnixMilli(cs.due)
		},
	},
	{
		// Client.Send: the topic's meta (one pipeline), then store.Add.
		name:  "enqueue-client",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 200*time.Millisecond, 0, false) },
		run: func(ctx context.Context, cs *crashCase, _ *store.Store, fc *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
			_, err := fc.Send(ctx, Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), At: time.UnixMilli(cs.due)})
			return err
		},
		after: afterByRecord,
	},
	{
		// poller.poll: the peek (the fence's score and the range), then
		// ZADD in flight, the claim script, the running mark and HMGET
		// in one pipeline.
		name: "claim",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 0, 0, true)
			cs.fence(t)
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := claimAndBegin(ctx, fs, cs)
			return err
		},
		after: afterKept("claim", outDelivered),
	},
	{
		// A claim under the topic's limits: the token bucket's script,
		// the slots' script (a slot expiring with the crashed holder's
		// lease), then the claim. Slots and tokens a crashed consumer
		// took are lost until their slot expires: the fresh consumer,
		// under a cap of 1, delivers the message after that.
		name: "claim-limited",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 0, 0, true)
			if err := cs.c.Admin().SetLimits(cs.ctx(), cs.topic, Limits{Rate: 100, Concurrency: 1}); err != nil {
				t.Fatal(err)
			}
			cs.fence(t)
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			now := time.Now()
			if _, err := fs.TakeTokens(ctx, cs.topic, store.TokenTake{Rate: 100, Burst: 10, Want: 1, Min: 1, Now: now, Horizon: 100 * time.Millisecond}); err != nil {
				return err
			}
			lease := crashConsumerOptions(cs.topic).Lease
			if _, _, err := fs.TakeSlots(ctx, cs.topic, 1, []string{"crashed 1"}, now.Add(lease), nil); err != nil {
				return err
			}
			_, err := claimAndBegin(ctx, fs, cs)
			return err
		},
		after: afterKept("claim", outDelivered),
	},
	{
		// poller.startHeld: the start of a message claimed ahead, one
		// script on the records. Started or not, the message was claimed
		// by a consumer that died: the fresh one returns it from in
		// flight, its start cleared, and delivers it.
		name:  "start-held",
		setup: func(t *testing.T, cs *crashCase) { cs.claimedAhead(t, 100*time.Millisecond) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			got, err := fs.StartMany(ctx, cs.tp(), cs.token, []string{cs.id}, []*store.Record{cs.rec0})
			if err == nil && got[0] != store.StartOK {
				return fmt.Errorf("start: %d, want StartOK", got[0])
			}
			return err
		},
		after: afterKept("start", outDelivered),
	},
	{
		// store.Delete of a message claimed ahead and not started: the
		// delete script, then ZREM of each index. Record deleted => the
		// held copy never starts (the fresh consumer finds a tombstone).
		name:  "delete-held",
		setup: func(t *testing.T, cs *crashCase) { cs.claimedAhead(t, 300*time.Millisecond) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Delete(ctx, cs.tp(), cs.id)
		},
		after: afterByRecord,
	},
	{
		// store.Delete of a message whose delivery started: the same
		// commands, and ErrRunning. Record deleted => never delivered
		// again; not deleted => the delivery of the consumer that died is
		// run again by the fresh one.
		name:  "delete-running",
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 0) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			err := fs.Delete(ctx, cs.tp(), cs.id)
			if errors.Is(err, ErrRunning) {
				return nil
			}
			if err == nil {
				return errors.New("delete of a started delivery: nil, want ErrRunning")
			}
			return err
		},
		after: afterByRecord,
	},
	{
		// store.Reschedule of a message claimed ahead and not started:
		// HGET + ZSCORE dead, the compare-and-write of the record, ZADD.
		// Once the record has the new due, the held copy never starts at
		// the old one.
		name: "reschedule-held",
		setup: func(t *testing.T, cs *crashCase) {
			cs.claimedAhead(t, 300*time.Millisecond)
			cs.newDue = clock.CeilMS(time.Now().Add(1200 * time.Millisecond)).UnixMilli()
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Reschedule(ctx, cs.tp(), cs.id, cs.newDue, time.Now().UnixMilli())
		},
		after: func(t *testing.T, cs *crashCase) {
			in := cs.found(t)
			if in == nil {
				t.Fatalf("%s: record lost by a crashed reschedule", cs.name())
			}
			cs.expect = outDelivered
			cs.minAt = time.UnixMilli(cs.due)
			if in.Due.UnixMilli() == cs.newDue {
				cs.minAt, cs.note = time.UnixMilli(cs.newDue), "moved"
			}
		},
	},
	{
		// store.Ack: the compare-and-delete of the record, then ZREM in
		// flight.
		name:  "ack",
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 0) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := fs.Ack(ctx, cs.tp(), []store.Acked{{ID: cs.id, Header: cs.rec0.Header(), Token: cs.token}}, time.Now().UnixMilli())
			return err
		},
		// Record deleted => acked for good (the in-flight entry left
		// behind is a tombstone); not deleted => redelivered after its
		// visibility deadline (the handler's work is not known done).
		after: afterByRecord,
	},
	{
		// A failed delivery goes back to scheduled: HSET + ZADD, then ZREM in flight.
		name:  "retry",
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 0) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			r := cs.failed()
			r.Due = time.Now().Add(100 * time.Millisecond).UnixMilli()
			_, err := fs.Moves(ctx, cs.tp(), []store.Move{{ID: cs.id, Score: r.Due, Record: &r}})
			return err
		},
		after: afterKept("retry", outDelivered),
	},
	{
		// Attempts exhausted: HSET + ZADD dead, then ZREM in flight.
		// MaxAttempts 1. Once the record counts the failed attempt, the
		// new owner that returns the message from in flight finds its
		// attempts exhausted and moves it to dead; before, the failure is
		// lost with the process and the message is delivered again, its
		// attempt count unchanged.
		name:  "dead",
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 1) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			r := cs.failed()
			_, err := fs.Moves(ctx, cs.tp(), []store.Move{{ID: cs.id, Dead: true, Score: r.Updated, Record: &r}})
			return err
		},
		after: func(t *testing.T, cs *crashCase) {
			in := cs.found(t)
			if in == nil {
				t.Errorf("%s: record lost by a crashed move to dead", cs.name())
			}
			cs.minAt = time.UnixMilli(cs.due)
			cs.expect = outDead
			if in != nil && in.Attempts == 0 {
				cs.expect, cs.note = outDelivered, "failure not recorded"
			}
		},
	},
	{
		// store.Delete of a scheduled message: HDEL, then ZREM of each index.
		name:  "delete",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 300*time.Millisecond, 0, true) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Delete(ctx, cs.tp(), cs.id)
		},
		// Record deleted => never delivered (index entries left are
		// tombstones); not deleted => the delete did not happen.
		after: afterByRecord,
	},
	{
		// I2: the user deletes again after the crash.
		name:  "delete-again",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 300*time.Millisecond, 0, true) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Delete(ctx, cs.tp(), cs.id)
		},
		after: func(t *testing.T, cs *crashCase) {
			written := cs.found(t) != nil
			err := cs.c.Delete(cs.ctx(), cs.topic, cs.id)
			switch {
			case written && err != nil:
				t.Errorf("%s: delete again of a message the crash left: %v, want nil", cs.name(), err)
			case !written && !errors.Is(err, ErrNotFound):
				t.Errorf("%s: delete again after a crash that deleted the record: %v, want ErrNotFound", cs.name(), err)
			}
			cs.expect = outGone
		},
	},
	{
		// Client.Send with Replace of a scheduled message: the decision
		// script on the records, then the index script and ZREM of its
		// dead entry. The record is the old one or the new one; either is
		// delivered once, never before the earlier of the two dues (a
		// stale entry holds it to its record's due).
		name: "replace",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 300*time.Millisecond, 0, true)
			cs.newDue = clock.CeilMS(time.Now().Add(900 * time.Millisecond)).UnixMilli()
		},
		run: func(ctx context.Context, cs *crashCase, _ *store.Store, fc *Client) error {
			_, err := fc.Send(ctx, Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), At: time.UnixMilli(cs.newDue), OnDuplicate: Replace})
			return err
		},
		after: afterRescheduled,
	},
	{
		// store.Puts of a Replace in an Ahead group: the decision script,
		// ZADD NX of the entry and ZREM of a dead entry in one pipeline,
		// then the index script where the entry may be later than the
		// record (here: moved earlier, by 600 ms from the due as sent,
		// however long the setup took: a new due not earlier would need
		// no index script, and the case would count one command less
		// than the run without a fault).
		name: "replace-ahead",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 900*time.Millisecond, 0, true)
			cs.newDue = cs.due - 600
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := fs.Puts(ctx, []store.PutGroup{{Topic: cs.topic, P: cs.p, Ahead: true,
				Puts: []store.Put{{ID: cs.id, Policy: store.PolicyReplace, Due: cs.newDue, Body: []byte(crashMsgBody)}}}}, time.Now().UnixMilli())
			return err
		},
		after: afterRescheduled,
	},
	{
		// Client.Send with Debounce of a new id: the decision script
		// creates the record (its window opening), then the index.
		name:  "debounce-new",
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 200*time.Millisecond, 0, false) },
		run: func(ctx context.Context, cs *crashCase, _ *store.Store, fc *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
			_, err := fc.Send(ctx, Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), At: time.UnixMilli(cs.due), OnDuplicate: Debounce, MaxWait: time.Second})
			return err
		},
		after: afterByRecord,
	},
	{
		// store.Ack of a message with a uniqueness window: the ack script
		// writes its Done in place of the record, then ZREM in flight.
		// A Done => acked for good, and never delivered again; the record
		// => redelivered, and its ack then leaves the Done.
		name: "ack-unique", unique: time.Hour,
		setup: func(t *testing.T, cs *crashCase) { cs.inFlight(t, 0) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := fs.Ack(ctx, cs.tp(), []store.Acked{{ID: cs.id, Header: cs.rec0.Header(), KeepFor: cs.rec0.UniqueFor, Token: cs.token}}, time.Now().UnixMilli())
			return err
		},
		after: afterDoneOrRecord,
	},
	{
		// A Replace of a finished id within its window: the put script
		// refuses it (PutDone), the second round trip removes nothing
		// the refusal did not add. Never revived, never delivered.
		name: "replace-finished", unique: time.Hour,
		setup: func(t *testing.T, cs *crashCase) { cs.finished(t, cs.op.unique) },
		run: func(ctx context.Context, cs *crashCase, _ *store.Store, fc *Client) error {
			_, err := fc.Send(ctx, Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), OnDuplicate: Replace})
			return refusedAsFinished(err)
		},
		after: func(t *testing.T, cs *crashCase) {
			if in := cs.found(t); in == nil || in.State != StateDone {
				t.Errorf("%s: a refused send of a finished id left %+v, want it done", cs.name(), in)
			}
			cs.expect, cs.minAt = outGone, time.UnixMilli(cs.due)
		},
	},
	{
		// An enqueue (reject) of an id whose window ended: HSETNX
		// refused, the read of the field, the write over the Done
		// (reviveScript), the ZADD. Written => delivered (indexed by the
		// reconciler if the ZADD was lost); not => the id is free.
		name:  "enqueue-after-window",
		setup: func(t *testing.T, cs *crashCase) { cs.finished(t, time.Millisecond) },
		run: func(ctx context.Context, cs *crashCase, _ *store.Store, fc *Client) error {
			_, err := fc.Send(ctx, Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody)})
			return err
		},
		after: afterByRecord,
	},
	{
		// store.Ack of a delivery whose record a Replace rewrote while it
		// ran: the compare finds the newer record and keeps it, then the
		// index script schedules it. The newer event is delivered once.
		name: "ack-replaced",
		setup: func(t *testing.T, cs *crashCase) {
			cs.inFlight(t, 0)
			if _, err := cs.c.Send(cs.ctx(), Message{Topic: cs.topic, ID: cs.id, Body: []byte(crashMsgBody), OnDuplicate: Replace}); err != nil {
				t.Fatal(err)
			}
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := fs.Ack(ctx, cs.tp(), []store.Acked{{ID: cs.id, Header: cs.rec0.Header(), Token: cs.token}}, time.Now().UnixMilli())
			return err
		},
		after: afterKept("ack of a replaced record", outDelivered),
	},
	{
		// store.Reschedule to a later time: HGET + ZSCORE, HSET, ZADD XX CH.
		name: "reschedule",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 300*time.Millisecond, 0, true)
			cs.newDue = clock.CeilMS(time.Now().Add(1200 * time.Millisecond)).UnixMilli()
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Reschedule(ctx, cs.tp(), cs.id, cs.newDue, time.Now().UnixMilli())
		},
		after: afterRescheduled,
	},
	{
		// I2: the user reschedules again after the crash.
		name: "reschedule-again",
		setup: func(t *testing.T, cs *crashCase) {
			cs.enqueue(t, 300*time.Millisecond, 0, true)
			cs.newDue = clock.CeilMS(time.Now().Add(1200 * time.Millisecond)).UnixMilli()
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Reschedule(ctx, cs.tp(), cs.id, cs.newDue, time.Now().UnixMilli())
		},
		after: func(t *testing.T, cs *crashCase) {
			if _, err := cs.c.Reschedule(cs.ctx(), cs.topic, cs.id, time.UnixMilli(cs.newDue)); err != nil {
				t.Errorf("%s: reschedule again: %v", cs.name(), err)
			}
			in := cs.found(t)
			if in == nil || in.State != StateScheduled || in.Due.UnixMilli() != cs.newDue {
				t.Errorf("%s: after reschedule again: %+v, want scheduled at %d", cs.name(), in, cs.newDue)
			}
			cs.expect = outDelivered
			cs.minAt = time.UnixMilli(cs.newDue)
		},
	},
}

// segmentGroup is a Fresh group of id (due at due) and its sibling (due
// 100ms later): written as one segment.
func (cs *crashCase) segmentGroup(due int64) store.Group {
	return store.Group{Topic: cs.topic, P: cs.p, Fresh: true, Msgs: []store.NewMessage{
		{ID: cs.id, Record: newRecord(time.UnixMilli(due), 0)},
		{ID: cs.sibling, Record: newRecord(time.UnixMilli(due+100), 0)},
	}}
}

// writeSegment puts id and its sibling on the topic as a segment, id due
// in d, and the witness after them.
func (cs *crashCase) writeSegment(t *testing.T, d time.Duration) {
	t.Helper()
	cs.due = clock.CeilMS(time.Now().Add(d)).UnixMilli()
	if _, err := cs.c.store.AddMany(cs.ctx(), []store.Group{cs.segmentGroup(cs.due)}); err != nil {
		t.Fatalf("%s: write segment: %v", cs.name(), err)
	}
	cs.enqueue(t, time.Until(time.UnixMilli(cs.due))+200*time.Millisecond, 0, false)
}

// The operations above on a message held by a segment (see keys.SegmentField).
var segmentCrashOps = []*crashOp{
	{
		// store.AddMany of a Fresh group sharing a prefix: the segment
		// script and the ZADD of its member, in one pipeline.
		name: "enqueue-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) { cs.enqueue(t, 300*time.Millisecond, 0, false) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			cs.due = clock.CeilMS(time.Now().Add(200 * time.Millisecond)).UnixMilli()
			_, err := fs.AddMany(ctx, []store.Group{cs.segmentGroup(cs.due)})
			return err
		},
		after: afterByRecord,
	},
	{
		// poller.poll meeting a segment: the claim script, the explode
		// script, the ZADD of the sibling (not due yet), ZADD in flight + HMGET.
		name: "claim-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) {
			cs.writeSegment(t, 0)
			cs.fence(t)
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			_, err := claimAndBegin(ctx, fs, cs)
			return err
		},
		after: afterKept("claim", outDelivered),
	},
	{
		// store.Delete: the script that rewrites the segment without the
		// message, then ZREM of each index.
		name: "delete-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) { cs.writeSegment(t, 300*time.Millisecond) },
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Delete(ctx, cs.tp(), cs.id)
		},
		after: afterByRecord,
	},
	{
		// store.Reschedule: HGET + ZSCORE + HGET of the segment, the
		// move-out script, ZADD.
		name: "reschedule-segment", segment: true,
		setup: func(t *testing.T, cs *crashCase) {
			cs.writeSegment(t, 300*time.Millisecond)
			cs.newDue = clock.CeilMS(time.Now().Add(1200 * time.Millisecond)).UnixMilli()
		},
		run: func(ctx context.Context, cs *crashCase, fs *store.Store, _ *Client) error {
			return fs.Reschedule(ctx, cs.tp(), cs.id, cs.newDue, time.Now().UnixMilli())
		},
		after: afterRescheduled,
	},
}
