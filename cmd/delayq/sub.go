package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
)

// subAbout is the description "delayq sub -h" prints.
const subAbout = "Consumes the topic and prints one JSON line per delivery on stdout when it starts:\n" +
	`{"topic","id","partition","token","attempt","due","delivered_at","body"}, with` + "\n" +
	`"body_base64" instead of "body" when the body is not UTF-8. Deliveries are acked,` + "\n" +
	"except those failed on purpose by --fail-attempts or --fail. Stops gracefully on\n" +
	"SIGINT/SIGTERM, after --count deliveries or after --timeout."

// runSub implements "delayq sub": it consumes a topic and prints each
// delivery as a JSON line on stdout when the delivery starts.
func runSub(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("sub", "--topic T [flags]", subAbout, stdout, stderr)
	f := addSubFlags(cmd)
	if err := cmd.parse(args); err != nil {
		return err
	}
	opts, err := f.consumerOptions(cmd)
	if err != nil {
		return err
	}
	failRE, err := f.failRegexp(cmd)
	if err != nil {
		return err
	}
	return cmd.connect(func(client *delayq.Client) error {
		consumer, err := client.NewConsumer(opts, f.handler(&deliveryPrinter{w: stdout}, failRE))
		if err != nil {
			return err
		}
		if err := consumeFor(ctx, consumer, f.timeout.d); err != nil {
			return err
		}
		logConsumerStats(cmd.c.logger(stderr), consumer)
		return nil
	})
}

// subFlags are the flags of "delayq sub" beyond the common ones.
type subFlags struct {
	concurrency, prefetch, count int
	maxAttempts                  int
	failAttempts                 int    // --fail-attempts
	fail                         string // --fail: a regexp of the bodies to fail
	backoff                      string // comma-separated durations
	id                           string
	ends                         bool
	timeout                      durationFlag
	lease                        durationFlag
	handlerTimeout               durationFlag
	poll, idlePoll               durationFlag
	work                         durationFlag
}

// addSubFlags registers the flags of "delayq sub" on cmd.
func addSubFlags(cmd *command) *subFlags {
	f := &subFlags{
		lease:          durationFlag{d: delayq.DefaultLease},
		handlerTimeout: durationFlag{d: delayq.DefaultTimeout},
		poll:           durationFlag{d: delayq.DefaultPollInterval},
		idlePoll:       durationFlag{d: delayq.DefaultIdlePollInterval},
	}
	fs := cmd.fs
	fs.IntVar(&f.concurrency, "concurrency", delayq.DefaultConcurrency, "handlers run at once")
	fs.IntVar(&f.count, "count", 0, "stop after `n` deliveries have started (0: no limit)")
	fs.IntVar(&f.maxAttempts, "max-attempts", delayq.DefaultMaxAttempts, "deliveries of a message before it is dead, for messages that set none")
	fs.IntVar(&f.failAttempts, "fail-attempts", 0, "fail (retry) the deliveries whose attempt is <= `n`")
	fs.StringVar(&f.fail, "fail", "", "fail every delivery whose body matches `regexp`")
	fs.StringVar(&f.backoff, "backoff", "", "retry ladder: comma-separated `durations` (default: delayq.DefaultBackoff, 10s 30s 1m ... 2h)")
	fs.IntVar(&f.prefetch, "prefetch", delayq.DefaultPrefetch, "messages claimed beyond the free handlers (held until due)")
	fs.StringVar(&f.id, "id", "", "consumer `id`, shown as partition owner by stats (default host-pid-random)")
	fs.BoolVar(&f.ends, "ends", false, "also print a line when each handler returns: {\"ended\": id, \"attempt\": n, \"ended_at\": time}")
	fs.Var(&f.timeout, "timeout", "stop after `duration` (default: run until interrupted)")
	fs.Var(&f.lease, "lease", "partition lease `duration`")
	fs.Var(&f.handlerTimeout, "handler-timeout", "`duration` one delivery may take before it is redelivered")
	fs.Var(&f.poll, "poll", "longest pause (a `duration`) between two polls of a partition")
	fs.Var(&f.idlePoll, "idle-poll", "longest pause (a `duration`, at most 10s) of a partition that had nothing to claim")
	fs.Var(&f.work, "work", "`duration` each handler takes after printing its line, before it acks")
	return f
}

