package ui

import (
	"slices"
	"sync"
	"time"
)

// Counters are the cumulative delivery counters of one topic's consumers
// in one process (see delayq.ConsumerStats).
type Counters struct {
	Delivered, Acked, Retried, Dead int64
}

// Windows of the worker figures.
const (
	rateWindow     = time.Minute     // rates are averaged over about the last minute
	minRateWindow  = 2 * time.Second // ... once samples span at least this
	sampleEvery    = time.Second     // at most one sample per topic per second
	latenessWindow = 5 * time.Minute // the p99 is over the last 5 minutes
	latenessRing   = 4096            // observations kept per topic
)

// Lateness keeps the lateness of the latest deliveries of each topic (up
// to 4096 per topic, over the last 5 minutes) for the dashboard's p99. The
// zero value is not usable: use NewLateness. It is safe for concurrent
// use.
type Lateness struct {
	mu      sync.Mutex
	byTopic map[string]*latenessRingBuf
}

// latenessRingBuf is a ring of observations.
type latenessRingBuf struct {
	at   [latenessRing]int64 // unix ms of each observation
	v    [latenessRing]time.Duration
	next int
	n    int
}

// NewLateness returns an empty Lateness.
func NewLateness() *Lateness {
	return &Lateness{byTopic: map[string]*latenessRingBuf{}}
}

// Observe records that a delivery of topic started at, late by d
// (negative values count as 0).
func (l *Lateness) Observe(topic string, at time.Time, d time.Duration) {
	d = max(d, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byTopic[topic]
	if r == nil {
		r = &latenessRingBuf{}
		l.byTopic[topic] = r
	}
	r.at[r.next], r.v[r.next] = at.UnixMilli(), d
	r.next = (r.next + 1) % latenessRing
	r.n = min(r.n+1, latenessRing)
}

// P99 returns the 99th percentile of the lateness of topic's deliveries
// since since, and how many it is computed from (0: none).
func (l *Lateness) P99(topic string, since time.Time) (time.Duration, int) {
	l.mu.Lock()
	r := l.byTopic[topic]
	var vals []time.Duration
	if r != nil {
		cut := since.UnixMilli()
		vals = make([]time.Duration, 0, r.n)
		for i := range r.n {
			if r.at[i] >= cut {
				vals = append(vals, r.v[i])
			}
		}
	}
	l.mu.Unlock()
	if len(vals) == 0 {
		return 0, 0
	}
	slices.Sort(vals)
	// The nearest rank: the smallest value with at least 99% at or below it.
	k := (99*len(vals) + 99) / 100
	return vals[k-1], len(vals)
}

// sample is the counters of a topic at a time.
type sample struct {
	at time.Time
	c  Counters
}

// rates turns counter samples, taken when pages are rendered, into rates.
// It is safe for concurrent use.
type rates struct {
	mu   sync.Mutex
	hist map[string][]sample
}

func newRates() *rates { return &rates{hist: map[string][]sample{}} }

// Rates are per-second rates over Window.
type Rates struct {
	Delivered, Acked, Retried, Dead float64
	Window                          time.Duration // 0: not measured yet
}

// observe records c for topic at now and returns the rates since the
// oldest sample of the last minute (or, when samples are sparse, since
// the newest one before it, up to two minutes old).
func (r *rates) observe(topic string, now time.Time, c Counters) Rates {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hist[topic]
	// Forget samples older than two windows, and any from before a
	// counter reset (a restarted consumer counts from 0 again).
	keep := h[:0]
	for _, s := range h {
		if now.Sub(s.at) <= 2*rateWindow && s.c.Delivered <= c.Delivered && s.c.Acked <= c.Acked {
			keep = append(keep, s)
		}
	}
	h = keep
	var base *sample
	for i := range h {
		if now.Sub(h[i].at) <= rateWindow {
			if now.Sub(h[i].at) < minRateWindow && i > 0 {
				base = &h[i-1]
			} else {
				base = &h[i]
			}
			break
		}
	}
	if base == nil && len(h) > 0 {
		base = &h[len(h)-1]
	}
	var out Rates
	if base != nil && now.Sub(base.at) >= minRateWindow {
		dt := now.Sub(base.at)
		per := func(a, b int64) float64 { return float64(b-a) / dt.Seconds() }
		out = Rates{
			Delivered: per(base.c.Delivered, c.Delivered), Acked: per(base.c.Acked, c.Acked),
			Retried: per(base.c.Retried, c.Retried), Dead: per(base.c.Dead, c.Dead),
			Window: dt,
		}
	}
	if len(h) == 0 || now.Sub(h[len(h)-1].at) >= sampleEvery {
		h = append(h, sample{at: now, c: c})
	}
	r.hist[topic] = h
	return out
}
