package ui

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/delayq/delayq"
)

// limitsView is a topic's fleet-wide limits (delayq.Admin.SetLimits) and
// what runs against them, as its page shows them.
type limitsView struct {
	Rate        string // as delayq.FormatRate writes it; "" for no rate limit
	Burst       int    // the burst that applies: set, or the rate's default
	BurstSet    bool   // Burst was set, not the default
	Concurrency int    // 0: no cap
	Started     int64  // deliveries the fleet started in the last whole second
	Running     int64  // slots of the cap held: deliveries running or about to
}

// Any reports whether the topic has a limit.
func (l limitsView) Any() bool { return l.Rate != "" || l.Concurrency > 0 }

// AtCap reports whether every slot of the concurrency cap is held.
func (l limitsView) AtCap() bool { return l.Concurrency > 0 && l.Running >= int64(l.Concurrency) }

// limitsOf returns the view of the limits l, without what runs against
// them.
func limitsOf(l delayq.Limits) limitsView {
	v := limitsView{Concurrency: l.Concurrency}
	if l.Rate > 0 {
		v.Rate, v.Burst, v.BurstSet = delayq.FormatRate(l.Rate), l.BurstOrDefault(), l.Burst > 0
	}
	return v
}

// parseLimitsForm reads the limits of the topic page's form: rate as
// delayq.ParseRate reads it, burst and concurrency counts; a field left
// empty (or 0) is no limit, and burst its default.
func parseLimitsForm(r *http.Request) (delayq.Limits, error) {
	var l delayq.Limits
	if v := strings.TrimSpace(r.PostFormValue("rate")); v != "" && v != "0" {
		rate, err := delayq.ParseRate(v)
		if err != nil {
			return l, err
		}
		l.Rate = rate
	}
	count := func(name string) (int, error) {
		v := strings.TrimSpace(r.PostFormValue(name))
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: %s %q: want a count of 0 or more, or nothing", delayq.ErrInvalid, name, v)
		}
		return n, nil
	}
	var err error
	if l.Burst, err = count("burst"); err != nil {
		return l, err
	}
	if l.Burst > 0 && l.Rate == 0 {
		return l, fmt.Errorf("%w: burst %d without a rate: a burst is the rate limit's", delayq.ErrInvalid, l.Burst)
	}
	l.Concurrency, err = count("concurrency")
	return l, err
}

// limitsFields are the hidden fields of the confirmation of l.
func limitsFields(l delayq.Limits) []field {
	f := []field{{"rate", ""}, {"burst", ""}, {"concurrency", ""}}
	if l.Rate > 0 {
		f[0].Value = delayq.FormatRate(l.Rate)
	}
	if l.Burst > 0 {
		f[1].Value = strconv.Itoa(l.Burst)
	}
	if l.Concurrency > 0 {
		f[2].Value = strconv.Itoa(l.Concurrency)
	}
	return f
}

// topicLimits handles POST /ui/topics/{topic}/limits: form fields rate,
// burst and concurrency replace every limit of the topic (see
// parseLimitsForm).
func (s *Server) topicLimits(w http.ResponseWriter, r *http.Request, t topicReq) {
	back := topicURL(t.topic, "")
	l, err := parseLimitsForm(r)
	if err != nil {
		s.done(w, r, back, err, "")
		return
	}
	if l.IsZero() {
		s.clearLimits(w, r, t)
		return
	}
	q := fmt.Sprintf("Set the flow limits of topic %s to %s? Every consumer of it follows them within a second.", t.topic, l)
	if s.confirmed(w, r, q, "Set limits", back, limitsFields(l)...) {
		err := s.c.Admin().SetLimits(t.ctx, t.topic, l)
		s.done(w, r, back, err, "Limits of %s: %s.", t.topic, l)
	}
}

// topicLimitsClear handles POST /ui/topics/{topic}/limits/clear.
func (s *Server) topicLimitsClear(w http.ResponseWriter, r *http.Request, t topicReq) {
	s.clearLimits(w, r, t)
}

// clearLimits asks, then removes every limit of the topic.
func (s *Server) clearLimits(w http.ResponseWriter, r *http.Request, t topicReq) {
	back := topicURL(t.topic, "")
	q := fmt.Sprintf("Remove every flow limit of topic %s? Its consumers start deliveries as fast as they take them.", t.topic)
	if s.confirmed(w, r, q, "Clear limits", back) {
		err := s.c.Admin().SetLimits(t.ctx, t.topic, delayq.Limits{})
		s.done(w, r, back, err, "Removed the flow limits of %s.", t.topic)
	}
}
