package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
	"github.com/gomodule/redigo/redis"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// storedRecord returns the bytes stored for id in a topic of n
// partitions.
func storedRecord(t *testing.T, c *Client, topic, id string, n int) []byte {
	t.Helper()
	ctx := context.Background()
	conn, err := c.store.Pool().GetContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b, err := redis.Bytes(conn.Do("HGET", keys.Records(c.store.Namespace(), topic, partition.For(id, n)), id))
	if err != nil {
		t.Fatalf("record of %q: %v", id, err)
	}
	return b
}

// spanAttr returns the value of a span's attribute k.
func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// spansOf returns the spans named name whose messaging.message.id is id.
func spansOf(spans []sdktrace.ReadOnlySpan, name, id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if v, ok := spanAttr(s, "messaging.message.id"); s.Name() == name && ok && v.AsString() == id {
			out = append(out, s)
		}
	}
	return out
}

// TestTraces: a message enqueued under a span makes one trace: the
// send, each attempt (the first failed, with its error status), the
// retry and the ack; its record stores the send's traceparent. A
// message enqueued outside a trace stores none (its record is the
// bytes it was before traces existed) and gets a root delivery span.
// A debounced message's deliveries belong to the trace of its latest
// send.
func TestTraces(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(context.Background())
		const topic, n = "traced", 2
		c := newClient(t, addr, Options{Partitions: n, TracerProvider: tp})
		bg := context.Background()

		ctx, checkout := tp.Tracer("test").Start(bg, "checkout")
		if _, err := c.Send(ctx, Message{Topic: topic, ID: "traced", Body: []byte("a")}); err != nil {
			t.Fatal(err)
		}
		checkout.End()
		if _, err := c.Send(bg, Message{Topic: topic, ID: "plain", Body: []byte("b")}); err != nil {
			t.Fatal(err)
		}
		var traces [2]trace.SpanContext // of the two sends of "debounced"
		for i := range traces {
			ctx, span := tp.Tracer("test").Start(bg, fmt.Sprintf("edit %d", i))
			traces[i] = span.SpanContext()
			if _, err := c.Send(ctx, Message{Topic: topic, ID: "debounced", Body: []byte("c"), OnDuplicate: Debounce, Delay: 300 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			span.End()
		}

		// The records: the traced one has the flag and the send's
		// traceparent; the plain one is what it was before traces.
		sends := spansOf(exp.GetSpans().Snapshots(), "delayq.send "+topic, "traced")
		if len(sends) != 1 {
			t.Fatalf("%d send spans of the traced message, want 1", len(sends))
		}
		send := sends[0]
		if send.SpanKind() != trace.SpanKindProducer || send.Parent().SpanID() != checkout.SpanContext().SpanID() {
			t.Errorf("send span: kind %v, parent %v; want a producer, child of the caller's span %v", send.SpanKind(), send.Parent().SpanID(), checkout.SpanContext().SpanID())
		}
		raw := storedRecord(t, c, topic, "traced", n)
		rec, err := store.DecodeRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("00-%s-%s-01", send.SpanContext().TraceID(), send.SpanContext().SpanID()); raw[0] != 0x11 || rec.Trace != want {
			t.Errorf("traced record: version byte %#x (want 0x11), trace %q (want %q)", raw[0], rec.Trace, want)
		}
		raw = storedRecord(t, c, topic, "plain", n)
		if rec, err := store.DecodeRecord(raw); err != nil || raw[0] != 1 || rec.Trace != "" ||
			string(raw) != string((&store.Record{Due: rec.Due, Created: rec.Created, Updated: rec.Updated, Body: []byte("b")}).Encode()) {
			t.Errorf("untraced record %x (%+v, %v): want version 1 and no trace", raw, rec, err)
		}

		var mu sync.Mutex
		handlerSpans := map[string][]trace.SpanContext{}
		h := func(ctx context.Context, d *Delivery) error {
			mu.Lock()
			handlerSpans[d.ID] = append(handlerSpans[d.ID], trace.SpanContextFromContext(ctx))
			mu.Unlock()
			if d.ID == "traced" && d.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}
		runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: time.Second,
			Backoff: []time.Duration{100 * time.Millisecond}}, h)
		waitFor(t, 10*time.Second, "the three messages acked", func() bool {
			spans := exp.GetSpans().Snapshots()
			return len(spansOf(spans, "delayq.ack "+topic, "traced")) == 1 && len(spansOf(spans, "delayq.ack "+topic, "plain")) == 1 &&
				len(spansOf(spans, "delayq.ack "+topic, "debounced")) == 1
		})
		spans := exp.GetSpans().Snapshots()

		// One trace for the traced message: the caller's, its send, both
		// attempts, the retry and the ack.
		tid := checkout.SpanContext().TraceID()
		delivers := spansOf(spans, "delayq.deliver "+topic, "traced")
		if len(delivers) != 2 {
			t.Fatalf("%d delivery spans of the traced message, want 2", len(delivers))
		}
		for i, d := range delivers {
			if att, _ := spanAttr(d, "delayq.attempt"); att.AsInt64() != int64(i+1) {
				t.Errorf("delivery span %d: attempt %v, want %d", i, att.String(), i+1)
			}
			if d.SpanKind() != trace.SpanKindConsumer || d.SpanContext().TraceID() != tid || d.Parent().SpanID() != send.SpanContext().SpanID() {
				t.Errorf("delivery span %d: kind %v, trace %v, parent %v; want a consumer, child of the send %v in trace %v",
					i, d.SpanKind(), d.SpanContext().TraceID(), d.Parent().SpanID(), send.SpanContext().SpanID(), tid)
			}
			if l := d.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
				t.Errorf("delivery span %d: links %v, want one to the send", i, l)
			}
			for _, k := range []attribute.Key{"delayq.partition", "delayq.lateness_ms", "messaging.destination.name"} {
				if _, ok := spanAttr(d, k); !ok {
					t.Errorf("delivery span %d has no attribute %s", i, k)
				}
			}
			if p, _ := spanAttr(d, "delayq.partition"); p.AsInt64() != int64(partition.For("traced", n)) {
				t.Errorf("delivery span %d: partition %v, want %d", i, p.String(), partition.For("traced", n))
			}
		}
		if s := delivers[0].Status(); s.Code != codes.Error || s.Description != "first attempt fails" {
			t.Errorf("first attempt's status %+v, want the handler's error", s)
		}
		if s := delivers[1].Status(); s.Code == codes.Error {
			t.Errorf("second attempt's status %+v, want no error", s)
		}
		for i, name := range []string{"delayq.retry " + topic, "delayq.ack " + topic} {
			settled := spansOf(spans, name, "traced")
			if len(settled) != 1 || settled[0].Parent().SpanID() != delivers[i].SpanContext().SpanID() || settled[0].SpanContext().TraceID() != tid {
				t.Errorf("%s spans %v: want one, child of attempt %d", name, settled, i+1)
			}
		}
		mu.Lock()
		for i, sc := range handlerSpans["traced"] {
			if !sc.Equal(delivers[i].SpanContext()) {
				t.Errorf("attempt %d: the handler's ctx holds span %v, want its delivery span %v", i+1, sc.SpanID(), delivers[i].SpanContext().SpanID())
			}
		}
		mu.Unlock()
		traced := map[trace.TraceID]bool{}
		for _, s := range spans {
			if v, ok := spanAttr(s, "messaging.message.id"); ok && v.AsString() == "traced" {
				traced[s.SpanContext().TraceID()] = true
			}
		}
		if len(traced) != 1 || !traced[tid] {
			t.Errorf("the traced message's spans are in traces %v, want %v alone", traced, tid)
		}

		// The plain message: a root delivery span, linked to nothing.
		plain := spansOf(spans, "delayq.deliver "+topic, "plain")
		if len(plain) != 1 || plain[0].Parent().IsValid() || len(plain[0].Links()) != 0 || plain[0].SpanContext().TraceID() == tid {
			t.Errorf("plain delivery spans %v: want one root span, without links", plain)
		}
		// The debounced message: delivered once, in the trace of its
		// latest send.
		deb := spansOf(spans, "delayq.deliver "+topic, "debounced")
		if len(deb) != 1 || deb[0].SpanContext().TraceID() != traces[1].TraceID() {
			t.Errorf("debounced delivery spans %v: want one, in the trace of the latest send %v", deb, traces[1].TraceID())
		}
	})
}

