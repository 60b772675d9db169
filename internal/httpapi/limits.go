package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/delayq/delayq"
)

// Limits routes (see the package documentation):
//
//	GET    /v1/topics/{topic}/limits  200 limits
//	PUT    /v1/topics/{topic}/limits  200 limits (replaced by the body's; {} clears)
//	DELETE /v1/topics/{topic}/limits  200 limits (cleared)
//
// The answer is {"topic", "rate"?, "burst"?, "concurrency"?,
// "started_last_second", "running"}: the limits set (rate as "200/s"),
// the deliveries the fleet started in the last whole second and those
// running now. A PUT body is {"rate"?: "200/s" | 200, "burst"?: 20,
// "concurrency"?: 10}: the fields absent (or null, or 0) are no limit.
func (s *server) routeLimits(m *http.ServeMux) {
	m.HandleFunc("GET /v1/topics/{topic}/limits", s.limits)
	m.HandleFunc("PUT /v1/topics/{topic}/limits", s.limits)
	m.HandleFunc("DELETE /v1/topics/{topic}/limits", s.limits)
}

// Fields of a limits body.
const (
	fieldRate        = "rate"
	fieldBurst       = "burst"
	fieldConcurrency = "concurrency"
)

// maxLimitsBytes bounds a limits body: three short fields.
const maxLimitsBytes = 4 << 10

// decodeLimits decodes the body of PUT /v1/topics/{topic}/limits. Errors
// are *apiError naming the field at fault.
func decodeLimits(r io.Reader) (delayq.Limits, error) {
	var l delayq.Limits
	obj, err := decodeObject(r, fieldRate, fieldBurst, fieldConcurrency)
	if err != nil {
		return l, err
	}
	if raw, ok := obj[fieldRate]; ok {
		if l.Rate, err = decodeRate(raw); err != nil {
			return l, err
		}
	}
	if raw, ok := obj[fieldBurst]; ok {
		if l.Burst, err = decodeCount(fieldBurst, raw); err != nil {
			return l, err
		}
		if l.Burst > 0 && l.Rate == 0 {
			return l, badField(fieldBurst, "burst %d without a rate: a burst is the rate limit's", l.Burst)
		}
	}
	if raw, ok := obj[fieldConcurrency]; ok {
		if l.Concurrency, err = decodeCount(fieldConcurrency, raw); err != nil {
			return l, err
		}
	}
	return l, nil
}

// decodeRate decodes a rate: a string delayq.ParseRate reads ("200/s",
// "600/m", "100/h"), or a number per second; 0 is no rate limit.
func decodeRate(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		r, err := delayq.ParseRate(s)
		if err != nil {
			return 0, badField(fieldRate, "rate %q is not a rate like \"200/s\", \"600/m\" or \"100/h\" (or a number per second); for no rate limit leave rate out", s)
		}
		return r, nil
	}
	var r float64
	if err := json.Unmarshal(raw, &r); err != nil {
		return 0, badField(fieldRate, `rate must be a string like "200/s" or a number per second`)
	}
	if r < 0 || math.IsInf(r, 0) {
		return 0, badField(fieldRate, "rate %v is negative; want a number per second above 0, or 0 for no rate limit", r)
	}
	return r, nil
}

// decodeCount decodes field's raw value: an integer of 0 or more.
func decodeCount(field string, raw json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, badField(field, "%s must be a non-negative integer", field)
	}
	if n < 0 {
		return 0, badField(field, "%s %d is negative", field, n)
	}
	return n, nil
}

// limits handles GET, PUT and DELETE /v1/topics/{topic}/limits.
func (s *server) limits(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	var err error
	switch r.Method {
	case http.MethodPut:
		var l delayq.Limits
		if l, err = decodeLimits(http.MaxBytesReader(w, r.Body, maxLimitsBytes)); err == nil {
			err = c.Admin().SetLimits(r.Context(), topic, l)
			if errors.Is(err, delayq.ErrInvalid) {
				// The body's checks leave only the library's bound of a rate.
				err = badField(fieldRate, "%s", strings.TrimPrefix(err.Error(), delayq.ErrInvalid.Error()+": "))
			}
		}
	case http.MethodDelete:
		err = c.Admin().SetLimits(r.Context(), topic, delayq.Limits{})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := c.Inspector().Stats(r.Context(), topic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, delayq.TopicLimits{Topic: topic, LimitsState: st.Limits})
}
