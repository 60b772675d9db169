package delayq

import (
	"errors"
	"fmt"

	"github.com/delayq/delayq/internal/store"
)

// Sentinel errors. Compare with errors.Is: they come wrapped with the topic
// and id they concern.
var (
	// ErrDuplicate: a message with that id is already queued in the
	// topic, or was delivered within its uniqueness window (then the
	// error is a *FinishedError: see Message.UniqueFor).
	ErrDuplicate = store.ErrDuplicate
	// ErrNotFound: no such message, schedule or topic; the wrapping
	// error names which.
	ErrNotFound = store.ErrNotFound
	// ErrNoTopic: the topic does not exist: nothing wrote a message to it
	// (Send, Import, a consumer, SetSchedule, ProposeTopic create topics; reads,
	// deletes and reschedules do not), or it was deleted (DeleteTopic).
	// Errors wrapping it read `topic "T" does not exist` and match
	// ErrNotFound too.
	ErrNoTopic = store.ErrNoTopic
	// ErrNotScheduled: the message exists but is dead, so it cannot be
	// rescheduled.
	ErrNotScheduled = store.ErrNotScheduled
	// ErrRunning: a delivery of the message started before the write.
	// From Delete: the message is deleted all the same and is never
	// retried, but the delivery that started may run to its end. From
	// Reschedule: nothing changed. A delivery starts when its consumer
	// commits to it, in one script with the message's record (see
	// docs/guarantees.md): a Delete, Reschedule, Replace or Debounce that
	// returned before that start wins, and the version it removed never
	// starts.
	ErrRunning = store.ErrRunning
	// ErrChangeRunning: a change of the topic's partition count to
	// another count runs (see Admin.SetPartitions).
	ErrChangeRunning = store.ErrChangeRunning
	// ErrTopicInUse: the topic holds messages or schedules, a consumer is
	// live on it or its partition count is being changed, so it was not
	// deleted (see DeleteTopicOptions.Force).
	ErrTopicInUse = errors.New("delayq: topic in use")
	// ErrNoChange: no change of the topic's partition count runs, to
	// cancel (see Admin.CancelPartitions).
	ErrNoChange = store.ErrNoChange
	// ErrAutoPartitions: the topic's partition count is automatic (see
	// Admin.SetAutoPartitions): SetPartitions and CancelPartitions are
	// refused until it is turned off, so that a count set by hand is
	// never undone by the automation.
	ErrAutoPartitions = store.ErrAutoPartitions
	// ErrTooManyPartitions: a partition count past what the topic's
	// consumers can carry (see Admin.SetPartitions and
	// PartitionsOptions.Force).
	ErrTooManyPartitions = errors.New("delayq: too many partitions for the topic's consumers")
	// ErrInvalid: bad input (topic, id, body, time, option); the wrapping
	// error names the value and what was expected.
	ErrInvalid = errors.New("delayq: invalid argument")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("delayq: closed")
	// ErrExists: what an add would create exists already (a schedule of
	// that name: see Admin.AddSchedule).
	ErrExists = errors.New("delayq: exists already")
	// ErrUnavailable: no address of Options.Addr answered a dial (an
	// outage), within Options.RetryFor for a write of messages; the
	// command was not sent.
	ErrUnavailable = store.ErrUnreachable
	// ErrAuth: Redis (or the proxy) refused the password, or wants one.
	// It is not retried: waiting will not fix it.
	ErrAuth = store.ErrAuth
	// ErrNotRedis: the address answers, but not in Redis's protocol (an
	// HTTP port, say). It is not retried.
	ErrNotRedis = store.ErrNotRedis
)

// ErrMalformed is wrapped by the errors of lines ImportJSON cannot read.
var ErrMalformed = errors.New("delayq: malformed line")

// namedError is an error that says in its own words what it concerns
// (such as "schedule \"daily\" of topic reports not found") and matches
// its sentinel with errors.Is, without the sentinel's text.
type namedError struct {
	msg      string
	sentinel error
}

func (e *namedError) Error() string { return e.msg }
func (e *namedError) Unwrap() error { return e.sentinel }

// FieldError is the error of one bad field of an options struct (or
// argument) of the library: it matches ErrInvalid with errors.Is, and
// says which field, its value and what is allowed. Programs that take
// these values from their own users (the delayq command line, a config
// file) use errors.As to name the value as their user wrote it, as
// cmd/delayq names flags.
type FieldError struct {
	// Field names the field as Go code spells it, e.g.
	// "ConsumerOptions.Lease", "PauseOptions.Until", "Limits.Rate",
	// "Schedule.Spec", or the argument, e.g. "SetPartitions.n".
	Field string
	// Value is the value, formatted.
	Value string
	// Reason says what is wrong and what is allowed, e.g. "is shorter
	// than 30ms".
	Reason string
	// Of names what the field belongs to when that is not the options
	// passed, e.g. `schedule "daily"`; "" for none.
	Of string
}

// Error returns "delayq: invalid argument: [OF: ]FIELD VALUE REASON".
func (e *FieldError) Error() string {
	of := ""
	if e.Of != "" {
		of = e.Of + ": "
	}
	return fmt.Sprintf("%v: %s%s %s %s", ErrInvalid, of, e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// fieldErr returns a *FieldError of field, with v formatted by %v.
func fieldErr(field string, v any, format string, args ...any) error {
	return &FieldError{Field: field, Value: fmt.Sprint(v), Reason: fmt.Sprintf(format, args...)}
}

// FinishedError is the error of a send whose id belongs to a message
// delivered already, within its uniqueness window (Message.UniqueFor):
// Done.Finished is when its delivery was acked, Done.Until when the id is
// free again. It wraps ErrDuplicate, and errors.As finds it.
type FinishedError = store.FinishedError