// TestTracesBatchAndAsync: a batch enqueued under a span has one send
// span, whose context each of its messages stores; an SendAsync
// call under a span has its own, ended once the write is done.
func TestTracesBatchAndAsync(t *testing.T) {
	forEachTarget(t, func(t *testing.T, addr string) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(context.Background())
		const topic, n = "batched", 4
		c := newClient(t, addr, Options{Partitions: n, TracerProvider: tp})
		ctx, span := tp.Tracer("test").Start(context.Background(), "import")
		defer span.End()
		msgs := []Message{{Topic: topic, ID: "b1"}, {Topic: topic, ID: "b2", Delay: time.Hour}, {Topic: topic, ID: "b3", OnDuplicate: Replace}}
		res, err := c.SendBatch(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("message %d: %v", i, r.Err)
			}
		}
		if msgs[0].trace != "" {
			t.Errorf("SendBatch changed the caller's messages: trace %q", msgs[0].trace)
		}
		var batch []sdktrace.ReadOnlySpan
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "delayq.send "+topic {
				batch = append(batch, s)
			}
		}
		if len(batch) != 1 {
			t.Fatalf("%d send spans for a batch, want 1", len(batch))
		}
		if v, _ := spanAttr(batch[0], "messaging.batch.message_count"); v.AsInt64() != 3 {
			t.Errorf("batch span's message count %v, want 3", v.String())
		}
		want := fmt.Sprintf("00-%s-%s-01", batch[0].SpanContext().TraceID(), batch[0].SpanContext().SpanID())
		for _, id := range []string{"b1", "b2", "b3"} {
			if rec, err := store.DecodeRecord(storedRecord(t, c, topic, id, n)); err != nil || rec.Trace != want {
				t.Errorf("record of %s: trace %q (%v), want the batch's %q", id, rec.Trace, err, want)
			}
		}

		done := make(chan error, 1)
		if err := c.SendAsync(ctx, Message{Topic: topic, ID: "a1"}, func(res SendResult) { done <- res.Err }); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		async := spansOf(exp.GetSpans().Snapshots(), "delayq.send "+topic, "a1")
		if len(async) != 1 {
			t.Fatalf("%d send spans of the async message, want 1 ended by its callback", len(async))
		}
		want = fmt.Sprintf("00-%s-%s-01", async[0].SpanContext().TraceID(), async[0].SpanContext().SpanID())
		if rec, err := store.DecodeRecord(storedRecord(t, c, topic, "a1", n)); err != nil || rec.Trace != want {
			t.Errorf("record of a1: trace %q (%v), want %q", rec.Trace, err, want)
		}
	})
}

