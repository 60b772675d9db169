package ui

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq"
)

// overviewView is the overview page.
type overviewView struct {
	base
	Proxies []delayq.ProxyHealth // of the worker serving the page; none standalone
	Topics  []topicRow
	Total   int64 // topics known, shown or not
	Sum     topicRow
}

// topicRow is one topic of the overview.
type topicRow struct {
	Name                      string
	Partitions                int // the partitions that may hold messages
	Count                     int // the stored partition count
	ChangingTo                int // the count a running change goes to; 0 if none
	Scheduled, InFlight, Dead int64
	Live, Leaving             int64 // consumers
	Owned                     int   // partitions with a lease holder
	Lag                       time.Duration
	Err                       string // why the counts are missing
	// Paused: the topic is paused (delayq.Admin.Pause), until PausedUntil
	// or, when that is zero, until resumed.
	Paused      bool
	PausedUntil time.Time
	// Limits are the topic's fleet-wide limits; on the overview without
	// what runs against them (Started and Running are 0).
	Limits limitsView
}

// setControls sets row's pause and its limits, without what runs against
// them, from the topic's stats.
func (t *topicRow) setControls(st *delayq.TopicStats) {
	if t.Paused = st.Pause.Paused; t.Paused && st.Pause.PausedUntil != nil {
		t.PausedUntil = *st.Pause.PausedUntil
	}
	t.Limits = limitsOf(st.Limits.Limits)
}

// Unowned is the number of partitions no one holds.
func (t topicRow) Unowned() int { return t.Partitions - t.Owned }

// readOverview reads every topic (up to maxTopics) with its counters and
// controls (pause and limits): two round trips for the topics, then
// delayq.Inspector.Stats of each, a few topics at a time.
func (s *Server) readOverview(ctx context.Context) (*overviewView, error) {
	if s.closed.Load() {
		return nil, delayq.ErrClosed
	}
	now := s.o.Now()
	list, err := s.ins.ListTopics(ctx, maxTopics)
	if err != nil {
		return nil, err
	}
	heads := list.Topics
	slices.SortFunc(heads, func(a, b delayq.TopicInfo) int { return strings.Compare(a.Name, b.Name) })
	v := &overviewView{Topics: make([]topicRow, len(heads)), Total: list.Total}
	if s.o.Proxies != nil {
		v.Proxies = s.o.Proxies()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, statsWorkers)
	for i, h := range heads {
		row := &v.Topics[i]
		*row = topicRow{Name: h.Name, Partitions: span(h), Count: h.Partitions, ChangingTo: h.Next,
			Live: h.Live, Leaving: h.Leaving}
		if h.Partitions <= 0 {
			row.Err = "no metadata"
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, err := s.ins.Stats(ctx, h.Name)
			if err != nil {
				row.Err = err.Error()
				return
			}
			row.setControls(st)
			sumStats(row, st.Partitions, now)
		}()
	}
	wg.Wait()
	for _, r := range v.Topics {
		v.Sum.Scheduled += r.Scheduled
		v.Sum.InFlight += r.InFlight
		v.Sum.Dead += r.Dead
		v.Sum.Partitions += r.Partitions
		v.Sum.Owned += r.Owned
		v.Sum.Lag = max(v.Sum.Lag, r.Lag)
	}
	return v, nil
}

// sumStats adds the partitions' counters to row: the lag is how long the
// most overdue scheduled message has waited past its due time.
func sumStats(row *topicRow, st []delayq.PartitionStats, now time.Time) {
	for _, p := range st {
		row.Scheduled += p.Scheduled
		row.InFlight += p.InFlight
		row.Dead += p.Dead
		if p.Owner != "" {
			row.Owned++
		}
		if p.OldestDue != nil {
			row.Lag = max(row.Lag, now.Sub(*p.OldestDue))
		}
	}
}

// topicView is the topic page.
type topicView struct {
	base
	topicRow
	Parts       []partRow
	Members     []memberRow
	MembersMore bool
	Chart       *chart       // nil in the live fragment
	Figures     *figuresView // nil outside a worker
	Change      *changeView  // nil when no change of the count runs
}

// changeView is the progress of a change of the partition count.
type changeView struct {
	Sources     []int // the partitions the change moves messages out of
	Marked      []int // those of them with nothing left to move
	Moved       int64 // the messages moved so far
	Left        int64 // the messages in the sources not marked
	ToMove      int64 // of Left, those to move: exact or an estimate
	ToMoveExact bool
	Owned       int // the sources not marked whose lease a consumer holds
	Since       time.Time
	Cancelled   bool          // the reverse of a cancelled change
	SettleLeft  time.Duration // until the change may end; 0: settled
	Idle        bool          // no consumer runs: nothing moves
}

