package delayq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
)

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
)

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

// isPut reports whether m is written with store.Puts: an id given, with
// Replace or Debounce.
func isPut(m *Message) bool { return m.ID != "" && m.OnDuplicate != Reject && m.imported == nil }

// writePuts writes the messages idx of msgs (see isPut) with store.Puts,
// every partition in one pipeline, and sets their results. During a change of the
// partition count, a message whose id was found in its old partition
// (Message.putOld, see place) is sent there, only if it is still there;
// if it moved meanwhile, to its new partition.
func (c *Client) writePuts(ctx context.Context, now time.Time, msgs []Message, parts []int, res []EnqueueResult, idx []int) error {
	type key struct {
		topic      string
		p          int
		old, ahead bool
	}
	var order []key
	byKey := map[key][]int{}
	for _, i := range idx {
		k := key{msgs[i].Topic, parts[i], msgs[i].putOld > 0, res[i].Due.Sub(now) >= freshAhead}
		if k.old {
			k.p = msgs[i].putOld - 1
		}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	groups := make([]store.PutGroup, len(order))
	for gi, k := range order {
		g := byKey[k]
		puts := make([]store.Put, len(g))
		for j, i := range g {
			m := &msgs[i]
			puts[j] = store.Put{ID: m.ID, Policy: string(m.OnDuplicate), Due: res[i].Due.UnixMilli(),
				MaxWait: m.MaxWait.Milliseconds(), MaxAttempts: m.MaxAttempts, Trace: m.trace, Body: m.Body}
		}
		groups[gi] = store.PutGroup{Topic: k.topic, P: k.p, Puts: puts, OnlyIfExists: k.old, Ahead: k.ahead}
	}
	out, err := c.store.Puts(ctx, groups, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("enqueue %d messages: %w", len(idx), err)
	}
	var moved []int // sent to their old partition and found gone
	for gi, k := range order {
		for j, i := range byKey[k] {
			if out[gi][j].Outcome == 0 {
				moved = append(moved, i)
				continue
			}
			res[i].Due = time.UnixMilli(out[gi][j].Due)
			res[i].Outcome = putOutcomes[out[gi][j].Outcome]
		}
	}
	if len(moved) > 0 {
		for _, i := range moved {
			msgs[i].putOld = 0
		}
		return c.writePuts(ctx, now, msgs, parts, res, moved)
	}
	return nil
}

var putOutcomes = map[int]Outcome{
	store.PutCreated:   OutcomeCreated,
	store.PutReplaced:  OutcomeReplaced,
	store.PutDebounced: OutcomeDebounced,
}