// TestTracesWithoutSDK: with a no-op provider (the worker's without
// [tracing] endpoint) no span is started, yet a message enqueued under a
// span context stores it, and its handler's ctx carries it, for the
// handler to pass on; one enqueued outside a trace carries none.
func TestTracesWithoutSDK(t *testing.T) {
	addr := testAddr(t)
	c := newClient(t, addr, Options{Partitions: 2, TracerProvider: noop.NewTracerProvider()})
	const topic = "untraced"
	sc := parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if _, err := c.Send(trace.ContextWithRemoteSpanContext(context.Background(), sc), Message{Topic: topic, ID: "in-trace"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(context.Background(), Message{Topic: topic, ID: "outside"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]trace.SpanContext{}
	runConsumer(t, c, ConsumerOptions{Topic: topic, PollInterval: 100 * time.Millisecond, Lease: time.Second}, func(ctx context.Context, d *Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[d.ID] = trace.SpanContextFromContext(ctx)
		return nil
	})
	waitFor(t, 10*time.Second, "both delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if g := got["in-trace"]; g.TraceID() != sc.TraceID() || g.SpanID() != sc.SpanID() {
		t.Errorf("the handler's ctx holds %v/%v, want the stored context %v/%v", g.TraceID(), g.SpanID(), sc.TraceID(), sc.SpanID())
	}
	if g := got["outside"]; g.IsValid() {
		t.Errorf("a message enqueued outside a trace: the handler's ctx holds %v", g.TraceID())
	}
}

// TestTracingFollowsGlobalProvider: a client made without a provider,
// before the application sets the global one, starts no span while the
// global is OpenTelemetry's stand-in (its spans would record nothing),
// and records through it once a provider is set.
func TestTracingFollowsGlobalProvider(t *testing.T) {
	c := &Client{}
	c.tracer, c.tracing, c.standIn = newTracer(nil)
	if c.standIn == nil {
		t.Fatalf("the global provider %T is not taken for the stand-in; a test of this package set one?", otel.GetTracerProvider())
	}
	if c.tracingNow() {
		t.Errorf("tracing with no provider set: spans of the stand-in would record nothing")
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider()) // later clients: no spans, as with the stand-in
		tp.Shutdown(context.Background())
	})
	if !c.tracingNow() {
		t.Fatalf("not tracing once a provider is set")
	}
	_, span := c.tracer.Start(context.Background(), "probe")
	span.End()
	if got := len(exp.GetSpans()); got != 1 {
		t.Errorf("%d spans recorded through the stand-in once a provider is set, want 1", got)
	}
}
