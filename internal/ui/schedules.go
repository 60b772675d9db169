package ui

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/delayq/delayq"
)

// maxSchedules bounds the schedules the schedules page lists.
const maxSchedules = 500

// routeSchedules registers the schedules page and its actions.
func (s *Server) routeSchedules(m *http.ServeMux) {
	m.HandleFunc("GET /ui/topics/{topic}/schedules", s.withTopic(s.schedulesPage))
	m.HandleFunc("POST /ui/topics/{topic}/schedules/{action}", s.withTopic(s.scheduleAction))
}

// schedulesView is the schedules page.
type schedulesView struct {
	base
	Topic string
	Total int
	Rows  []scheduleRow
}

// scheduleRow is one schedule of the page.
type scheduleRow struct {
	Name, Spec, TZ, Policy, Source string
	Paused                         bool
	MaxAttempts                    int
	Next                           []time.Time
	Updated                        time.Time
	Preview                        string
}

// schedulesPage handles GET /ui/topics/{topic}/schedules: the topic's
// schedules, sorted by name, with their next three occurrences.
func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request, t topicReq) {
	all, err := s.ins.Schedules(t.ctx, t.topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := &schedulesView{Topic: t.topic, Total: len(all)}
	now := s.o.Now()
	for i, sc := range all {
		if i == maxSchedules {
			break
		}
		tz := sc.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		v.Rows = append(v.Rows, scheduleRow{
			Name: sc.Name, Spec: sc.Spec, TZ: tz, Policy: string(sc.Policy), Source: sc.Source,
			Paused: sc.Paused, MaxAttempts: sc.MaxAttempts, Next: sc.Next(now, 3), Updated: sc.Updated,
			Preview: preview(sc.Body, 60),
		})
	}
	s.render(w, r, http.StatusOK, "schedules", v)
}

// scheduleActions are the actions of the schedules page: the question
// each asks first and what it says when done (both take the name; the
// question the topic too).
var scheduleActions = map[string]struct {
	run              func(a *delayq.Admin, ctx context.Context, topic, name string) error
	ask, button, did string
}{
	"pause":  {(*delayq.Admin).PauseSchedule, "Pause schedule %q of topic %s? Its pending occurrence is removed; none comes until it is resumed.", "Pause", "Paused %s."},
	"resume": {(*delayq.Admin).ResumeSchedule, "Resume schedule %q of topic %s from its next occurrence?", "Resume", "Resumed %s."},
	"delete": {(*delayq.Admin).DeleteSchedule, "Delete schedule %q of topic %s and its pending occurrence?", "Delete", "Deleted %s."},
}

// scheduleAction handles POST /ui/topics/{topic}/schedules/{action} with
// form field name: pause, resume or delete.
func (s *Server) scheduleAction(w http.ResponseWriter, r *http.Request, t topicReq) {
	back := topicURL(t.topic, "/schedules")
	action := r.PathValue("action")
	a, ok := scheduleActions[action]
	if !ok {
		s.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No action %q.", action))
		return
	}
	name := r.PostFormValue("name")
	if s.confirmed(w, r, fmt.Sprintf(a.ask, name, t.topic), a.button, back, field{"name", name}) {
		err := a.run(s.c.Admin(), t.ctx, t.topic, name)
		s.done(w, r, back, err, a.did, name)
	}
}
