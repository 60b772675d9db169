package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

// fail renders the error page of err: 404 for an unknown topic, 504 when
// Redis was too slow, 500 (logged) otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errNoTopic), errors.Is(err, delayq.ErrNoTopic):
		s.errorPage(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		s.errorPage(w, r, http.StatusGatewayTimeout, "Redis did not answer in time: "+err.Error())
	default:
		if r.Context().Err() == nil {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		s.errorPage(w, r, http.StatusInternalServerError, "Error: "+err.Error())
	}
}

// overview handles GET /ui/.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	v, err := s.readOverview(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", v)
}

// lookup handles GET /ui/lookup?topic=T&id=ID, the overview's form.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	topic := q.Get("topic")
	if err := partition.ValidateTopic(topic); err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Topic: "+err.Error())
		return
	}
	http.Redirect(w, r, messageURL(topic, q.Get("id")), http.StatusSeeOther)
}

// topicURL is the path of a topic page, plus suffix.
func topicURL(topic, suffix string) string {
	return "/ui/topics/" + url.PathEscape(topic) + suffix
}

// messageURL is the page of message id.
func messageURL(topic, id string) string {
	return topicURL(topic, "/message?id="+url.QueryEscape(id))
}

// topicPage handles GET /ui/topics/{topic}.
func (s *Server) topicPage(w http.ResponseWriter, r *http.Request, t topicReq) {
	ctx, topic, n := t.ctx, t.topic, t.n
	v, err := s.readTopic(ctx, topic, n, !isFragment(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "topic", v)
}

// messageView is the message page.
type messageView struct {
	base
	Topic    string
	N        int
	ID       string // looked up; "" shows only the form
	Info     *delayq.Info
	Body     *bodyView
	NotFound bool
	Problem  string // why the id cannot be looked up
}

// messagePage handles GET /ui/topics/{topic}/message?id=ID.
func (s *Server) messagePage(w http.ResponseWriter, r *http.Request, t topicReq) {
	ctx, topic, n := t.ctx, t.topic, t.n
	v := &messageView{Topic: topic, N: n, ID: r.URL.Query().Get("id")}
	code := http.StatusOK
	if v.ID != "" {
		if err := partition.ValidateID(v.ID); err != nil {
			v.Problem, code = "Not a valid id: "+err.Error(), http.StatusBadRequest
		} else if v.Info, err = s.c.Get(ctx, topic, v.ID); errors.Is(err, delayq.ErrNotFound) {
			v.NotFound, code = true, http.StatusNotFound
		} else if err != nil {
			s.fail(w, r, err)
			return
		} else {
			v.Body = newBodyView(v.Info.Body)
		}
	}
	s.render(w, r, code, "message", v)
}

// messageBody handles GET /ui/topics/{topic}/message/body?id=ID: the body
// as an attachment that no browser renders.
func (s *Server) messageBody(w http.ResponseWriter, r *http.Request, t topicReq) {
	id := r.URL.Query().Get("id")
	in, err := s.c.Get(t.ctx, t.topic, id)
	switch {
	case errors.Is(err, delayq.ErrNotFound), errors.Is(err, delayq.ErrInvalid):
		s.errorPage(w, r, http.StatusNotFound, err.Error())
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="body.bin"`)
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Content-Length", strconv.Itoa(len(in.Body)))
	w.Write(in.Body)
}

// scheduledView is a page of the next scheduled messages.
type scheduledView struct {
	Topic string
	N     int
	base
	Rows  []schedRow
	Limit int
	Next  string // URL of the next page, "" for none
	Start bool   // this is the first page
}

// schedRow is one scheduled message.
type schedRow struct {
	ID       string
	P        int
	Due      time.Time
	Attempts int
	Preview  string
	Size     int
	Missing  bool // an index entry without its record
	Segment  bool
}

// scheduledPage handles GET /ui/topics/{topic}/scheduled?due=D&skip=P:K,...&limit=N.
func (s *Server) scheduledPage(w http.ResponseWriter, r *http.Request, t topicReq) {
	ctx, topic, n := t.ctx, t.topic, t.n
	q := r.URL.Query()
	limit := intParam(q.Get("limit"), defaultPage, maxPage)
	cur := parseCursor(q.Get("due"), q.Get("skip"), n)
	page, err := s.ins.ListScheduled(ctx, topic, cur, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := &scheduledView{Topic: topic, N: n, Limit: limit, Start: q.Get("due") == ""}
	for _, e := range page.Entries {
		row := schedRow{ID: e.ID, P: e.Partition, Due: e.Due, Segment: e.Segment, Missing: e.Info == nil}
		if in := e.Info; in != nil {
			row.Attempts, row.Size, row.Preview = in.Attempts, len(in.Body), preview(in.Body, 80)
		}
		v.Rows = append(v.Rows, row)
	}
	if page.More {
		v.Next = topicURL(topic, "/scheduled?"+formatCursor(page.Next, limit))
	}
	s.render(w, r, http.StatusOK, "scheduled", v)
}

// parseCursor reads the due and skip parameters of a scheduled page;
// anything malformed reads as the start.
func parseCursor(due, skip string, n int) delayq.ScheduledCursor {
	var c delayq.ScheduledCursor
	d, err := strconv.ParseInt(due, 10, 64)
	if err != nil || d < 0 {
		return c
	}
	c.Due, c.Skip = d, map[int]int{}
	for _, f := range strings.Split(skip, ",") {
		ps, ks, ok := strings.Cut(f, ":")
		p, err1 := strconv.Atoi(ps)
		k, err2 := strconv.Atoi(ks)
		if ok && err1 == nil && err2 == nil && p >= 0 && p < n && k > 0 && k <= 1<<24 {
			c.Skip[p] = k
		}
	}
	return c
}

// formatCursor is the query of the page at c.
func formatCursor(c delayq.ScheduledCursor, limit int) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(c.Skip)) {
		if k := c.Skip[p]; k > 0 {
			parts = append(parts, fmt.Sprintf("%d:%d", p, k))
		}
	}
	q := url.Values{"due": {strconv.FormatInt(c.Due, 10)}, "skip": {strings.Join(parts, ",")}}
	if limit != defaultPage {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q.Encode()
}

// intParam parses a positive count, def when absent or bad, at most top.
func intParam(s string, def, top int) int {
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return def
	}
	return min(v, top)
}

// deadView is the dead letters page.
type deadView struct {
	base
	Topic string
	N     int
	Rows  []deadRow
	Total int64
	Limit int
}

// deadRow is one dead message.
type deadRow struct {
	ID        string
	P         int
	DiedAt    time.Time
	Attempts  int
	LastError string
	Preview   string
	Missing   bool
}

// deadPage handles GET /ui/topics/{topic}/dead?limit=N.
func (s *Server) deadPage(w http.ResponseWriter, r *http.Request, t topicReq) {
	ctx, topic, n := t.ctx, t.topic, t.n
	limit := intParam(r.URL.Query().Get("limit"), defaultDead, maxDead)
	list, err := s.ins.ListRecentDead(ctx, topic, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := s.ins.Stats(ctx, topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := &deadView{Topic: topic, N: n, Limit: limit, Total: st.Dead}
	for _, d := range list {
		row := deadRow{ID: d.ID, P: d.Partition, DiedAt: d.DiedAt, Missing: d.Info == nil}
		if in := d.Info; in != nil {
			row.Attempts, row.LastError, row.Preview = in.Attempts, in.LastError, preview(in.Body, 60)
		}
		v.Rows = append(v.Rows, row)
	}
	s.render(w, r, http.StatusOK, "dead", v)
}
