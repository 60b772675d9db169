package delayq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/delayq/delayq/internal/store"
)

// Limits are a topic's fleet-wide flow limits (see Admin.SetLimits). The
// zero value limits nothing.
type Limits struct {
	// Rate is the most deliveries of the topic the whole fleet starts per
	// second (retries count), whatever the number of consumers,
	// partitions or proxies. 0: no rate limit.
	Rate float64
	// Burst is how many starts may come at once after a quiet spell
	// (the token bucket's size). 0: DefaultBurst(Rate), a tenth of a
	// second's worth. Only with a Rate.
	Burst int
	// Concurrency is the most deliveries of the topic running at the same
	// moment across every process (each process's own
	// ConsumerOptions.Concurrency still applies). 0: no cap.
	Concurrency int
}

// DefaultBurst is the burst of a rate limit with none set: a tenth of a
// second's worth of starts, at least 1.
func DefaultBurst(rate float64) int { return store.DefaultBurst(rate) }

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l.Rate == 0 && l.Concurrency == 0 }

// BurstOrDefault is the burst that applies to l's rate: Burst, or
// DefaultBurst(Rate) when it is 0.
func (l Limits) BurstOrDefault() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return DefaultBurst(l.Rate)
}

// String formats l as "rate 200/s burst 20 concurrency 10" (the parts
// set), or "none".
func (l Limits) String() string {
	var parts []string
	if l.Rate > 0 {
		parts = append(parts, "rate "+FormatRate(l.Rate))
		burst := "burst " + strconv.Itoa(l.BurstOrDefault())
		if l.Burst == 0 {
			burst += " (default)"
		}
		parts = append(parts, burst)
	}
	if l.Concurrency > 0 {
		parts = append(parts, "concurrency "+strconv.Itoa(l.Concurrency))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// Validate reports why l cannot be stored (ErrInvalid, naming the field
// and its value), or nil.
func (l Limits) Validate() error {
	switch {
	case l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return fieldErr("Limits.Rate", l.Rate, "is not a rate: want a number of deliveries per second above 0 (or 0: no rate limit)")
	case l.Rate > 0 && l.Rate < MinRate:
		return fieldErr("Limits.Rate", FormatRate(l.Rate), "is below the slowest rate limit, %s: to stop deliveries, pause the topic (delayq pause)", FormatRate(MinRate))
	case l.Rate > MaxRate:
		return fieldErr("Limits.Rate", FormatRate(l.Rate), "is above %s, which is no limit: leave it 0 (no rate limit)", FormatRate(MaxRate))
	case l.Burst < 0:
		return fieldErr("Limits.Burst", l.Burst, "is negative")
	case l.Burst > 0 && l.Rate == 0:
		return fieldErr("Limits.Burst", l.Burst, "is set without a rate: a burst is the rate limit's")
	case l.Concurrency < 0:
		return fieldErr("Limits.Concurrency", l.Concurrency, "is negative")
	}
	return nil
}

// MinRate is the lowest rate limit: one start an hour. A slower rate is
// a pause no one can see (stats would show a limit, deliveries would
// stop for days): pause the topic instead (Admin.Pause).
const MinRate = 1.0 / 3600

// MaxRate is the highest rate limit: a million starts a second is more
// than any fleet delivers.
const MaxRate = 1e6

// ParseRate parses a rate: a number of deliveries per second ("200",
// "0.5"), or a number per unit: "200/s", "600/m", "100/h". It returns
// deliveries per second; 0 ("0", "0/s") is no rate limit. It reads any
// rate: Limits.Validate refuses those below MinRate.
func ParseRate(s string) (float64, error) {
	num, unit, hasUnit := strings.Cut(strings.TrimSpace(s), "/")
	per := 1.0
	if hasUnit {
		switch strings.TrimSpace(unit) {
		case "s", "sec", "second":
		case "m", "min", "minute":
			per = 60
		case "h", "hour":
			per = 3600
		default:
			return 0, fmt.Errorf("%w: rate %q: the unit after / is s, m or h (as in 200/s)", ErrInvalid, s)
		}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("%w: rate %q: want a number per s, m or h (as in 200/s; 0: no rate limit)", ErrInvalid, s)
	}
	if q, ok := new(big.Rat).SetString(strings.TrimSpace(num)); ok && per != 1 {
		// Divided exactly, then rounded once: "0.36/h" reads as the
		// float nearest 0.0001, which FormatRate writes back as 0.36/h.
		f, _ := q.Quo(q, big.NewRat(int64(per), 1)).Float64()
		return f, nil
	}
	return n / per, nil
}

// FormatRate formats a rate in deliveries per second as ParseRate reads
// it, by one rule: per second from one a second up ("200/s", "2.5/s"),
// per minute from one a minute up ("30/m", "1.2/m"), per hour below
// ("0.36/h"), with the fewest decimals that ParseRate reads back as r
// exactly (in full per second in the rare case that none does).
func FormatRate(r float64) string {
	per, unit := 1.0, "/s"
	switch {
	case r <= 0 || r >= 1 || math.IsNaN(r) || math.IsInf(r, 0):
	case r*60 >= 1-1e-9:
		per, unit = 60, "/m"
	default:
		per, unit = 3600, "/h"
	}
	// The fewest decimals that ParseRate reads back as r exactly.
	for prec := 0; prec <= 17 && per != 1; prec++ {
		s := strconv.FormatFloat(r*per, 'f', prec, 64) + unit
		if v, err := ParseRate(s); err == nil && v == r {
			return s
		}
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// limitsJSON is the wire form of Limits: the rate as "200/s".
type limitsJSON struct {
	Rate        any `json:"rate,omitempty"`
	Burst       int `json:"burst,omitempty"`
	Concurrency int `json:"concurrency,omitempty"`
}

// MarshalJSON encodes l with its rate as FormatRate writes it.
func (l Limits) MarshalJSON() ([]byte, error) { return json.Marshal(l.wire()) }

func (l Limits) wire() limitsJSON {
	v := limitsJSON{Burst: l.Burst, Concurrency: l.Concurrency}
	if l.Rate > 0 {
		v.Rate = FormatRate(l.Rate)
	}
	return v
}

// UnmarshalJSON decodes limits whose rate is a string ParseRate reads
// ("200/s") or a number per second.
func (l *Limits) UnmarshalJSON(b []byte) error {
	var v struct {
		Rate        json.RawMessage `json:"rate"`
		Burst       int             `json:"burst"`
		Concurrency int             `json:"concurrency"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: limits: %v", ErrInvalid, err)
	}
	rate, err := decodeRate(v.Rate)
	if err != nil {
		return err
	}
	*l = Limits{Rate: rate, Burst: v.Burst, Concurrency: v.Concurrency}
	return nil
}

// decodeRate reads the "rate" of limits in JSON: a string ParseRate
// reads, a number per second, or nothing (0).
func decodeRate(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseRate(s)
	}
	var r float64
	if err := json.Unmarshal(raw, &r); err != nil {
		return 0, fmt.Errorf("%w: limits: rate %s: want \"200/s\" or a number per second", ErrInvalid, raw)
	}
	return r, nil
}

// SetLimits replaces topic's fleet-wide limits with l (a zero l clears
// them): every consumer and worker of the topic follows them within a
// second (a change is signalled at once; consumers also read them every
// controlsEvery), without a restart. What a limit holds back stays
// scheduled and becomes due when the limit allows: never claimed and
// released in a loop, never early, never lost, never counted as an
// attempt. The stored limits are the truth: a worker's file sets them
// only on a topic whose limits were never set nor cleared (see
// TopicConfig.Limits). It fails with ErrNoTopic for a topic that does
// not exist and ErrInvalid for bad limits, and writes nothing then.
func (adm *Admin) SetLimits(ctx context.Context, topic string, l Limits) error {
	c := adm.c
	if err := validateTopic(topic); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return err
	}
	_, err := c.store.SetLimits(ctx, topic, storeLimits(l), false)
	return err
}

// Limits returns topic's fleet-wide limits (zero: none). It fails with
// ErrNoTopic for a topic that does not exist.
func (ins *Inspector) Limits(ctx context.Context, topic string) (Limits, error) {
	c := ins.c
	if err := validateTopic(topic); err != nil {
		return Limits{}, err
	}
	ctrl, ok, err := c.store.ReadControls(ctx, topic)
	if err != nil {
		return Limits{}, err
	}
	if !ok {
		return Limits{}, store.NoTopic(topic)
	}
	return fromStore(ctrl.Limits), nil
}

func storeLimits(l Limits) store.Limits {
	return store.Limits{Rate: l.Rate, Burst: l.Burst, Concurrency: l.Concurrency}
}

func fromStore(l store.Limits) Limits {
	return Limits{Rate: l.Rate, Burst: l.Burst, Concurrency: l.Concurrency}
}

// LimitsState is a topic's limits with what runs against them, as Stats
// reports it.
type LimitsState struct {
	Limits
	// Started is the deliveries the fleet started in the last whole
	// second, counted while a rate limit is set.
	Started int64 `json:"started_last_second"`
	// Running is the slots of the concurrency cap held now (deliveries
	// running, or claimed and about to start), counted while a cap is
	// set.
	Running int64 `json:"running"`
}

// MarshalJSON encodes the limits and the figures against them.
func (s LimitsState) MarshalJSON() ([]byte, error) { return json.Marshal(s.wire()) }

// limitsStateJSON is the wire form of LimitsState.
type limitsStateJSON struct {
	limitsJSON
	Started int64 `json:"started_last_second"`
	Running int64 `json:"running"`
}

func (s LimitsState) wire() limitsStateJSON {
	return limitsStateJSON{s.Limits.wire(), s.Started, s.Running}
}

// TopicLimits is a topic's limits with what runs against them, named:
// what "delayq limits --json" prints and the HTTP API's limits routes
// answer, {"topic", "rate", "burst", "concurrency",
// "started_last_second", "running"}.
type TopicLimits struct {
	Topic string
	LimitsState
}

// MarshalJSON encodes the topic's name, then its LimitsState.
func (t TopicLimits) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Topic string `json:"topic"`
		limitsStateJSON
	}{t.Topic, t.LimitsState.wire()})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *LimitsState) UnmarshalJSON(b []byte) error {
	var v struct {
		Rate        json.RawMessage `json:"rate"`
		Burst       int             `json:"burst"`
		Concurrency int             `json:"concurrency"`
		Started     int64           `json:"started_last_second"`
		Running     int64           `json:"running"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	rate, err := decodeRate(v.Rate)
	if err != nil {
		return err
	}
	*s = LimitsState{Limits: Limits{Rate: rate, Burst: v.Burst, Concurrency: v.Concurrency}, Started: v.Started, Running: v.Running}
	return nil
}

// limitsState returns the limits of ctrl, with what runs against them
// read when there are any (two commands).
func (c *Client) limitsState(ctx context.Context, topic string, ctrl store.Controls) (LimitsState, error) {
	ls := LimitsState{Limits: fromStore(ctrl.Limits)}
	if ls.IsZero() {
		return ls, nil
	}
	f, err := c.store.ReadFlow(ctx, topic, c.opts.Now())
	if err != nil {
		return LimitsState{}, err
	}
	if ls.Rate > 0 {
		ls.Started = f.Started
	}
	if ls.Concurrency > 0 {
		ls.Running = f.Running
	}
	return ls, nil
}
