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
	// ErrNotFound: no message with that id in the topic.
	ErrNotFound = store.ErrNotFound
	// ErrNotScheduled: the message exists but is in flight or dead, so it
	// cannot be rescheduled.
	ErrNotScheduled = store.ErrNotScheduled
	// ErrChangeRunning: a change of the topic's partition count to
	// another count runs (see Client.SetPartitions).
	ErrChangeRunning = store.ErrChangeRunning
	// ErrNoChange: no change of the topic's partition count runs, to
	// cancel (see Client.CancelPartitions).
	ErrNoChange = store.ErrNoChange
	// ErrTooManyPartitions: a partition count past what the topic's
	// consumers can carry (see Client.SetPartitions and
	// PartitionsOptions.Force).
	ErrTooManyPartitions = errors.New("delayq: too many partitions for the topic's consumers")
	// ErrInvalid: bad input (topic, id, body, time, option); the wrapping
	// error names the value and what was expected.
	ErrInvalid = errors.New("delayq: invalid argument")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("delayq: closed")
)
