package config

import (
	"github.com/delayq/delayq"
)

// onDuplicates are the values of [[topic]] on_duplicate.
var onDuplicates = map[string]delayq.OnDuplicate{"reject": delayq.Reject, "replace": delayq.Replace, "debounce": delayq.Debounce}

// onDuplicate reads a policy for an id that exists: exactly "reject",
// "replace" or "debounce" ("" too is refused: it would pass for reject).
func (c converter) onDuplicate(x value, dst *delayq.OnDuplicate, at place) {
	if !x.set {
		return
	}
	s, ok := x.v.(string)
	if !ok {
		c.ps.add(at, "got %s; want \"reject\", \"replace\" or \"debounce\"", typeName(x.v))
		return
	}
	p, ok := onDuplicates[s]
	if !ok {
		c.ps.add(at, "%q is not a policy; want \"reject\", \"replace\" or \"debounce\"", s)
		return
	}
	*dst = p
}

// validateDuplicates checks on_duplicate, max_wait and unique_for of the
// topic, at giving the place of a key of its table: max_wait bounds a
// debounce window, so it needs on_duplicate = "debounce"; unique_for is
// 0s or more.
func (t *Topic) validateDuplicates(ps *problems, at func(key string) place) {
	switch t.OnDuplicate {
	case delayq.Reject, delayq.Replace, delayq.Debounce:
	default:
		ps.add(at("on_duplicate"), "%q is not a policy; want \"reject\", \"replace\" or \"debounce\"", string(t.OnDuplicate))
	}
	switch {
	case t.MaxWait < 0:
		ps.add(at("max_wait"), "%v is negative; want a duration such as \"30m\", or no key for no bound", t.MaxWait)
	case t.MaxWait > 0 && t.OnDuplicate != delayq.Debounce:
		ps.add(at("max_wait"), "%v bounds a debounce window, and on_duplicate is %q; set on_duplicate = \"debounce\", or remove max_wait", t.MaxWait, t.OnDuplicate.String())
	}
	if t.UniqueFor != nil && *t.UniqueFor < 0 {
		ps.add(at("unique_for"), "%v is negative; want a duration such as \"24h\", \"0s\" for no window, or no key to leave the topic's as it is", *t.UniqueFor)
	}
}
