package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/delayq/delayq"
)

// runLimits implements "delayq limits": it prints the topic's fleet-wide
// limits and what runs against them, or changes them.
func runLimits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("limits", "--topic T [--rate R] [--burst B] [--concurrency N] [--clear] [--json]",
		"Prints the topic's fleet-wide limits and what runs against them: the\n"+
			"deliveries started in the last second (against the rate) and those running\n"+
			"(against the concurrency cap). Every consumer and worker of the topic follows\n"+
			"them within a second, without a restart; what a limit holds back stays\n"+
			"scheduled, no attempt spent.\n\n"+
			"--rate, --burst and --concurrency change the fields they name; the others\n"+
			"keep their stored value (the command reads the limits, then writes them all:\n"+
			"a change made by someone else between the two is overwritten). --rate 0 or\n"+
			"--concurrency 0 removes that limit; --burst 0 goes back to the default burst\n"+
			"(a tenth of a second's worth). --clear removes every limit. Prints the limits\n"+
			"after the change.\n\n"+
			"The stored limits are the truth: a worker's [topic.limits] table sets them\n"+
			"only on a topic whose limits were never set nor cleared, so change them here.\n"+
			"A topic that does not exist is an error, and nothing is written.", stdout, stderr)
	cmd.createsNoTopic = true
	rate := cmd.fs.String("rate", "", "most deliveries the fleet starts per second: `rate` like 200/s, 600/m, 100/h or 200; 0 removes the rate limit")
	burst := cmd.fs.Int("burst", 0, "`starts` that may come at once after a quiet spell (needs a rate); 0: the default, a tenth of a second's worth")
	conc := cmd.fs.Int("concurrency", 0, "most deliveries running at once across the fleet: `count`; 0 removes the cap")
	clearAll := cmd.fs.Bool("clear", false, "remove every limit")
	asJSON := cmd.fs.Bool("json", false, "print JSON: {\"topic\",\"rate\",\"burst\",\"concurrency\",\"started_last_second\",\"running\"}")
	if err := cmd.parse(args); err != nil {
		return err
	}
	change, err := limitsChange(cmd, *rate, *burst, *conc)
	if err != nil {
		return err
	}
	if *clearAll && change.any() {
		return cmd.usageErr("--clear and --%s exclude each other", change.first())
	}
	return cmd.connect(func(client *delayq.Client) error {
		topic := cmd.c.topic
		if *clearAll || change.any() {
			if err := change.write(ctx, cmd, client, *clearAll); err != nil {
				return err
			}
		}
		ts, err := client.Inspector().Stats(ctx, topic)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, delayq.TopicLimits{Topic: topic, LimitsState: ts.Limits})
		}
		if _, err := fmt.Fprintf(stdout, "%s: %s\n", topic, limitsText(ts.Limits.Limits)); err != nil {
			return err
		}
		if f := flowText(ts.Limits); f != "" && !*clearAll && !change.any() {
			_, err = fmt.Fprintln(stdout, f)
		}
		return err
	})
}

// limitsFlags are the limits "delayq limits" was asked to change: nil
// for a field whose flag was not given.
type limitsFlags struct {
	rate        *float64
	burst       *int
	concurrency *int
}

// limitsChange reads the --rate, --burst and --concurrency flags given.
func limitsChange(cmd *command, rate string, burst, conc int) (limitsFlags, error) {
	var f limitsFlags
	if cmd.isSet("rate") {
		r, err := parseRateFlag(rate)
		if err != nil {
			return f, valueErr(cmd.name, "invalid value %q for flag --rate: %s", rate, invalidReason(err))
		}
		f.rate = &r
	}
	if cmd.isSet("burst") {
		if err := cmd.nonNegative("burst", int64(burst)); err != nil {
			return f, err
		}
		f.burst = &burst
	}
	if cmd.isSet("concurrency") {
		if err := cmd.nonNegative("concurrency", int64(conc)); err != nil {
			return f, err
		}
		f.concurrency = &conc
	}
	if f.burst != nil && *f.burst > 0 && f.rate != nil && *f.rate == 0 {
		return f, cmd.usageErr("--burst %d with --rate 0: a burst is the rate limit's", burst)
	}
	return f, nil
}

