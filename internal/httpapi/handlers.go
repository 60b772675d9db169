package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
	"github.com/delayq/delayq/partition"
)

// Bounds of request sizes and list lengths.
const (
	maxRescheduleBytes = 64 << 10 // a reschedule body holds one short field
	defaultDeadLimit   = 100
	maxDeadLimit       = 10000
)

// enqueueResponse answers an enqueue or a reschedule.
type enqueueResponse struct {
	ID  string `json:"id"`
	Due string `json:"due"` // RFC 3339 with nanoseconds, UTC
	// Outcome is what an enqueue did (delayq.Outcome): created,
	// replaced or debounced; absent from a reschedule's answer.
	Outcome delayq.Outcome `json:"outcome,omitempty"`
}

// rejectedResponse answers an enqueue of an id that exists, rejected
// (409): errorBody's error, with the id and outcome "rejected"; or, for
// an id of a message delivered already within its uniqueness window
// (delayq.FinishedError), outcome "finished", state "done", when its
// delivery was acked and when the id is free again.
type rejectedResponse struct {
	Error       string         `json:"error"`
	ID          string         `json:"id"`
	Outcome     delayq.Outcome `json:"outcome"`
	State       delayq.State   `json:"state,omitempty"`        // "done", when finished
	Finished    string         `json:"finished,omitempty"`     // when finished
	UniqueUntil string         `json:"unique_until,omitempty"` // when finished
}

// rejected returns the 409 answer of res, an enqueue refused with
// ErrDuplicate: finished or rejected.
func rejected(res delayq.SendResult) rejectedResponse {
	out := rejectedResponse{Error: res.Err.Error(), ID: res.ID, Outcome: delayq.OutcomeRejected}
	var fe *delayq.FinishedError
	if errors.As(res.Err, &fe) {
		out.Outcome, out.State = delayq.OutcomeFinished, delayq.StateDone
		out.Finished = wire.Time(time.UnixMilli(fe.Done.Finished))
		out.UniqueUntil = wire.Time(time.UnixMilli(fe.Done.Until))
	}
	return out
}

// pathSegment escapes s as one path segment, "." and ".." included (which
// clients and servers would otherwise remove from the path).
func pathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.ReplaceAll(s, ".", "%2E")
	}
	return url.PathEscape(s)
}

// topic validates the {topic} of r and returns it with its client; on
// failure it has written the error response.
func (s *server) topic(w http.ResponseWriter, r *http.Request) (string, *delayq.Client, bool) {
	topic := r.PathValue("topic")
	if err := partition.ValidateTopic(topic); err != nil {
		s.fail(w, r, badField("topic", "topic: %v", err))
		return "", nil, false
	}
	if s.o.Client == nil {
		s.fail(w, r, fmt.Errorf("httpapi: Options.Client is nil"))
		return "", nil, false
	}
	c, err := s.o.Client(topic)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, false
	}
	return topic, c, true
}

// topicID is topic, then validates the {id} of r.
func (s *server) topicID(w http.ResponseWriter, r *http.Request) (string, string, *delayq.Client, bool) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return "", "", nil, false
	}
	id := r.PathValue("id") // already unescaped
	if err := partition.ValidateID(id); err != nil {
		s.fail(w, r, badField("id", "id: %v", err))
		return "", "", nil, false
	}
	return topic, id, c, true
}

// enqueue handles POST /v1/topics/{topic}/messages.
func (s *server) enqueue(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	// Cut huge requests off early: a body of maxBody bytes takes about
	// 4/3 of that in base64, more when JSON escapes it.
	body := http.MaxBytesReader(w, r.Body, int64(2*s.maxBody+64<<10))
	q, err := decodeEnqueue(body, s.maxBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var def Duplicates
	if s.o.Duplicates != nil {
		def = s.o.Duplicates(topic)
	}
	m, err := q.message(topic, def)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := c.SendBatch(r.Context(), []delayq.Message{m})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	got := res[0]
	switch {
	case errors.Is(got.Err, delayq.ErrDuplicate):
		writeJSON(w, http.StatusConflict, rejected(got))
		return
	case got.Err != nil:
		s.fail(w, r, got.Err)
		return
	}
	code := http.StatusOK // the message of the id was replaced or debounced
	if got.Outcome == delayq.OutcomeCreated {
		code = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/topics/"+topic+"/messages/"+pathSegment(got.ID))
	writeJSON(w, code, enqueueResponse{ID: got.ID, Due: wire.Time(got.Due), Outcome: got.Outcome})
}

// get handles GET /v1/topics/{topic}/messages/{id}.
func (s *server) get(w http.ResponseWriter, r *http.Request) {
	topic, id, c, ok := s.topicID(w, r)
	if !ok {
		return
	}
	in, err := c.Get(r.Context(), topic, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// delete handles DELETE /v1/topics/{topic}/messages/{id}.
func (s *server) delete(w http.ResponseWriter, r *http.Request) {
	topic, id, c, ok := s.topicID(w, r)
	if !ok {
		return
	}
	if err := c.Delete(r.Context(), topic, id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// reschedule handles POST /v1/topics/{topic}/messages/{id}/reschedule.
func (s *server) reschedule(w http.ResponseWriter, r *http.Request) {
	topic, id, c, ok := s.topicID(w, r)
	if !ok {
		return
	}
	wh, err := decodeReschedule(http.MaxBytesReader(w, r.Body, maxRescheduleBytes))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	at := wh.resolve(time.Now())
	due, err := c.Reschedule(r.Context(), topic, id, at)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, enqueueResponse{ID: id, Due: wire.Time(due)})
}

// stats handles GET /v1/topics/{topic}/stats.
func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	ts, err := c.Inspector().Stats(r.Context(), topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

// listDead handles GET /v1/topics/{topic}/dead?limit=N.
func (s *server) listDead(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	limit := defaultDeadLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxDeadLimit {
			s.fail(w, r, badField("limit", "limit %q is not an integer from 1 to %d", v, maxDeadLimit))
			return
		}
		limit = n
	}
	list, err := c.Inspector().ListDead(r.Context(), topic, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Messages []*delayq.Info `json:"messages"`
	}{Messages: make([]*delayq.Info, 0, len(list))}
	out.Messages = append(out.Messages, list...)
	writeJSON(w, http.StatusOK, out)
}

// requeueDead handles POST /v1/topics/{topic}/dead/{id}/requeue.
func (s *server) requeueDead(w http.ResponseWriter, r *http.Request) {
	topic, id, c, ok := s.topicID(w, r)
	if !ok {
		return
	}
	n, err := c.Admin().RequeueDead(r.Context(), topic, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n == 0 {
		s.fail(w, r, fmt.Errorf("%w: no dead message %q in topic %q", delayq.ErrNotFound, id, topic))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"requeued": n})
}

// purgeDead handles DELETE /v1/topics/{topic}/dead.
func (s *server) purgeDead(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	n, err := c.Admin().PurgeDead(r.Context(), topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"purged": n})
}

// deleteTopic handles DELETE /v1/topics/{topic}?force=true: it deletes
// the topic and answers what it held; without force, a topic that holds
// messages or schedules, that a consumer is live on or whose count is
// being changed is refused (409).
func (s *server) deleteTopic(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	var opts delayq.DeleteTopicOptions
	if v := r.URL.Query().Get("force"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, badField("force", "force %q is not true or false", v))
			return
		}
		opts.Force = f
	}
	u, err := c.Admin().DeleteTopic(r.Context(), topic, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]*delayq.TopicUsage{"deleted": u})
}
