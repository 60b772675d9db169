package delayq

import (
	"context"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/store"
)

// keptAckRetry is how often a consumer tries again to write the acks its
// partition loops could not write before they lost their leases.
const keptAckRetry = 100 * time.Millisecond

// keptAcks are acks a consumer's partition loops could not write before
// they stopped (Redis could not be reached, and their leases ran out):
// deliveries that finished. The consumer writes them once Redis answers,
// whoever owns the partitions by then: an ack removes a message only if
// its record is still the one delivered (see store.Ack), so one written
// late removes it before its next owner runs it again, and does nothing
// if that owner ran it already or a send replaced it.
type keptAcks struct {
	k    *Consumer
	mu   sync.Mutex
	byP  map[int]*keptPart
	wake chan struct{}
}

type keptPart struct {
	acks []store.Acked
}

func newKeptAcks(k *Consumer) *keptAcks {
	return &keptAcks{k: k, byP: map[int]*keptPart{}, wake: make(chan struct{}, 1)}
}

// keep is poller.Config.Keep for partition p.
func (a *keptAcks) keep(p int, acks []store.Acked) {
	a.mu.Lock()
	kp := a.byP[p]
	if kp == nil {
		kp = &keptPart{}
		a.byP[p] = kp
	}
	kp.acks = append(kp.acks, acks...)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run writes the kept acks, again every keptAckRetry while they fail,
// until ctx is done; then it tries once more, for up to the consumer's
// lease, and logs what is left.
func (a *keptAcks) run(ctx context.Context) {
	t := time.NewTicker(keptAckRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), a.k.opts.Lease)
			a.write(fctx)
			cancel()
			if n := a.left(); n > 0 {
				a.k.log.Warn("acks not written at the consumer's stop: their messages may be delivered again", "n", n)
			}
			return
		case <-a.wake:
		case <-t.C:
		}
		a.write(ctx)
	}
}

// write writes the acks kept so far, a partition at a time, and forgets
// those written.
func (a *keptAcks) write(ctx context.Context) {
	a.mu.Lock()
	todo := a.byP
	a.byP = map[int]*keptPart{}
	a.mu.Unlock()
	for p, kp := range todo {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := a.k.c.store.Ack(wctx, store.TopicPartition{Topic: a.k.opts.Topic, P: p}, kp.acks, clock.CeilMS(time.Now()).UnixMilli())
		cancel()
		if err != nil {
			a.keep(p, kp.acks)
			continue
		}
		a.k.log.Info("kept acks written after the outage", "partition", p, "n", len(kp.acks))
	}
}

func (a *keptAcks) left() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, kp := range a.byP {
		n += len(kp.acks)
	}
	return n
}