// consumerOptions checks the parsed flags and returns the options of the
// consumer of cmd's topic they describe.
func (f *subFlags) consumerOptions(cmd *command) (delayq.ConsumerOptions, error) {
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"concurrency", int64(f.concurrency)}, {"prefetch", int64(f.prefetch)}, {"count", int64(f.count)}, {"max-attempts", int64(f.maxAttempts)},
		{"fail-attempts", int64(f.failAttempts)}, {"timeout", int64(f.timeout.d)}, {"lease", int64(f.lease.d)},
		{"handler-timeout", int64(f.handlerTimeout.d)}, {"poll", int64(f.poll.d)}, {"idle-poll", int64(f.idlePoll.d)}, {"work", int64(f.work.d)},
	} {
		if err := cmd.nonNegative(c.name, c.v); err != nil {
			return delayq.ConsumerOptions{}, err
		}
	}
	if f.concurrency == 0 {
		// 0 would mean the default to the library: say so, not do it.
		return delayq.ConsumerOptions{}, valueErr(cmd.name, "invalid value %q for flag --concurrency: want 1 or more (leave it out for the default, %d)",
			cmd.value("concurrency"), delayq.DefaultConcurrency)
	}
	backoff, err := f.backoffLadder(cmd)
	if err != nil {
		return delayq.ConsumerOptions{}, err
	}
	return delayq.ConsumerOptions{
		Topic:        cmd.c.topic,
		ID:           f.id,
		Concurrency:  f.concurrency,
		Prefetch:     f.prefetch,
		Limit:        f.count,
		Lease:        f.lease.d,
		Timeout:      f.handlerTimeout.d,
		PollInterval: f.poll.d, IdlePollInterval: f.idlePoll.d,
		MaxAttempts: f.maxAttempts,
		Backoff:     backoff,
	}, nil
}

// backoffLadder reads --backoff: nil when it is not given.
func (f *subFlags) backoffLadder(cmd *command) ([]time.Duration, error) {
	if f.backoff == "" {
		return nil, nil
	}
	var backoff []time.Duration
	for _, s := range strings.Split(f.backoff, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			return nil, cmd.usageErr("invalid value %q for flag --backoff: %q is not a non-negative duration", f.backoff, s)
		}
		backoff = append(backoff, d)
	}
	return backoff, nil
}

// failRegexp compiles --fail: nil when it is not given.
func (f *subFlags) failRegexp(cmd *command) (*regexp.Regexp, error) {
	if !cmd.isSet("fail") {
		return nil, nil
	}
	re, err := regexp.Compile(f.fail)
	if err != nil {
		return nil, cmd.usageErr("invalid value %q for flag --fail: %v", f.fail, err)
	}
	return re, nil
}

// handler returns the consumer's handler: it prints the delivery's line
// with pr, takes --work, prints its end with --ends, and fails the
// delivery on purpose as --fail-attempts and --fail (failRE) say.
func (f *subFlags) handler(pr *deliveryPrinter, failRE *regexp.Regexp) delayq.Handler {
	return func(ctx context.Context, d *delayq.Delivery) error {
		if err := pr.print(d, time.Now()); err != nil {
			return fmt.Errorf("print delivery of %q: %w", d.ID, err)
		}
		err := simulateWork(ctx, f.work.d)
		if f.ends {
			if perr := pr.printEnd(d, time.Now()); perr != nil {
				return fmt.Errorf("print end of %q: %w", d.ID, perr)
			}
		}
		if err != nil {
			return err
		}
		if d.Attempt <= f.failAttempts {
			return fmt.Errorf("attempt %d failed on purpose (--fail-attempts %d)", d.Attempt, f.failAttempts)
		}
		if failRE != nil && failRE.Match(d.Body) {
			return fmt.Errorf("body matches --fail %q: failed on purpose", failRE)
		}
		return nil
	}
}

