package delayq

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// Single Send and SendAsync calls from many goroutines are
// coalesced, like kafka-go's Writer: flusher goroutines each take the first
// queued call and every other call already queued (up to coalesceMax), and
// write them as one SendBatch would: generated ids steered into one
// partition, so such a batch is a command or three whatever its size, and
// given ids in their own partitions, two commands or so for each; one
// round trip when due a minute or more ahead, two otherwise. Calls that arrive
// while batches are in flight form the next ones, so batches grow with load
// and a lone call waits for nothing. Up to coalesceFlushers batches are in
// flight at once, at most coalescePartial of them not full; the queue holds
// coalesceQueue calls, beyond which callers wait.
const (
	coalesceFlushers = 16
	coalescePartial  = 2
	coalesceMax      = 512
	coalesceQueue    = 4096
	coalesceYields   = 2
)

// coalescer joins a client's concurrent Send and SendAsync calls
// into batches (see above): the queue, the flushers that write its
// batches with c, and their stop at Client.Close.
type coalescer struct {
	c *Client

	startOnce sync.Once
	enq       chan *enqReq
	gathering chan struct{}  // the turn to gather a batch (capacity 1)
	partial   chan struct{}  // slots for batches written before they are full
	sendMu    sync.Mutex     // orders requests being queued with Close
	senders   sync.WaitGroup // requests being queued
	closed    chan struct{}  // closed by Close: no new request
	shut      chan struct{}  // closed once no request is being queued: flushers drain and stop
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// enqReq is one call's message, prepared at the call: its due time and
// given id (in res) are not computed again by the flusher.
type enqReq struct {
	ctx  context.Context
	m    Message
	res  SendResult
	done chan SendResult  // Send waits here...
	cb   func(SendResult) // ...or SendAsync's or SendAsync's callback is called
}

// start makes the queue and starts the flushers, once, at the first
// request.
func (co *coalescer) start() {
	co.startOnce.Do(func() {
		co.enq = make(chan *enqReq, coalesceQueue)
		co.gathering = make(chan struct{}, 1)
		co.partial = make(chan struct{}, coalescePartial)
		for range coalesceFlushers {
			co.wg.Add(1)
			go co.flusher()
		}
	})
}

// flusher gathers a batch while it holds the gathering turn (one flusher
// at a time, so that waiting calls join one batch rather than spread over
// all), then writes it. A full batch goes at once; a partial one only while
// fewer than coalescePartial partial batches are in flight, gathering more
// calls meanwhile: light load makes a few growing batches (group commit),
// heavy load many full ones in parallel.
func (co *coalescer) flusher() {
	defer co.wg.Done()
	batch := make([]*enqReq, 0, coalesceMax)
	var buf flushBuf
	for {
		select {
		case <-co.shut:
			co.drain(batch, &buf)
			return
		case co.gathering <- struct{}{}:
		}
		var first *enqReq
		select {
		case <-co.shut:
			<-co.gathering
			co.drain(batch, &buf)
			return
		case first = <-co.enq:
		}
		batch = append(batch[:0], first)
		partial := false
	gather:
		for len(batch) < coalesceMax {
			select {
			case r := <-co.enq:
				batch = append(batch, r)
				continue
			default:
			}
			select {
			case r := <-co.enq:
				batch = append(batch, r)
			case co.partial <- struct{}{}:
				partial = true
				batch = co.linger(batch)
				break gather
			}
		}
		<-co.gathering
		co.flush(batch, &buf)
		if partial {
			<-co.partial
		}
	}
}

// linger lets calls that are ready to be made join batch before it goes:
// the slot it just got was freed by a batch whose callers are now runnable
// and about to enqueue again (the freeing goroutine readied this one last,
// so it would run first). It yields up to coalesceYields times, taking
// what was queued meanwhile, and stops at a yield that brought nothing:
// a few microseconds, not a timer. It pays: single calls measured faster
// with it, and at half the commands a message (see docs/benchmarks.md,
// Measured design choices).
func (co *coalescer) linger(batch []*enqReq) []*enqReq {
	for range coalesceYields {
		runtime.Gosched()
		n := len(batch)
	take:
		for len(batch) < coalesceMax {
			select {
			case r := <-co.enq:
				batch = append(batch, r)
			default:
				break take
			}
		}
		if len(batch) == n {
			break
		}
	}
	return batch
}

// drain writes what is still queued once Close has shut the queue.
func (co *coalescer) drain(batch []*enqReq, buf *flushBuf) {
	for {
		batch = batch[:0]
		for len(batch) < coalesceMax && len(co.enq) > 0 {
			select {
			case r := <-co.enq:
				batch = append(batch, r)
			default:
			}
		}
		if len(batch) == 0 {
			return
		}
		co.flush(batch, buf)
	}
}

// flushBuf is a flusher's scratch space, reused from one flush to the
// next.
type flushBuf struct {
	live   []*enqReq
	writes []pendingWrite
}

// flush writes the batch's prepared messages together and reports each
// outcome to its caller.
func (co *coalescer) flush(batch []*enqReq, buf *flushBuf) {
	live := buf.live[:0]
	for _, r := range batch {
		// An Send caller gave up before the write: skip it. (SendAsync
		// requests carry a context that is never cancelled.)
		if r.ctx.Err() != nil {
			r.done <- SendResult{ID: r.res.ID, Err: r.ctx.Err()}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	n := len(live)
	ws := slices.Grow(buf.writes[:0], n)[:n]
	for i, r := range live {
		ws[i] = pendingWrite{msg: &r.m, res: r.res}
	}
	// The write is bounded as a whole: a dial and three round trips (the
	// most an enqueue takes, when duplicates must be told apart), after
	// the wait for Redis of an outage (Options.RetryFor). (Going
	// without this deadline, to save a timer per batch, measured no
	// faster: see docs/benchmarks.md, Measured design choices.)
	wctx, cancel := context.WithTimeout(context.Background(), max(co.c.opts.RetryFor, 0)+co.c.opts.DialTimeout+3*(co.c.opts.WriteTimeout+co.c.opts.ReadTimeout))
	err := co.c.write(wctx, co.c.opts.Now(), ws)
	cancel()
	if err != nil {
		for i := range ws {
			ws[i].res.Err = err
		}
	}
	var cbs []int
	for i, r := range live {
		if r.cb == nil {
			r.done <- ws[i].res
			continue
		}
		cbs = append(cbs, i)
	}
	if len(cbs) == 0 {
		clear(live) // drop the requests, their bodies and results: buf outlives the batch
		clear(ws)
		buf.live, buf.writes = live, ws
		return
	}
	// live and ws now belong to the callbacks.
	buf.live, buf.writes = nil, nil
	// Callbacks run off the flusher, so that one waiting (say, enqueueing
	// again into a full queue) cannot stop the queue from being emptied.
	// Close waits for them.
	co.wg.Add(1)
	go func() {
		defer co.wg.Done()
		for _, i := range cbs {
			live[i].cb(ws[i].res)
		}
	}()
}

// send queues r for the flushers. Close refuses new requests first, then
// waits for the ones being queued before it shuts the queue, so a request
// is either queued before the flushers' last drain or refused; a request
// made from an SendAsync callback during Close is refused at once
// rather than wait on a queue only the flushers empty.
func (co *coalescer) send(ctx context.Context, r *enqReq) error {
	co.start()
	co.sendMu.Lock()
	select {
	case <-co.closed:
		co.sendMu.Unlock()
		return fmt.Errorf("enqueue: %w", ErrClosed)
	default:
	}
	co.senders.Add(1)
	co.sendMu.Unlock()
	defer co.senders.Done()
	select {
	case co.enq <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close refuses new requests, lets the ones being queued in, and waits
// for the flushers to write what is queued and for the callbacks to
// return. It reports whether this call closed the coalescer (the first
// call does).
func (co *coalescer) close() bool {
	first := false
	co.closeOnce.Do(func() {
		first = true
		co.sendMu.Lock()
		close(co.closed)
		co.sendMu.Unlock()
		co.senders.Wait() // calls already queueing get in (flushers still drain)
		close(co.shut)
		co.wg.Wait() // the flushers write what is queued, then return
	})
	return first
}
