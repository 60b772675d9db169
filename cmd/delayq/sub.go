package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/wire"
)

// runSub implements "delayq sub": it consumes a topic and prints each
// delivery as a JSON line on stdout when the delivery starts.
func runSub(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("sub", "--topic T [flags]",
		"Consumes the topic and prints one JSON line per delivery on stdout when it starts:\n"+
			`{"topic","id","partition","token","attempt","due","delivered_at","body"}, with`+"\n"+
			`"body_base64" instead of "body" when the body is not UTF-8. Deliveries are acked,`+"\n"+
			"except those failed on purpose by --fail-attempts or --fail. Stops gracefully on\n"+
			"SIGINT/SIGTERM, after --count deliveries or after --timeout.",
		stdout, stderr)
	fs := cmd.fs
	var (
		concurrency  = fs.Int("concurrency", delayq.DefaultConcurrency, "handlers run at once")
		count        = fs.Int("count", 0, "stop after `n` deliveries have started (0: no limit)")
		maxAttempts  = fs.Int("max-attempts", delayq.DefaultMaxAttempts, "deliveries of a message before it is dead, for messages that set none")
		failAttempts = fs.Int("fail-attempts", 0, "fail (retry) the deliveries whose attempt is <= `n`")
		failBody     = fs.String("fail", "", "fail every delivery whose body matches `regexp`")
		backoffList  = fs.String("backoff", "", "retry ladder: comma-separated `durations` (default: delayq.DefaultBackoff, 10s 30s 1m ... 2h)")
		prefetch     = fs.Int("prefetch", delayq.DefaultPrefetch, "messages claimed beyond the free handlers (held until due)")
		consumerID   = fs.String("id", "", "consumer `id`, shown as partition owner by stats (default host-pid-random)")
		timeout      durationFlag
		lease        = durationFlag{d: delayq.DefaultLease}
		handlerTO    = durationFlag{d: delayq.DefaultTimeout}
		poll         = durationFlag{d: delayq.DefaultPollInterval}
		idlePoll     = durationFlag{d: delayq.DefaultIdlePollInterval}
		work         durationFlag
		ends         = fs.Bool("ends", false, "also print a line when each handler returns: {\"ended\": id, \"attempt\": n, \"ended_at\": time}")
	)
	fs.Var(&timeout, "timeout", "stop after `duration` (default: run until interrupted)")
	fs.Var(&lease, "lease", "partition lease `duration`")
	fs.Var(&handlerTO, "handler-timeout", "`duration` one delivery may take before it is redelivered")
	fs.Var(&poll, "poll", "longest pause (a `duration`) between two polls of a partition")
	fs.Var(&idlePoll, "idle-poll", "longest pause (a `duration`, at most 5s) of a partition that had nothing to claim")
	fs.Var(&work, "work", "`duration` each handler takes after printing its line, before it acks")
	if err := cmd.parse(args); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"concurrency", int64(*concurrency)}, {"prefetch", int64(*prefetch)}, {"count", int64(*count)}, {"max-attempts", int64(*maxAttempts)},
		{"fail-attempts", int64(*failAttempts)}, {"timeout", int64(timeout.d)}, {"lease", int64(lease.d)},
		{"handler-timeout", int64(handlerTO.d)}, {"poll", int64(poll.d)}, {"idle-poll", int64(idlePoll.d)}, {"work", int64(work.d)},
	} {
		if err := cmd.nonNegative(c.name, c.v); err != nil {
			return err
		}
	}
	var backoff []time.Duration
	if *backoffList != "" {
		for _, f := range strings.Split(*backoffList, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d < 0 {
				return cmd.usageErr("invalid value %q for flag --backoff: %q is not a non-negative duration", *backoffList, f)
			}
			backoff = append(backoff, d)
		}
	}
	var failRE *regexp.Regexp
	if cmd.isSet("fail") {
		re, err := regexp.Compile(*failBody)
		if err != nil {
			return cmd.usageErr("invalid value %q for flag --fail: %v", *failBody, err)
		}
		failRE = re
	}
	return cmd.connect(func(client *delayq.Client) error {
		pr := &deliveryPrinter{w: stdout}
		handler := func(ctx context.Context, d *delayq.Delivery) error {
			if err := pr.print(d, time.Now()); err != nil {
				return fmt.Errorf("print delivery of %q: %w", d.ID, err)
			}
			err := simulateWork(ctx, work.d)
			if *ends {
				if perr := pr.printEnd(d, time.Now()); perr != nil {
					return fmt.Errorf("print end of %q: %w", d.ID, perr)
				}
			}
			if err != nil {
				return err
			}
			if d.Attempt <= *failAttempts {
				return fmt.Errorf("attempt %d failed on purpose (--fail-attempts %d)", d.Attempt, *failAttempts)
			}
			if failRE != nil && failRE.Match(d.Body) {
				return fmt.Errorf("body matches --fail %q: failed on purpose", failRE)
			}
			return nil
		}
		consumer, err := client.NewConsumer(delayq.ConsumerOptions{
			Topic:        cmd.c.topic,
			ID:           *consumerID,
			Concurrency:  *concurrency,
			Prefetch:     *prefetch,
			Limit:        *count,
			Lease:        lease.d,
			Timeout:      handlerTO.d,
			PollInterval: poll.d, IdlePollInterval: idlePoll.d,
			MaxAttempts: *maxAttempts,
			Backoff:     backoff,
		}, handler)
		if err != nil {
			return err
		}
		if timeout.d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout.d)
			defer cancel()
		}
		// Run returns nil after a graceful stop (ctx done or --count reached).
		if err := consumer.Run(ctx); err != nil {
			return err
		}
		st := consumer.Stats()
		cmd.c.logger(stderr).Info("consumer stats",
			"consumer", consumer.ID(), "delivered", st.Delivered, "acked", st.Acked, "retried", st.Retried, "dead", st.Dead,
			"redelivered", st.Redelivered, "recovered", st.Recovered, "corrupt", st.Corrupt, "stale", st.Stale, "moved", st.Moved, "fenced", st.Fenced, "leases_gained", st.LeasesGained, "leases_lost", st.LeasesLost)
		return nil
	})
}

// simulateWork waits d (--work), the time a handler takes, and returns
// nil; or ctx.Err() when ctx ends first, so that the delivery is retried.
func simulateWork(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
	line, err := encodeDelivery(d, deliveredAt)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.w.Write(line)
	return err
}

// endJSON is the line "sub --ends" prints when a handler returns.
type endJSON struct {
	Ended   string `json:"ended"`
	Attempt int    `json:"attempt"`
	EndedAt string `json:"ended_at"`
}

// printEnd writes the line of the end of d's handler, at endedAt.
func (p *deliveryPrinter) printEnd(d *delayq.Delivery, endedAt time.Time) error {
	line, err := marshalLine(endJSON{Ended: d.ID, Attempt: d.Attempt, EndedAt: endedAt.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.w.Write(line)
	return err
}
