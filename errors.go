package delayq

import (
	"errors"

	"github.com/delayq/delayq/internal/store"
)

// Sentinel errors. Compare with errors.Is: they come wrapped with the topic
// and id they concern.
var (
	// ErrDuplicate: a message with that id is already queued in the topic.
	ErrDuplicate = store.ErrDuplicate
	// ErrNotFound: no such message, schedule or topic; the wrapping
	// error names which.
	ErrNotFound = store.ErrNotFound
	// ErrNoTopic: the topic does not exist: nothing wrote a message to it
	// (Enqueue, Import, a consumer, SetSchedule create topics; reads,
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
	// another count runs (see Client.SetPartitions).
	ErrChangeRunning = store.ErrChangeRunning
	// ErrTopicInUse: the topic holds messages or schedules, a consumer is
	// live on it or its partition count is being changed, so it was not
	// deleted (see DeleteTopicOptions.Force).
	ErrTopicInUse = errors.New("delayq: topic in use")
	// ErrNoChange: no change of the topic's partition count runs, to
	// cancel (see Client.CancelPartitions).
	ErrNoChange = store.ErrNoChange
	// ErrAutoPartitions: the topic's partition count is automatic (see
	// Client.SetAutoPartitions): SetPartitions and CancelPartitions are
	// refused until it is turned off, so that a count set by hand is
	// never undone by the automation.
	ErrAutoPartitions = store.ErrAutoPartitions
	// ErrTooManyPartitions: a partition count past what the topic's
	// consumers can carry (see Client.SetPartitions and
	// PartitionsOptions.Force).
	ErrTooManyPartitions = errors.New("delayq: too many partitions for the topic's consumers")
	// ErrInvalid: bad input (topic, id, body, time, option); the wrapping
	// error names the value and what was expected.
	ErrInvalid = errors.New("delayq: invalid argument")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("delayq: closed")
	// ErrExists: what an add would create exists already (a schedule of
	// that name: see Client.AddSchedule).
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
