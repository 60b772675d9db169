package ui

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/poller"
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

// setControls sets row's pause and limits from the topic's controls.
func (t *topicRow) setControls(ctrl store.Controls, now time.Time) {
	if t.Paused = ctrl.PausedAt(now.UnixMilli()); t.Paused && ctrl.PausedUntil > 0 {
		t.PausedUntil = time.UnixMilli(ctrl.PausedUntil)
	}
	t.Limits = limitsOf(ctrl.Limits)
}

// Unowned is the number of partitions no one holds.
func (t topicRow) Unowned() int { return t.Partitions - t.Owned }

// readOverview reads every topic (up to maxTopics), its counters and its
// controls (pause and limits): one round trip for the names, one for
// their heads, then two per topic, a few topics at a time.
func (s *Server) readOverview(ctx context.Context) (*overviewView, error) {
	now := s.o.Now()
	names, total, err := s.st.TopicsRange(ctx, maxTopics)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	heads, err := s.st.TopicHeads(ctx, names, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	v := &overviewView{Topics: make([]topicRow, len(heads)), Total: total}
	if s.o.Proxies != nil {
		v.Proxies = s.o.Proxies()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, statsWorkers)
	for i, h := range heads {
		row := &v.Topics[i]
		*row = topicRow{Name: h.Name, Partitions: h.Partitions, Count: h.Layout.Count, Live: h.Live, Leaving: h.Leaving}
		if h.Layout.Changing() {
			row.ChangingTo = h.Layout.Next
		}
		if h.Partitions <= 0 {
			row.Err = "no metadata"
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, err := s.st.Stats(ctx, h.Name, h.Partitions)
			if err != nil {
				row.Err = err.Error()
				return
			}
			ctrl, _, err := s.st.ReadControls(ctx, h.Name)
			if err != nil {
				row.Err = err.Error()
			}
			row.setControls(ctrl, now)
			sumStats(row, st, now)
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
func sumStats(row *topicRow, st []store.PartitionStats, now time.Time) {
	for _, p := range st {
		row.Scheduled += p.Scheduled
		row.InFlight += p.InFlight
		row.Dead += p.Dead
		if p.Owner != "" {
			row.Owned++
		}
		if p.OldestDue != 0 {
			row.Lag = max(row.Lag, now.Sub(time.UnixMilli(p.OldestDue)))
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
	store.Progress
	Since      time.Time
	Cancelled  bool          // the reverse of a cancelled change
	SettleLeft time.Duration // until the change may end; 0: settled
	Idle       bool          // no consumer runs: nothing moves
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

// readTopic reads the topic page: the partitions' counters, leases,
// members, layout and controls, five round trips, one more for what runs
// against its limits when it has some, and with chart the due counts,
// one more.
func (s *Server) readTopic(ctx context.Context, topic string, n int, withChart bool) (*topicView, error) {
	now := s.o.Now()
	st, err := s.st.Stats(ctx, topic, n)
	if err != nil {
		return nil, err
	}
	ttls, err := s.st.LeaseTTLs(ctx, topic, n)
	if err != nil {
		return nil, err
	}
	members, err := s.st.Members(ctx, topic, maxMembers+1)
	if err != nil {
		return nil, err
	}
	l, err := s.st.ReadLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	v := &topicView{topicRow: topicRow{Name: topic, Partitions: n, Count: l.Count}}
	if l.Changing() {
		v.ChangingTo = l.Next
	}
	sumStats(&v.topicRow, st, now)
	ctrl, _, err := s.st.ReadControls(ctx, topic)
	if err != nil {
		return nil, err
	}
	v.setControls(ctrl, now)
	if v.Limits, err = s.readLimits(ctx, topic, ctrl.Limits, now); err != nil {
		return nil, err
	}
	if l.Changing() && len(st) >= l.Span() {
		pr, err := s.st.ChangeProgress(ctx, topic, l, st)
		if err != nil {
			return nil, err
		}
		since := time.UnixMilli(l.Since)
		v.Change = &changeView{Progress: *pr, Since: since, Cancelled: l.Reversed,
			SettleLeft: max(since.Add(poller.DefaultMoveSettle).Sub(now), 0)}
	}
	owns := map[string]int{}
	for p, ps := range st {
		row := partRow{P: p, Owner: ps.Owner, Token: ps.Token, Scheduled: ps.Scheduled, InFlight: ps.InFlight, Dead: ps.Dead}
		if ttls[p] > 0 {
			row.LeaseUntil = now.Add(time.Duration(ttls[p]) * time.Millisecond)
		}
		if ps.OldestDue != 0 {
			row.OldestDue = time.UnixMilli(ps.OldestDue)
			row.Late = max(now.Sub(row.OldestDue), 0)
		}
		if ps.Owner != "" {
			owns[ps.Owner]++
		}
		v.Parts = append(v.Parts, row)
	}
	if len(members) > maxMembers {
		members, v.MembersMore = members[:maxMembers], true
	}
	for _, m := range members {
		exp := time.UnixMilli(m.Expires)
		row := memberRow{ID: m.ID, Expires: exp, LastBeat: exp.Add(-s.o.Lease), State: "live", Owns: owns[m.ID]}
		switch {
		case !now.Before(exp):
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
		if v.Chart, err = s.readChart(ctx, topic, n, now); err != nil {
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
