package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/delayq/delayq/internal/portable"
	"github.com/gomodule/redigo/redis"
)

// Sentinel errors, re-exported by package delayq.
var (
	ErrDuplicate = errors.New("delayq: duplicate message id")
	// ErrNotFound: what was asked for does not exist; the wrapping error
	// names it (a message, a schedule, a topic: see ErrNoTopic).
	ErrNotFound     = errors.New("delayq: not found")
	ErrNotScheduled = errors.New("delayq: message is not scheduled")
	// ErrRunning: a delivery of the message started before the write
	// (see StartMany).
	ErrRunning = errors.New("delayq: a delivery of the message is running")
	// ErrChangeRunning: another change of the partition count runs.
	ErrChangeRunning = errors.New("delayq: a change of the partition count runs")
	// ErrNoTopic: the topic does not exist (nothing ever created it, or it
	// was deleted). It matches ErrNotFound too.
	ErrNoTopic error = &kindError{msg: "delayq: no such topic", parent: ErrNotFound}
	// ErrAutoPartitions: the partition count is automatic, and a change
	// or cancel by hand is refused until it is turned off (see AutoOn).
	ErrAutoPartitions = errors.New("delayq: the partition count is automatic")
	// ErrNoChange: no change of the partition count runs (to cancel).
	ErrNoChange = errors.New("delayq: no change of the partition count runs")
	// ErrChangeReplaced: a move pass stopped because the change it ran
	// ended or was cancelled meanwhile (see MoveScan).
	ErrChangeReplaced = errors.New("delayq: the change of the partition count was cancelled or ended")
)

// kindError is a sentinel that is a kind of another one: errors.Is
// matches both.
type kindError struct {
	msg    string
	parent error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.parent }

// noTopicError says that a topic does not exist; it matches ErrNoTopic
// and ErrNotFound.
type noTopicError struct{ topic string }

func (e *noTopicError) Error() string { return fmt.Sprintf("delayq: topic %q does not exist", e.topic) }
func (e *noTopicError) Unwrap() error { return ErrNoTopic }

// NoTopic returns the error for a topic that does not exist: it reads
// `delayq: topic "T" does not exist` and matches ErrNoTopic and
// ErrNotFound.
func NoTopic(topic string) error { return &noTopicError{topic: topic} }

// FencedError is returned by the fenced writes (ClaimBegin, ClaimIndexOnly,
// RaiseFence, TakeOver, HandOver and a move's removal from its source) when
// the partition's fence holds another token than the caller's.
type FencedError struct {
	Token  int64 // the caller's token
	Newest int64 // the fence's token (0 if the fence is missing)
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("delayq: fenced: token %d, fence at %d", e.Token, e.Newest)
}

// fencedErr turns a script's "FENCED n" error into a *FencedError.
func fencedErr(err error, token int64) (*FencedError, bool) {
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(string(re), "FENCED ") {
		newest, _ := strconv.ParseInt(strings.TrimPrefix(string(re), "FENCED "), 10, 64)
		return &FencedError{Token: token, Newest: newest}, true
	}
	return nil, false
}

// ErrAuth and ErrNotRedis: a peer that will never serve us (see
// portable.Refused); neither is an outage.
var (
	ErrAuth     = portable.ErrAuth
	ErrNotRedis = portable.ErrNotRedis
)

// ErrUnreachable: no address of the store answered a dial (an outage),
// so the command was not sent. The errors that match it are an
// *UnreachableError.
var ErrUnreachable = errors.New("delayq: no address answers")

// UnreachableError is the failure of a dial to every address of a store:
// each address's error, in the order tried. It matches ErrUnreachable.
type UnreachableError struct {
	Errs []error // each names its address
}

// Error returns the errors of the addresses tried, which name them.
func (e *UnreachableError) Error() string {
	if len(e.Errs) == 1 {
		return e.Errs[0].Error()
	}
	s := "no proxy answers: "
	for i, err := range e.Errs {
		if i > 0 {
			s += "; "
		}
		s += err.Error()
	}
	return s
}

// Is reports whether target is ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// Unwrap returns the addresses' errors.
func (e *UnreachableError) Unwrap() []error { return e.Errs }