// consumeFor runs consumer until ctx is done, timeout (--timeout) has
// passed when it is not 0, or the consumer reached its --count. A
// graceful stop is nil.
func consumeFor(ctx context.Context, consumer *delayq.Consumer, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return consumer.Run(ctx)
}

// logConsumerStats logs the counters of consumer once it has stopped.
func logConsumerStats(log *slog.Logger, consumer *delayq.Consumer) {
	st := consumer.Stats()
	log.Info("consumer stats",
		"consumer", consumer.ID(), "delivered", st.Delivered, "acked", st.Acked, "retried", st.Retried, "dead", st.Dead,
		"redelivered", st.Redelivered, "recovered", st.Recovered, "corrupt", st.Corrupt, "stale", st.Stale, "moved", st.Moved, "fenced", st.Fenced, "leases_gained", st.LeasesGained, "leases_lost", st.LeasesLost)
}

// simulateWork waits d (--work), the time a handler takes, and returns
// nil; or ctx.Err() when ctx ends first, so that the delivery is retried.
func simulateWork(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return waitFor(ctx, d)
}

// deliveryJSON is the line "sub" prints for a delivery.
type deliveryJSON struct {
	Topic       string  `json:"topic"`
	ID          string  `json:"id"`
	Partition   int     `json:"partition"`
	Token       int64   `json:"token"`
	Attempt     int     `json:"attempt"`
	Due         string  `json:"due"`
	DeliveredAt string  `json:"delivered_at"`
	Body        *string `json:"body,omitempty"` // set when the body is UTF-8, even if empty
	BodyBase64  string  `json:"body_base64,omitempty"`
}

// marshalLine encodes v as one line of JSON without HTML escaping.
func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode appends the newline
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeDelivery returns the JSON line, newline included, of a delivery
// that started at deliveredAt.
func encodeDelivery(d *delayq.Delivery, deliveredAt time.Time) ([]byte, error) {
	v := deliveryJSON{
		Topic: d.Topic, ID: d.ID, Partition: d.Partition, Token: d.Token, Attempt: d.Attempt,
		// delivered_at is a measurement, not a stored time: it keeps its
		// nanoseconds, for lateness below a millisecond.
		Due: wire.Time(d.Due), DeliveredAt: deliveredAt.UTC().Format(time.RFC3339Nano),
	}
	v.Body, v.BodyBase64 = wire.Body(d.Body)
	return marshalLine(v)
}

// deliveryPrinter writes delivery lines. It is safe for concurrent use:
// each line goes out whole, in one unbuffered write, so a process reading
// stdout sees it at once.
type deliveryPrinter struct {
	mu sync.Mutex
	w  io.Writer
}

// print writes the line of d, started at deliveredAt.
func (p *deliveryPrinter) print(d *delayq.Delivery, deliveredAt time.Time) error {
	return p.write(encodeDelivery(d, deliveredAt))
}

// endJSON is the line "sub --ends" prints when a handler returns.
type endJSON struct {
	Ended   string `json:"ended"`
	Attempt int    `json:"attempt"`
	EndedAt string `json:"ended_at"`
}

// printEnd writes the line of the end of d's handler, at endedAt.
func (p *deliveryPrinter) printEnd(d *delayq.Delivery, endedAt time.Time) error {
	return p.write(marshalLine(endJSON{Ended: d.ID, Attempt: d.Attempt, EndedAt: endedAt.UTC().Format(time.RFC3339Nano)}))
}

// write writes line in one write, unless err, the error of encoding it,
// is not nil: then it returns err.
func (p *deliveryPrinter) write(line []byte, err error) error {
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.w.Write(line)
	return err
}
