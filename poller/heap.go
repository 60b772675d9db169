package poller

import (
	"container/heap"
	"time"
)

// held is a min-heap of claimed messages by the time they may start.
type held []*Msg

var _ heap.Interface = (*held)(nil)

func (h held) Len() int           { return len(h) }
func (h held) Less(i, j int) bool { return h[i].at().Before(h[j].at()) }
func (h held) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *held) Push(x any)        { m := x.(*Msg); m.index = len(*h); *h = append(*h, m) }
func (h *held) Pop() any          { old := *h; m := old[len(old)-1]; *h = old[:len(old)-1]; return m }
func (h held) peek() *Msg         { return h[0] }

// heldBucket is the width of the slices of time in which a loop counts
// the messages it holds and has not started (see waiting).
const heldBucket = 100 * time.Millisecond

// waiting holds the messages a loop claimed and has not started, by when
// they may start, and counts them by slice of heldBucket: how many fall
// due together is what says how far ahead of their due they start (see
// part.lead).
type waiting struct {
	h     held
	count map[int64]int // messages by at() / heldBucket
}

func bucketOf(m *Msg) int64 { return m.at().UnixNano() / int64(heldBucket) }

func (w *waiting) push(m *Msg) {
	if w.count == nil {
		w.count = map[int64]int{}
	}
	w.count[bucketOf(m)]++
	heap.Push(&w.h, m)
}

func (w *waiting) pop() *Msg {
	m := heap.Pop(&w.h).(*Msg)
	b := bucketOf(m)
	if w.count[b]--; w.count[b] <= 0 {
		delete(w.count, b)
	}
	return m
}

func (w *waiting) len() int   { return len(w.h) }
func (w *waiting) peek() *Msg { return w.h.peek() }

// together is how many messages start with m: those waiting in m's
// slice of heldBucket and the next (the count of the next covers a
// burst that straddles two slices).
func (w *waiting) together(m *Msg) int {
	b := bucketOf(m)
	return w.count[b] + w.count[b+1]
}

// clear empties w and returns what it held.
func (w *waiting) clear() []*Msg {
	ms := w.h
	w.h, w.count = nil, nil
	return ms
}
