package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

// Actions are POSTs of forms. ServeHTTP has checked the session, the CSRF
// token and read-only mode. Every action asks for confirmation: the
// script asks with window.confirm and adds confirm=yes to the form; without
// it (no script), the server answers a confirmation page whose form
// carries the same fields and confirm=yes. The outcome is a one-time
// flash message on the page the action redirects to (303).

// confirmView is the confirmation page.
type confirmView struct {
	base
	Question string
	Action   string // the form's URL
	Fields   []field
	Button   string
	Back     string
}

// field is a hidden form field.
type field struct{ Name, Value string }

// confirmed says whether the form was confirmed; if not, it has rendered
// the confirmation page, which posts the same fields back with confirm=yes.
func (s *Server) confirmed(w http.ResponseWriter, r *http.Request, question, button, back string, fields ...field) bool {
	if r.PostFormValue("confirm") == "yes" {
		return true
	}
	s.render(w, r, http.StatusOK, "confirm", &confirmView{
		Question: question, Action: r.URL.Path, Fields: fields, Button: button, Back: back,
	})
	return false
}

// done sets the flash of an action's outcome and redirects to back.
func (s *Server) done(w http.ResponseWriter, r *http.Request, back string, err error, format string, args ...any) {
	switch {
	case err == nil:
		setFlash(w, r, false, format, args...)
	case errors.Is(err, delayq.ErrNotFound), errors.Is(err, delayq.ErrNotScheduled), errors.Is(err, delayq.ErrInvalid),
		errors.Is(err, delayq.ErrTopicInUse), errors.Is(err, delayq.ErrRunning):
		setFlash(w, r, true, "%v", err)
	default:
		s.log.Error("action failed", "path", r.URL.Path, "err", err)
		setFlash(w, r, true, "Failed: %v", err)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// messageAction handles POST /ui/topics/{topic}/message/{action}:
// delete, run (due now) and reschedule (form field when: a duration from
// now, like 10m, or an RFC 3339 time).
func (s *Server) messageAction(w http.ResponseWriter, r *http.Request, t topicReq) {
	ctx, topic := t.ctx, t.topic
	id := r.PostFormValue("id")
	if err := partition.ValidateID(id); err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Not a valid id: "+err.Error())
		return
	}
	back := messageURL(topic, id)
	idField := field{"id", id}
	switch action := r.PathValue("action"); action {
	case "delete":
		if s.confirmed(w, r, fmt.Sprintf("Delete message %q of topic %s? It will never be delivered.", id, topic), "Delete", back, idField) {
			err := s.c.Delete(ctx, topic, id)
			s.done(w, r, back, err, "Deleted %s.", id)
		}
	case "run":
		if s.confirmed(w, r, fmt.Sprintf("Deliver message %q of topic %s now?", id, topic), "Run now", back, idField) {
			due, err := s.c.Reschedule(ctx, topic, id, s.o.Now())
			s.done(w, r, back, err, "%s is due now (%s).", id, formatTime(due))
		}
	case "reschedule":
		when := strings.TrimSpace(r.PostFormValue("when"))
		at, err := parseWhen(when, s.o.Now())
		if err != nil {
			s.done(w, r, back, fmt.Errorf("%w: %v", delayq.ErrInvalid, err), "")
			return
		}
		q := fmt.Sprintf("Reschedule message %q of topic %s to %s?", id, topic, formatTime(at))
		if s.confirmed(w, r, q, "Reschedule", back, idField, field{"when", at.UTC().Format(time.RFC3339Nano)}) {
			due, err := s.c.Reschedule(ctx, topic, id, at)
			s.done(w, r, back, err, "%s is due at %s.", id, formatTime(due))
		}
	default:
		s.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No action %q.", action))
	}
}

// parseWhen reads a due time: a duration from now (10m, 1h30m) or an RFC
// 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("say when: a duration like 10m, or a time like 2030-01-02T15:04:05Z")
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("negative duration %q", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration like 10m nor a time like 2030-01-02T15:04:05Z", s)
	}
	return t, nil
}

// deadActions are the dead-letter actions of the topic page: what each
// runs, the question it asks first and what it says when done. The
// one-id actions run on the dead message in form field id; their texts
// take the id (and the question the topic), the others' the topic and
// the count.
var deadActions = map[string]struct {
	one              bool
	run              func(a *delayq.Admin, ctx context.Context, topic string, ids ...string) (int, error)
	ask, button, did string
}{
	"requeue":     {true, (*delayq.Admin).RequeueDead, "Requeue dead message %q of topic %s? It becomes due now, its attempts reset.", "Requeue", "Requeued %s."},
	"purge":       {true, (*delayq.Admin).PurgeDead, "Purge dead message %q of topic %s? It is deleted for good.", "Purge", "Purged %s."},
	"requeue-all": {false, (*delayq.Admin).RequeueDead, "Requeue every dead message of topic %s? They become due now, their attempts reset.", "Requeue all", "Requeued %d dead messages."},
	"purge-all":   {false, (*delayq.Admin).PurgeDead, "Purge every dead message of topic %s? They are deleted for good.", "Purge all", "Purged %d dead messages."},
}

