package httpapi

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/delayq/delayq"
)

// Duplicates is what an enqueue does to an id that exists in its topic
// when the request does not say (see delayq.Message.OnDuplicate): the
// worker's [[topic]] on_duplicate and max_wait, or the flags of "delayq
// send --stdin". The zero value rejects the enqueue (delayq.Reject). It
// is a plain value, safe to share.
type Duplicates struct {
	OnDuplicate delayq.OnDuplicate
	// MaxWait bounds a debounce window (delayq.Message.MaxWait); only
	// with OnDuplicate delayq.Debounce. 0: no bound.
	MaxWait time.Duration
	// UniqueFor is the uniqueness window (delayq.Message.UniqueFor) of a
	// message whose body sets no unique_for: "delayq send --stdin
	// --unique-for". 0: the topic's default (the worker sets none here:
	// its [[topic]] unique_for is the topic's stored default).
	UniqueFor time.Duration
}

// Fields of an enqueue body that say what to do with an id that exists.
const (
	fieldOnDuplicate = "on_duplicate"
	fieldMaxWait     = "max_wait"
	fieldMaxWaitMS   = "max_wait_ms"
	fieldUniqueFor   = "unique_for"
)

// dupRequest is what an enqueue body said of an id that exists: the
// policy when on_duplicate was set, the window bound when max_wait or
// max_wait_ms was, the uniqueness window when unique_for was.
type dupRequest struct {
	policy    delayq.OnDuplicate
	policySet bool
	waitField string // max_wait, max_wait_ms, or "" when neither was set
	maxWait   time.Duration
	unique    time.Duration
	uniqueSet bool
}

// decodeDuplicates reads on_duplicate, max_wait and max_wait_ms of obj.
// Whether max_wait fits the policy is checked by resolve, which knows the
// default.
func decodeDuplicates(obj map[string]json.RawMessage) (dupRequest, error) {
	var d dupRequest
	if raw, ok := obj[fieldOnDuplicate]; ok {
		s, err := decodeString(fieldOnDuplicate, raw)
		if err != nil {
			return d, badField(fieldOnDuplicate, `on_duplicate must be a string: "reject", "replace" or "debounce"`)
		}
		if d.policy, err = ParseOnDuplicate(s); err != nil {
			return d, badField(fieldOnDuplicate, "on_duplicate %q is not a policy; want \"reject\", \"replace\" or \"debounce\"", s)
		}
		d.policySet = true
	}
	_, hasWait := obj[fieldMaxWait]
	_, hasWaitMS := obj[fieldMaxWaitMS]
	switch {
	case hasWait && hasWaitMS:
		return d, badField(fieldMaxWaitMS, "set only one of max_wait and max_wait_ms")
	case hasWait:
		d.waitField = fieldMaxWait
		s, err := decodeString(fieldMaxWait, obj[fieldMaxWait])
		if err != nil {
			return d, badField(fieldMaxWait, `max_wait must be a duration string like "30m"`)
		}
		if d.maxWait, err = time.ParseDuration(s); err != nil {
			return d, badField(fieldMaxWait, "max_wait %q is not a duration like \"30m\"", s)
		}
		if d.maxWait < 0 {
			return d, badField(fieldMaxWait, "max_wait %q is negative", s)
		}
	case hasWaitMS:
		d.waitField = fieldMaxWaitMS
		var ms int64
		if err := json.Unmarshal(obj[fieldMaxWaitMS], &ms); err != nil {
			return d, badField(fieldMaxWaitMS, "max_wait_ms must be an integer number of milliseconds")
		}
		if ms < 0 {
			return d, badField(fieldMaxWaitMS, "max_wait_ms %d is negative", ms)
		}
		if ms > maxDelayMS {
			return d, badField(fieldMaxWaitMS, "max_wait_ms %d is too large", ms)
		}
		d.maxWait = time.Duration(ms) * time.Millisecond
	}
	if raw, ok := obj[fieldUniqueFor]; ok {
		var err error
		if d.unique, err = decodeUniqueFor(raw); err != nil {
			return d, err
		}
		d.uniqueSet = true
	}
	return d, nil
}

// decodeUniqueFor decodes a unique_for value: a Go duration string of 0
// or more ("24h"; "0s" for none, or for a message the topic's default).
func decodeUniqueFor(raw json.RawMessage) (time.Duration, error) {
	s, err := decodeString(fieldUniqueFor, raw)
	if err != nil {
		return 0, badField(fieldUniqueFor, `unique_for must be a duration string like "24h"`)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badField(fieldUniqueFor, "unique_for %q is not a duration like \"24h\"", s)
	}
	if d < 0 {
		return 0, badField(fieldUniqueFor, "unique_for %q is negative", s)
	}
	return d, nil
}

// uniqueFor returns the uniqueness window of a message whose body said
// d: the body's unique_for, else def's.
func (d dupRequest) uniqueFor(def Duplicates) time.Duration {
	if d.uniqueSet {
		return d.unique
	}
	return def.UniqueFor
}

// resolve returns the policy and window bound of a message whose body
// said d, def applying to what it did not say: the body's on_duplicate,
// else def's; the body's max_wait, else def's when both the message's
// policy and def's are debounce. A max_wait set on a message that does
// not debounce is an error naming it.
func (d dupRequest) resolve(def Duplicates) (delayq.OnDuplicate, time.Duration, error) {
	policy, whose := def.OnDuplicate, " (the default)"
	if d.policySet {
		policy, whose = d.policy, ""
	}
	switch {
	case d.waitField != "" && policy != delayq.Debounce:
		return policy, 0, badField(d.waitField, "%s bounds a debounce window, and on_duplicate is %q%s; set on_duplicate \"debounce\", or remove %s",
			d.waitField, policy.String(), whose, d.waitField)
	case d.waitField != "":
		return policy, d.maxWait, nil
	case policy == delayq.Debounce && def.OnDuplicate == delayq.Debounce:
		return policy, def.MaxWait, nil
	}
	return policy, 0, nil
}

// ParseOnDuplicate reads a policy as the HTTP API, the worker's config
// and "delayq send --on-duplicate" write it: exactly "reject", "replace"
// or "debounce" (delayq.ParseOnDuplicate also takes "" and surrounding
// spaces, which a field or flag set by mistake would pass for reject).
func ParseOnDuplicate(s string) (delayq.OnDuplicate, error) {
	p, err := delayq.ParseOnDuplicate(s)
	if err == nil && p.String() != s {
		err = fmt.Errorf("%w: on duplicate %q: want reject, replace or debounce", delayq.ErrInvalid, s)
	}
	return p, err
}
