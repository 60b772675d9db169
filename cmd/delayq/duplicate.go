package main

import (
	"errors"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/wire"
)

// duplicateFlags are send's --on-duplicate and --max-wait: what a message
// does with an id that exists in its topic (with --stdin, for the lines
// that do not say).
type duplicateFlags struct {
	policy  onDuplicateFlag
	maxWait durationFlag
}

// add registers the flags on cmd.
func (d *duplicateFlags) add(cmd *command) {
	cmd.fs.Var(&d.policy, "on-duplicate", "what to do if the id exists: `policy` reject (exit 1), replace, or debounce (default reject)")
	cmd.fs.Var(&d.maxWait, "max-wait", "with --on-duplicate debounce: due at the latest `duration` after the first event of the window (default: no bound)")
}

// resolve checks the flags and returns what they say. --max-wait bounds a
// debounce window: it needs --on-duplicate debounce.
func (d *duplicateFlags) resolve(cmd *command) (httpapi.Duplicates, error) {
	if cmd.isSet("max-wait") {
		if err := cmd.nonNegative("max-wait", int64(d.maxWait.d)); err != nil {
			return httpapi.Duplicates{}, err
		}
		if d.policy.p != delayq.Debounce {
			given := "without --on-duplicate"
			if cmd.isSet("on-duplicate") {
				given = "with --on-duplicate " + d.policy.p.String()
			}
			return httpapi.Duplicates{}, cmd.usageErr("--max-wait %s %s: it bounds a debounce window; use --on-duplicate debounce, or remove --max-wait", cmd.value("max-wait"), given)
		}
	}
	return httpapi.Duplicates{OnDuplicate: d.policy.p, MaxWait: d.maxWait.d}, nil
}

// onDuplicateFlag is a flag.Value for a policy: exactly reject, replace
// or debounce (httpapi.ParseOnDuplicate).
type onDuplicateFlag struct{ p delayq.OnDuplicate }

// String returns the policy, or "" when unset.
func (f *onDuplicateFlag) String() string {
	if f == nil || f.p == delayq.Reject {
		return ""
	}
	return f.p.String()
}

// Set parses s.
func (f *onDuplicateFlag) Set(s string) error {
	p, err := httpapi.ParseOnDuplicate(s)
	if err != nil {
		return errors.New("want reject, replace or debounce")
	}
	f.p = p
	return nil
}

// sentLine is the line send prints of a message it wrote: its id alone
// when the message was created, as it always was, so that scripts that
// read the id keep working; when the id existed and the message was
// replaced or debounced, the id, the outcome and the due stored:
// "order-42 debounced, due 2030-01-02T15:04:05.000Z".
func sentLine(r delayq.SendResult) string {
	if r.Outcome == delayq.OutcomeCreated || r.Outcome == "" {
		return r.ID
	}
	return r.ID + " " + string(r.Outcome) + ", due " + wire.Time(r.Due)
}