// deadAction handles POST /ui/topics/{topic}/dead/{action}: one of
// deadActions.
func (s *Server) deadAction(w http.ResponseWriter, r *http.Request, t topicReq) {
	ctx, topic := t.ctx, t.topic
	back := topicURL(topic, "/dead")
	action := r.PathValue("action")
	a, ok := deadActions[action]
	if !ok {
		s.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No action %q.", action))
		return
	}
	if !a.one {
		if s.confirmed(w, r, fmt.Sprintf(a.ask, topic), a.button, back) {
			k, err := a.run(s.c.Admin(), ctx, topic)
			s.done(w, r, back, err, a.did, k)
		}
		return
	}
	id := r.PostFormValue("id")
	if err := partition.ValidateID(id); err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Not a valid id: "+err.Error())
		return
	}
	if s.confirmed(w, r, fmt.Sprintf(a.ask, id, topic), a.button, back, field{"id", id}) {
		k, err := a.run(s.c.Admin(), ctx, topic, id)
		if err == nil && k == 0 {
			err = fmt.Errorf("%w: %q is not dead in topic %s", delayq.ErrNotFound, id, topic)
		}
		s.done(w, r, back, err, a.did, id)
	}
}

// topicDelete handles POST /ui/topics/{topic}/delete: it deletes the
// topic (Admin.DeleteTopic), with its messages and schedules when form
// field force is "yes", and goes back to the overview; a topic in use
// without force stays, and its page says why.
func (s *Server) topicDelete(w http.ResponseWriter, r *http.Request, t topicReq) {
	force := r.PostFormValue("force") == "yes"
	q := fmt.Sprintf("Delete topic %s? Only an empty topic that no consumer runs on is deleted.", t.topic)
	var fields []field
	if force {
		q = fmt.Sprintf("Delete topic %s with every message and schedule it holds? They are deleted for good; stop its consumers first.", t.topic)
		fields = append(fields, field{"force", "yes"})
	}
	back := topicURL(t.topic, "")
	if !s.confirmed(w, r, q, "Delete topic", back, fields...) {
		return
	}
	u, err := s.c.Admin().DeleteTopic(t.ctx, t.topic, delayq.DeleteTopicOptions{Force: force})
	if err != nil {
		s.done(w, r, back, err, "")
		return
	}
	s.done(w, r, "/ui/", nil, "Deleted topic %s (%d scheduled, %d in flight, %d dead, %d schedules).",
		u.Topic, u.Scheduled, u.InFlight, u.Dead, u.Schedules)
}

// topicPause handles POST /ui/topics/{topic}/pause: form field for is a
// duration from now (15m) or an RFC 3339 time, or empty for a pause until
// resumed (see delayq.Admin.Pause).
func (s *Server) topicPause(w http.ResponseWriter, r *http.Request, t topicReq) {
	back := topicURL(t.topic, "")
	var until time.Time
	q := fmt.Sprintf("Pause topic %s until resumed? No consumer starts a delivery of it meanwhile.", t.topic)
	var fields []field
	if v := strings.TrimSpace(r.PostFormValue("for")); v != "" {
		var err error
		if until, err = parseWhen(v, s.o.Now()); err != nil {
			s.done(w, r, back, fmt.Errorf("%w: %v", delayq.ErrInvalid, err), "")
			return
		}
		q = fmt.Sprintf("Pause topic %s until %s? No consumer starts a delivery of it meanwhile.", t.topic, formatTime(until))
		fields = append(fields, field{"for", until.UTC().Format(time.RFC3339Nano)})
	}
	if !s.confirmed(w, r, q, "Pause", back, fields...) {
		return
	}
	err := s.c.Admin().Pause(t.ctx, t.topic, delayq.PauseOptions{Until: until})
	if until.IsZero() {
		s.done(w, r, back, err, "Paused %s until resumed.", t.topic)
		return
	}
	s.done(w, r, back, err, "Paused %s until %s.", t.topic, formatTime(until))
}

// topicResume handles POST /ui/topics/{topic}/resume.
func (s *Server) topicResume(w http.ResponseWriter, r *http.Request, t topicReq) {
	back := topicURL(t.topic, "")
	if s.confirmed(w, r, fmt.Sprintf("Resume topic %s? What fell due meanwhile is delivered at once.", t.topic), "Resume", back) {
		err := s.c.Admin().Resume(t.ctx, t.topic)
		s.done(w, r, back, err, "Resumed %s.", t.topic)
	}
}
