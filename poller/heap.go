package poller

import "container/heap"

// held is a min-heap of claimed messages by the time they may start.
type held []*Msg

var _ heap.Interface = (*held)(nil)

func (h held) Len() int           { return len(h) }
func (h held) Less(i, j int) bool { return h[i].at().Before(h[j].at()) }
func (h held) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *held) Push(x any)        { m := x.(*Msg); m.index = len(*h); *h = append(*h, m) }
func (h *held) Pop() any          { old := *h; m := old[len(old)-1]; *h = old[:len(old)-1]; return m }
func (h held) peek() *Msg         { return h[0] }
