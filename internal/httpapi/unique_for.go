package httpapi

import (
	"io"
	"net/http"
	"time"
)

// Uniqueness window routes (see the package documentation):
//
//	GET /v1/topics/{topic}/unique-for  200 {"topic","unique_for_ms"}
//	PUT /v1/topics/{topic}/unique-for  200 the same, after the write
//
// The window is the topic's default (delayq.Admin.SetUniqueFor): a
// message sent to it with an id of its own and no unique_for keeps its
// id taken for that long after its delivery succeeded; 0 is none. A PUT
// body is {"unique_for": "24h"}, "0s" clearing it.
func (s *server) routeUniqueFor(m *http.ServeMux) {
	m.HandleFunc("GET /v1/topics/{topic}/unique-for", s.uniqueFor)
	m.HandleFunc("PUT /v1/topics/{topic}/unique-for", s.uniqueFor)
}

// TopicUniqueFor is the JSON of a topic's default uniqueness window, as
// the unique-for routes answer it and "delayq unique-for --json" prints
// it: {"topic": "orders", "unique_for_ms": 86400000}, 0 for none.
type TopicUniqueFor struct {
	Topic       string `json:"topic"`
	UniqueForMS int64  `json:"unique_for_ms"`
}

// NewTopicUniqueFor returns the TopicUniqueFor of topic's window d.
func NewTopicUniqueFor(topic string, d time.Duration) TopicUniqueFor {
	return TopicUniqueFor{Topic: topic, UniqueForMS: d.Milliseconds()}
}

// maxUniqueForBytes bounds a unique-for body: one short field.
const maxUniqueForBytes = 4 << 10

// decodeUniqueForBody decodes the body of PUT .../unique-for:
// {"unique_for": "24h"}, required ("0s" for none). Errors are *apiError
// naming the field at fault.
func decodeUniqueForBody(r io.Reader) (time.Duration, error) {
	obj, err := decodeObject(r, fieldUniqueFor)
	if err != nil {
		return 0, err
	}
	raw, ok := obj[fieldUniqueFor]
	if !ok {
		return 0, badField(fieldUniqueFor, `unique_for is required: a duration string like "24h", or "0s" for none`)
	}
	return decodeUniqueFor(raw)
}

// uniqueFor handles GET and PUT /v1/topics/{topic}/unique-for.
func (s *server) uniqueFor(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	if r.Method == http.MethodPut {
		d, err := decodeUniqueForBody(http.MaxBytesReader(w, r.Body, maxUniqueForBytes))
		if err == nil {
			err = c.Admin().SetUniqueFor(r.Context(), topic, d)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	d, err := c.Inspector().UniqueFor(r.Context(), topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewTopicUniqueFor(topic, d))
}
