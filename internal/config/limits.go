package config

import (
	"errors"
	"fmt"
	"math"

	"github.com/delayq/delayq"
)

// rawLimits is the schema of a [topic.limits] table.
type rawLimits struct {
	Rate        value `toml:"rate"`
	Burst       value `toml:"burst"`
	Concurrency value `toml:"concurrency"`
}

// limitsTable names the [topic.limits] table of the i-th topic in errors.
func limitsTable(topic string, i int) string { return "[topic.limits] of " + topicName(topic, i) }

// limits converts the [topic.limits] table of the i-th topic, whose path
// is path; nil raw (no table) leaves dst nil.
func (c converter) limits(raw *rawLimits, dst **delayq.Limits, path, topic string, i int) {
	if raw == nil {
		return
	}
	lp, table := path+".limits", limitsTable(topic, i)
	l := &delayq.Limits{}
	c.rate(raw.Rate, &l.Rate, child(lp, table, "rate"))
	c.integer(raw.Burst, &l.Burst, child(lp, table, "burst"))
	c.integer(raw.Concurrency, &l.Concurrency, child(lp, table, "concurrency"))
	*dst = l
}

// rate reads a rate: a string delayq.ParseRate reads ("200/s", "600/m",
// "100/h"), or a number per second.
func (c converter) rate(x value, dst *float64, at place) {
	if !x.set {
		return
	}
	switch v := x.v.(type) {
	case string:
		r, err := delayq.ParseRate(v)
		if err != nil {
			c.ps.add(at, "%q is not a rate; want a number above 0 per s, m or h such as \"200/s\", \"600/m\" or \"100/h\", or a number per second such as 200", v)
			return
		}
		*dst = r
	case int64:
		*dst = float64(v)
	case float64:
		*dst = v
	default:
		c.ps.add(at, "got %s; want a rate such as \"200/s\", \"600/m\" or \"100/h\", or a number per second such as 200", typeName(x.v))
	}
}

// limitsKeys maps the fields of delayq.Limits, as a delayq.FieldError
// names them, to their keys in [topic.limits].
var limitsKeys = map[string]string{"Limits.Rate": "rate", "Limits.Burst": "burst", "Limits.Concurrency": "concurrency"}

// validateLimits checks the [topic.limits] table of the i-th topic, when
// it has one.
func (t *Topic) validateLimits(ps *problems, i int) {
	l := t.Limits
	if l == nil {
		return
	}
	at := func(key string) place { return child(fmt.Sprintf("topic[%d].limits", i), limitsTable(t.Name, i), key) }
	before := len(*ps)
	defer func() {
		if len(*ps) > before {
			return
		}
		// Whatever else the library refuses, named by its key here.
		var fe *delayq.FieldError
		if err := l.Validate(); errors.As(err, &fe) && limitsKeys[fe.Field] != "" {
			ps.add(at(limitsKeys[fe.Field]), "%s %s", fe.Value, fe.Reason)
		} else if err != nil {
			ps.add(at("rate"), "%v", err)
		}
	}()
	switch {
	case math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		ps.add(at("rate"), "%v is not a rate; want one such as \"200/s\", or no key for no rate limit", l.Rate)
	case l.Rate < 0:
		ps.add(at("rate"), "%v is negative; want a rate such as \"200/s\", or no key for no rate limit", l.Rate)
	case l.Rate > 0 && l.Rate < delayq.MinRate:
		ps.add(at("rate"), "%v per second is below the slowest rate limit, %s; to stop deliveries, pause the topic (delayq pause)", l.Rate, delayq.FormatRate(delayq.MinRate))
	}
	switch {
	case l.Burst < 0:
		ps.add(at("burst"), "%d is negative; want the starts that may come at once, or no key for a tenth of a second's worth", l.Burst)
	case l.Burst > 0 && l.Rate == 0:
		ps.add(at("burst"), "burst %d without a rate; a burst is the rate limit's: set rate too, or remove burst", l.Burst)
	}
	if l.Concurrency < 0 {
		ps.add(at("concurrency"), "%d is negative; want the most deliveries running at once across the fleet, or no key for no cap", l.Concurrency)
	}
	if l.IsZero() && l.Burst == 0 {
		ps.add(at("rate"), "the table limits nothing (no rate above 0, no concurrency above 0); want rate (such as \"200/s\") or concurrency, or no [topic.limits] table: "+
			"a table that limits nothing would store no limits on a topic that has none, and the file would then never set any")
	}
}
