package store

import (
	"errors"
	"fmt"
)

// Sentinel errors, re-exported by package delayq.
var (
	ErrDuplicate    = errors.New("delayq: duplicate message id")
	ErrNotFound     = errors.New("delayq: message not found")
	ErrNotScheduled = errors.New("delayq: message is not scheduled")
	// ErrChangeRunning: another change of the partition count runs.
	ErrChangeRunning = errors.New("delayq: a change of the partition count runs")
)

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
