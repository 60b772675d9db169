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
	// ErrNoChange: no change of the partition count runs (to cancel).
	ErrNoChange = errors.New("delayq: no change of the partition count runs")
	// ErrChangeReplaced: a move pass stopped because the change it ran
	// ended or was cancelled meanwhile (see MoveScan).
	ErrChangeReplaced = errors.New("delayq: the change of the partition count was cancelled or ended")
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
