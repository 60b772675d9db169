package delayq

import (
	"context"
	"sync"
	"time"
)

// watcher watches the counters of the namespace's changes hash (see
// keys.Changes) that the client's consumers subscribe to, the change
// counter of each topic they run and the wake-up counter of each
// partition they own, and tells the subscribers of each field that moved.
// Each tick reads the hash's version alone (one HGET), and the fields
// subscribed (one HMGET) only when it moved or a field is new: a process
// that runs ten topics of 16 partitions pays one small read per tick, not
// ten or 160. Its loop runs while it has subscribers. Safe for concurrent
// use.
type watcher struct {
	c *Client

	mu   sync.Mutex
	subs map[*watch]struct{}
	stop context.CancelFunc // stops the running loop, if any
	done chan struct{}      // closed when that loop has returned
}

// watch is one subscription: a field (a topic, or a partition's wake-up
// field) and where it is told.
type watch struct {
	field string
	every time.Duration
	ch    chan struct{} // capacity 1: a change pending is enough
}

// subscribe starts telling the returned channel of changes of field (a
// topic's name, or a keys.WakeField), read every `every` or more often,
// until the returned function is called.
func (w *watcher) subscribe(field string, every time.Duration) (<-chan struct{}, func()) {
	s := &watch{field: field, every: every, ch: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[*watch]struct{}{}
	}
	w.subs[s] = struct{}{}
	if w.stop == nil {
		// A loop still returning after its last subscriber left is not
		// waited for here (it takes w.mu at its tick): the unsubscribe
		// that stopped it waits for it.
		ctx, stop := context.WithCancel(context.Background())
		w.stop, w.done = stop, make(chan struct{})
		go w.loop(ctx, w.done)
	}
	w.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.subs, s)
			var done chan struct{}
			if len(w.subs) == 0 {
				w.stop()
				w.stop, done = nil, w.done
			}
			w.mu.Unlock()
			if done != nil {
				<-done // not under w.mu: the loop takes it at each tick
			}
		})
	}
}

// current returns the subscriptions, the distinct fields they watch and
// the shortest tick they ask for.
func (w *watcher) current() (subs []*watch, fields []string, every time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for s := range w.subs {
		subs = append(subs, s)
		if !seen[s.field] {
			seen[s.field] = true
			fields = append(fields, s.field)
		}
		if every == 0 || s.every < every {
			every = s.every
		}
	}
	return subs, fields, every
}

// loop reads the counters of the subscribed fields every tick and signals
// the subscribers of each field whose counter moved since it was last
// read, or was read for the first time.
func (w *watcher) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	last := map[string]int64{}
	version := int64(-1) // of the last read of the fields
	timer := time.NewTimer(0)
	defer timer.Stop()
	for at := time.Now(); ; {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		subs, fields, every := w.current()
		if len(fields) > 0 {
			// Each read is bounded, and not cut off by ctx: a command cut
			// off in the middle closes its connection.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(every, time.Second))
			w.tick(rctx, subs, fields, last, &version)
			cancel()
		}
		// Ticks keep their pace whatever the reads take, and skip those
		// a stall made late.
		every = max(every, time.Millisecond)
		at = at.Add(every)
		if now := time.Now(); at.Before(now) {
			at = now
		}
		timer.Reset(time.Until(at))
	}
}

// tick reads the changes hash's version and, when it moved since the last
// read of the fields (*version) or a field was never read, the fields,
// and tells the subscribers of those that moved. A field read for the
// first time may have moved since its subscriber began: it is told, once,
// to look.
func (w *watcher) tick(ctx context.Context, subs []*watch, fields []string, last map[string]int64, version *int64) {
	v, err := w.c.store.Version(ctx)
	if err != nil {
		return
	}
	fresh := v != *version
	for _, f := range fields {
		if _, ok := last[f]; !ok {
			fresh = true
		}
	}
	if !fresh {
		return
	}
	vals, err := w.c.store.Changes(ctx, fields)
	if err != nil {
		return
	}
	*version = v
	now := make(map[string]int64, len(fields))
	for i, f := range fields {
		now[f] = vals[i]
	}
	for _, s := range subs {
		if v, ok := last[s.field]; !ok || v != now[s.field] {
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
	for f, v := range now {
		last[f] = v
	}
}
