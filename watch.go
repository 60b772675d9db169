package delayq

import (
	"context"
	"sync"
	"time"
)

// watcher reads the counters of the namespace's changes hash (see
// keys.Changes) that the client's consumers watch, the change counter of
// each topic they run and the wake-up counter of each partition they own,
// all in one command (an HMGET) per tick, and tells the subscribers of
// each field that moved. A process that runs ten topics of 16 partitions
// thus pays one read per tick, not ten or 160. It runs while it has
// subscribers. Safe for concurrent use.
type watcher struct {
	c *Client

	mu     sync.Mutex
	subs   map[*watch]struct{}
	cancel context.CancelFunc // stops the running loop, if any
	done   chan struct{}      // closed when it returned
	// seen is where each topic's counter stood at the last read. Only the
	// running loop uses it (one at a time: a loop starts after the last
	// one returned), so that a change between two loops is not missed.
	seen map[string]int64
}

// watch is one subscription: a field (a topic, or a partition's wake-up
// field) and where it is told.
type watch struct {
	topic string // the field
	every time.Duration
	ch    chan struct{} // capacity 1: a change pending is enough
}

// subscribe starts telling the returned channel of changes of the field
// topic (a topic's name, or a keys.WakeField), read every `every` or more
// often, until the returned function is called.
func (w *watcher) subscribe(topic string, every time.Duration) (<-chan struct{}, func()) {
	s := &watch{topic: topic, every: every, ch: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs, w.seen = map[*watch]struct{}{}, map[string]int64{}
	}
	w.subs[s] = struct{}{}
	w.restartLocked()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.subs, s)
			w.restartLocked()
			w.mu.Unlock()
		})
	}
}

// restartLocked stops the reading loop and starts a new one for the
// subscribers there are now (none: no loop). w.mu is held.
func (w *watcher) restartLocked() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.cancel = nil
	}
	if len(w.subs) == 0 {
		return
	}
	var every time.Duration
	subs := make([]*watch, 0, len(w.subs))
	for s := range w.subs {
		subs = append(subs, s)
		if every == 0 || s.every < every {
			every = s.every
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go w.loop(ctx, subs, every, w.done)
}

// loop reads the counters of the subscribers' topics every tick and
// signals the subscribers of each topic whose counter moved since it was
// last read. The first read of a topic only sets where its counter stands.
func (w *watcher) loop(ctx context.Context, subs []*watch, every time.Duration, done chan struct{}) {
	defer close(done)
	var topics []string
	index := map[string]int{}
	for _, s := range subs {
		if _, ok := index[s.topic]; !ok {
			index[s.topic] = len(topics)
			topics = append(topics, s.topic)
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		// Each read is bounded by a tick, and not cut off by ctx: a
		// command cut off in the middle closes its connection.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(every, time.Second))
		vals, err := w.c.store.Changes(rctx, topics)
		cancel()
		if err == nil {
			for _, s := range subs {
				v := vals[index[s.topic]]
				if last, ok := w.seen[s.topic]; ok && v != last {
					select {
					case s.ch <- struct{}{}:
					default:
					}
				}
			}
			for t, i := range index {
				w.seen[t] = vals[i]
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
