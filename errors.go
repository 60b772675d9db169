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
	// ErrInvalid: bad input (topic, id, body, time, option); the wrapping
	// error names the value and what was expected.
	ErrInvalid = errors.New("delayq: invalid argument")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("delayq: closed")
	// ErrUnavailable: no address of Options.Addr answered a dial (an
	// outage), within Options.RetryFor for a write of messages; the
	// command was not sent.
	ErrUnavailable = store.ErrUnreachable
)
