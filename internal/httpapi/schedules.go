package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/delayq/delayq"
)

// Schedule routes (see the package documentation):
//
//	GET    /v1/topics/{topic}/schedules               200 {"schedules":[...]}
//	GET    /v1/topics/{topic}/schedules/{name}        200 schedule
//	PUT    /v1/topics/{topic}/schedules/{name}        200 schedule (added; ?replace=true: or replaced)
//	POST   /v1/topics/{topic}/schedules/{name}/pause  200 schedule
//	POST   /v1/topics/{topic}/schedules/{name}/resume 200 schedule
//	DELETE /v1/topics/{topic}/schedules/{name}        204
//
// A PUT body is {"spec": "*/10 * * * *", "tz": "Asia/Shanghai", "body":
// "text", "max_attempts": 5, "policy": "skip"}: spec is required, the body
// is "body" or "body_base64". A PUT of a name the topic has is refused
// with 409 unless the query has replace=true; a bad spec, tz, policy or
// max_attempts is a 400 whose "field" names it.
func (s *server) routeSchedules(m *http.ServeMux) {
	m.HandleFunc("GET /v1/topics/{topic}/schedules", s.listSchedules)
	m.HandleFunc("GET /v1/topics/{topic}/schedules/{name}", s.getSchedule)
	m.HandleFunc("PUT /v1/topics/{topic}/schedules/{name}", s.putSchedule)
	m.HandleFunc("POST /v1/topics/{topic}/schedules/{name}/pause", s.pauseSchedule)
	m.HandleFunc("POST /v1/topics/{topic}/schedules/{name}/resume", s.pauseSchedule)
	m.HandleFunc("DELETE /v1/topics/{topic}/schedules/{name}", s.deleteSchedule)
}

// maxScheduleRequest bounds a PUT body beyond its message body.
const maxScheduleRequest = 64 << 10

// listSchedules handles GET /v1/topics/{topic}/schedules.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	all, err := c.Inspector().Schedules(r.Context(), topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if all == nil {
		all = []delayq.ScheduleInfo{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": all})
}

// getSchedule handles GET /v1/topics/{topic}/schedules/{name}.
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	in, err := c.Inspector().GetSchedule(r.Context(), topic, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// putSchedule handles PUT /v1/topics/{topic}/schedules/{name}.
func (s *server) putSchedule(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	obj, err := decodeObject(http.MaxBytesReader(w, r.Body, int64(2*s.maxBody+maxScheduleRequest)),
		"spec", "tz", fieldBody, fieldBodyBase64, "max_attempts", "policy")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sc := delayq.Schedule{Name: r.PathValue("name")}
	if _, ok := obj["spec"]; !ok {
		s.fail(w, r, badField("spec", "spec is required: a cron spec such as \"*/10 * * * *\" or \"@every 30s\""))
		return
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"spec", &sc.Spec}, {"tz", &sc.TimeZone}, {"policy", (*string)(&sc.Policy)}} {
		if raw, ok := obj[f.name]; ok {
			if *f.dst, err = decodeString(f.name, raw); err != nil {
				s.fail(w, r, err)
				return
			}
		}
	}
	if raw, ok := obj["max_attempts"]; ok {
		if err := json.Unmarshal(raw, &sc.MaxAttempts); err != nil {
			s.fail(w, r, badField("max_attempts", "max_attempts must be an integer"))
			return
		}
	}
	if sc.Body, err = decodeBody(obj, s.maxBody); err != nil {
		s.fail(w, r, err)
		return
	}
	replace := false
	if v := r.URL.Query().Get("replace"); v != "" {
		if replace, err = strconv.ParseBool(v); err != nil {
			s.fail(w, r, badField("replace", "replace %q is not a boolean: want true or false", v))
			return
		}
	}
	if err := delayq.ValidateSchedule(sc); err != nil {
		s.fail(w, r, badField(scheduleField(sc), "%s", fieldMessage(err, scheduleWords)))
		return
	}
	var in *delayq.ScheduleInfo
	if replace {
		in, err = c.Admin().SetSchedule(r.Context(), topic, sc)
	} else if in, err = c.Admin().AddSchedule(r.Context(), topic, sc); errors.Is(err, delayq.ErrExists) {
		err = fmt.Errorf("%w: PUT with ?replace=true to replace it", err)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// scheduleWords name the fields of a schedule in the API's errors, as a
// request names them: never the library's field names.
var scheduleWords = map[string]string{
	"Schedule.Spec": "spec", "Schedule.TimeZone": "time zone",
	"Schedule.Policy": "policy", "Schedule.MaxAttempts": "max attempts",
}

// fieldMessage returns the text of err, naming the field of a
// *delayq.FieldError by words[field] when words has it.
func fieldMessage(err error, words map[string]string) string {
	var fe *delayq.FieldError
	if !errors.As(err, &fe) || words[fe.Field] == "" {
		return err.Error()
	}
	of := ""
	if fe.Of != "" {
		of = fe.Of + ": "
	}
	return fmt.Sprintf("%v: %s%s %s %s", delayq.ErrInvalid, of, words[fe.Field], fe.Value, fe.Reason)
}

// scheduleField names the request field of sc that ValidateSchedule
// refuses: it checks the fields one at a time, each with the others
// valid ("" for the name, which comes from the path).
func scheduleField(sc delayq.Schedule) string {
	ok := delayq.Schedule{Name: sc.Name, Spec: "@hourly"}
	if delayq.ValidateSchedule(ok) != nil {
		return ""
	}
	for _, f := range []struct {
		name string
		set  func(*delayq.Schedule)
	}{
		{"tz", func(s *delayq.Schedule) { s.TimeZone = sc.TimeZone }},
		{"spec", func(s *delayq.Schedule) { s.Spec = sc.Spec }},
		{"policy", func(s *delayq.Schedule) { s.Policy = sc.Policy }},
		{"max_attempts", func(s *delayq.Schedule) { s.MaxAttempts = sc.MaxAttempts }},
	} {
		f.set(&ok)
		if delayq.ValidateSchedule(ok) != nil {
			return f.name
		}
	}
	return ""
}

// pauseSchedule handles POST .../schedules/{name}/pause and .../resume.
func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	var err error
	if r.Pattern == "POST /v1/topics/{topic}/schedules/{name}/pause" {
		err = c.Admin().PauseSchedule(r.Context(), topic, name)
	} else {
		err = c.Admin().ResumeSchedule(r.Context(), topic, name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.getSchedule(w, r)
}

// deleteSchedule handles DELETE /v1/topics/{topic}/schedules/{name}.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	if err := c.Admin().DeleteSchedule(r.Context(), topic, r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