// partRow is one partition of the topic page.
type partRow struct {
	P                         int
	Owner                     string
	Token                     int64
	LeaseUntil                time.Time // zero: no lease
	Scheduled, InFlight, Dead int64
	OldestDue                 time.Time
	Late                      time.Duration // how long the oldest has been due
}

// memberRow is one consumer of the topic.
type memberRow struct {
	ID       string
	Expires  time.Time // its heartbeat expires
	LastBeat time.Time // estimated: Expires minus the lease
	State    string    // live, leaving or expired
	Owns     int
}

// figuresView is what a worker adds to the topic page.
type figuresView struct {
	Consumes bool // this worker consumes the topic
	Totals   Counters
	Rates    Rates
	P99      time.Duration
	P99N     int // deliveries the p99 is computed from
}

// readTopic reads the topic page: the topic's stats (with its controls
// and the progress of a change of its count) and its consumers, and
// with chart the due counts.
func (s *Server) readTopic(ctx context.Context, topic string, n int, withChart bool) (*topicView, error) {
	now := s.o.Now()
	st, err := s.ins.Stats(ctx, topic)
	if err != nil {
		return nil, err
	}
	cons, err := s.ins.Consumers(ctx, topic, maxMembers)
	if err != nil {
		return nil, err
	}
	v := &topicView{topicRow: topicRow{Name: topic, Partitions: n, Count: st.Count, ChangingTo: st.ChangingTo}}
	sumStats(&v.topicRow, st.Partitions, now)
	v.setControls(st)
	v.Limits.Started, v.Limits.Running = st.Limits.Started, st.Limits.Running
	if ch := st.Change; ch != nil && ch.Since != nil {
		v.Change = &changeView{
			Sources: ch.Sources, Marked: ch.Moved, Moved: ch.MovedMessages, Left: ch.Left, ToMove: ch.ToMove,
			ToMoveExact: ch.ToMoveExact, Owned: ch.OwnedSources, Since: *ch.Since, Cancelled: ch.Cancelled,
		}
		if ch.SettleUntil != nil {
			v.Change.SettleLeft = max(ch.SettleUntil.Sub(now), 0)
		}
	}
	owns := map[string]int{}
	for _, ps := range st.Partitions {
		p := ps.Partition
		row := partRow{P: p, Owner: ps.Owner, Token: ps.Token, Scheduled: ps.Scheduled, InFlight: ps.InFlight, Dead: ps.Dead}
		if p < len(cons.LeaseTTLs) && cons.LeaseTTLs[p] > 0 {
			row.LeaseUntil = now.Add(cons.LeaseTTLs[p])
		}
		if ps.OldestDue != nil {
			row.OldestDue = *ps.OldestDue
			row.Late = max(now.Sub(row.OldestDue), 0)
		}
		if ps.Owner != "" {
			owns[ps.Owner]++
		}
		v.Parts = append(v.Parts, row)
	}
	v.MembersMore = cons.More
	for _, m := range cons.Members {
		row := memberRow{ID: m.ID, Expires: m.Expires, LastBeat: m.Expires.Add(-s.o.Lease), State: "live", Owns: owns[m.ID]}
		switch {
		case !now.Before(m.Expires):
			row.State = "expired"
		case m.Leaving:
			row.State = "leaving"
		}
		if row.State != "expired" {
			v.Live++
		}
		v.Members = append(v.Members, row)
	}
	if v.Change != nil {
		v.Change.Idle = v.Live == 0 && v.Change.Owned == 0
	}
	if s.o.Counters != nil {
		v.Figures = s.figures(topic, now)
	}
	if withChart {
		if v.Chart, err = s.readChart(ctx, topic, now); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// figures returns the worker's figures of topic.
func (s *Server) figures(topic string, now time.Time) *figuresView {
	c, ok := s.o.Counters(topic)
	f := &figuresView{Consumes: ok, Totals: c}
	if !ok {
		return f
	}
	f.Rates = s.rates.observe(topic, now, c)
	if s.o.Lateness != nil {
		f.P99, f.P99N = s.o.Lateness.P99(topic, now.Add(-latenessWindow))
	}
	return f
}