// any reports whether a flag asked for a change.
func (f limitsFlags) any() bool { return f.first() != "" }

// first names the first flag given, or "".
func (f limitsFlags) first() string {
	switch {
	case f.rate != nil:
		return "rate"
	case f.burst != nil:
		return "burst"
	case f.concurrency != nil:
		return "concurrency"
	}
	return ""
}

// apply returns the stored limits l with the fields given changed. A
// rate removed takes its burst along; a burst with no rate, given or
// stored, is a usage error.
func (f limitsFlags) apply(cmd *command, l delayq.Limits) (delayq.Limits, error) {
	if f.rate != nil {
		l.Rate = *f.rate
		if l.Rate == 0 {
			l.Burst = 0
		}
	}
	if f.burst != nil {
		if *f.burst > 0 && l.Rate == 0 {
			return l, cmd.usageErr("--burst %d without a rate: the topic has no rate limit; give --rate too", *f.burst)
		}
		l.Burst = *f.burst
	}
	if f.concurrency != nil {
		l.Concurrency = *f.concurrency
	}
	return l, nil
}

// write stores the limits of the topic of cmd with the fields given
// changed, or none when clearAll (--clear).
func (f limitsFlags) write(ctx context.Context, cmd *command, client *delayq.Client, clearAll bool) error {
	topic := cmd.c.topic
	var l delayq.Limits
	if !clearAll {
		var err error
		if l, err = client.Inspector().Limits(ctx, topic); err != nil {
			return err
		}
		if l, err = f.apply(cmd, l); err != nil {
			return err
		}
	}
	return client.Admin().SetLimits(ctx, topic, l) // cmd.connect names a refused value's flag
}

// parseRateFlag reads --rate: delayq.ParseRate's forms, or 0 (with or
// without a unit, as in 0/s) for no rate limit.
func parseRateFlag(s string) (float64, error) {
	num, unit, hasUnit := strings.Cut(s, "/")
	if n, err := strconv.ParseFloat(strings.TrimSpace(num), 64); err != nil || n != 0 {
		return delayq.ParseRate(s)
	}
	if hasUnit {
		if _, err := delayq.ParseRate("1/" + unit); err != nil {
			return 0, fmt.Errorf("%w: rate %q: the unit after / is s, m or h (as in 200/s)", delayq.ErrInvalid, s)
		}
	}
	return 0, nil
}

// invalidReason is the message of an ErrInvalid error without the
// sentinel's words, for a usage error that names the flag and value.
func invalidReason(err error) string {
	msg := strings.TrimPrefix(err.Error(), delayq.ErrInvalid.Error()+": ")
	if _, after, ok := strings.Cut(msg, "\": "); ok && strings.HasPrefix(msg, "rate \"") {
		return after // ParseRate names the value: the flag's error does already
	}
	return msg
}

// limitsText says limits as "delayq limits" prints them: "rate 200/s
// burst 20 (default) concurrency 10", or "no limits".
func limitsText(l delayq.Limits) string {
	if l.IsZero() {
		return "no limits"
	}
	return l.String()
}

// flowText says what runs against the limits of ls: "198 started in the
// last second, 7 running", the parts of the limits set; "" for none.
func flowText(ls delayq.LimitsState) string {
	var parts []string
	if ls.Rate > 0 {
		parts = append(parts, fmt.Sprintf("%d started in the last second", ls.Started))
	}
	if ls.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("%d running", ls.Running))
	}
	return strings.Join(parts, ", ")
}

// limitsLine says a topic's limits and what runs against them, as stats
// prints them; "" when it has none.
func limitsLine(ls delayq.LimitsState) string {
	if ls.IsZero() {
		return ""
	}
	return "limits " + ls.Limits.String() + ": " + flowText(ls)
}
