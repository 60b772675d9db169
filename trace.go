package delayq

import (
	"context"
	"reflect"
	"strconv"
	"time"

	"github.com/delayq/delayq/poller"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Traces. An enqueue made under a span (a valid span context in its ctx)
// starts a producer span, "delayq.send <topic>", and stores its context
// with the message as a W3C traceparent; an enqueue outside any span
// stores nothing and starts no span. Each delivery's handler runs in a
// consumer span, "delayq.deliver <topic>", a child of the stored context
// and linked to it (see startDelivery); once the delivery's outcome is
// written, a short child span of the delivery, "delayq.ack <topic>" (or
// retry, dead, kept, left: see poller.Settlement), records the write.
// Spans come from Options.TracerProvider. The traceparent is written
// and read by the W3C Trace Context format itself, not the global
// propagator, which is a no-op until an application sets one: the
// stored context does not depend on it.

// tracerName is the instrumentation scope of delayq's spans.
const tracerName = "github.com/delayq/delayq"

// messagingSystem is the messaging.system attribute of delayq's spans.
const messagingSystem = "delayq"

// Attributes of delayq's spans beyond the messaging semantic conventions.
const (
	attrAttempt   = attribute.Key("delayq.attempt")
	attrPartition = attribute.Key("delayq.partition")
	attrLateness  = attribute.Key("delayq.lateness_ms")
	attrOutcome   = attribute.Key("delayq.outcome")
)

// newTracer returns the tracer of delayq's spans from tp, or from the
// global provider when tp is nil, whether it may record, and the
// stand-in it came from, if any. A no-op provider (noop.TracerProvider,
// as the worker's without an endpoint) never records, and then no span
// is started at all; the context stored with messages is still passed
// on. The global provider before otel.SetTracerProvider is a stand-in
// that delegates to the one an application sets later, so a client made
// before that set-up traces too; until then its spans record nothing,
// and Client.tracingNow skips them (a span of the stand-in costs about
// half a microsecond a delivery).
func newTracer(tp trace.TracerProvider) (tr trace.Tracer, tracing bool, standIn trace.TracerProvider) {
	if tp == nil {
		tp = otel.GetTracerProvider()
		if t := reflect.TypeOf(tp); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == otelGlobalPkg {
			standIn = tp
		}
	}
	_, off := tp.(noop.TracerProvider)
	return tp.Tracer(tracerName), !off, standIn
}

// otelGlobalPkg is the package of OpenTelemetry's stand-in global
// provider.
const otelGlobalPkg = "go.opentelemetry.io/otel/internal/global"

// tracingNow reports whether spans may record now: the provider is not a
// no-op, and not the global stand-in while no provider was set (see
// newTracer).
func (c *Client) tracingNow() bool {
	return c.tracing && (c.standIn == nil || otel.GetTracerProvider() != c.standIn)
}

// traceCarrier is the propagation carrier of a record's trace: it holds
// the traceparent alone (a tracestate is not stored).
type traceCarrier struct{ parent string }

// Get returns the traceparent.
func (c *traceCarrier) Get(key string) string {
	if key == "traceparent" {
		return c.parent
	}
	return ""
}

// Set keeps a traceparent.
func (c *traceCarrier) Set(key, value string) {
	if key == "traceparent" {
		c.parent = value
	}
}

// Keys returns the key the carrier holds.
func (c *traceCarrier) Keys() []string { return []string{"traceparent"} }

// traceparent returns the W3C traceparent of the span context in ctx, ""
// when it has none.
func traceparent(ctx context.Context) string {
	var c traceCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.parent
}

// parseTraceparent returns the remote span context a traceparent holds,
// invalid when s is not one.
func parseTraceparent(s string) trace.SpanContext {
	if s == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), &traceCarrier{parent: s})
	return trace.SpanContextFromContext(ctx)
}

// sendSpan is the producer span of an enqueue (see startSend); a nil one
// is that of an enqueue outside any trace, and its methods do nothing.
type sendSpan struct {
	span trace.Span
}

// startSend starts the producer span of an enqueue of n messages to
// topic ("" for several topics), when ctx carries a span context, and
// returns the traceparent its messages store. Outside a trace it returns
// nil and "" and costs one look-up in ctx; with a no-op provider, the
// traceparent is ctx's, without a span.
func (c *Client) startSend(ctx context.Context, topic string, n int) (*sendSpan, string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil, ""
	}
	if !c.tracingNow() {
		return nil, traceparent(ctx)
	}
	name := "delayq.send"
	if topic != "" {
		name += " " + topic
	}
	ctx, span := c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemKey.String(messagingSystem),
			semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"))
		if topic != "" {
			span.SetAttributes(semconv.MessagingDestinationName(topic))
		}
		if n != 1 {
			span.SetAttributes(semconv.MessagingBatchMessageCount(n))
		}
	}
	return &sendSpan{span}, traceparent(ctx)
}

// end ends the span of an enqueue of one message, with its result.
func (s *sendSpan) end(res SendResult, err error) {
	if s == nil {
		return
	}
	if s.span.IsRecording() {
		if res.ID != "" {
			s.span.SetAttributes(semconv.MessagingMessageID(res.ID))
		}
		if res.Outcome != "" {
			s.span.SetAttributes(attrOutcome.String(string(res.Outcome)))
		}
	}
	s.endErr(err)
}

// endErr ends the span, with err as its status when not nil.
func (s *sendSpan) endErr(err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// deliverOpts are the options of the span of a delivery of a message
// enqueued outside a trace: shared, so that starting it allocates no
// options.
var deliverOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// startDelivery starts the consumer span a delivery's handler runs in,
// and returns ctx with it. The span is a child of the context stored at
// the enqueue (rec.Trace), so that a message's enqueue, its attempts
// and their outcomes make one trace, and it links to that context too,
// as the messaging semantic conventions ask of a consumer, for the tools
// that follow links. A message enqueued outside a trace gets a root span
// (or a non-recording one without an SDK). With a no-op provider no span
// is started (nil), and ctx only carries the stored context, so that a
// handler passes it on (the http handler's traceparent header).
func (k *Consumer) startDelivery(ctx context.Context, m *poller.Msg) (context.Context, trace.Span) {
	sc := parseTraceparent(m.Record.Trace)
	if sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if !k.c.tracingNow() {
		return ctx, nil
	}
	opts := deliverOpts
	if sc.IsValid() {
		opts = []trace.SpanStartOption{deliverOpts[0], trace.WithLinks(trace.Link{SpanContext: sc})}
	}
	ctx, span := k.c.tracer.Start(ctx, k.deliverName, opts...)
	if span.IsRecording() {
		start := k.c.opts.Now() // the client's clock, as the due's
		span.SetAttributes(
			semconv.MessagingSystemKey.String(messagingSystem),
			semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("deliver"),
			semconv.MessagingDestinationName(k.opts.Topic),
			semconv.MessagingDestinationPartitionID(strconv.Itoa(m.Partition)),
			semconv.MessagingMessageID(m.ID),
			attrAttempt.Int(m.Attempt()),
			attrPartition.Int(m.Partition),
			attrLateness.Int64(start.Sub(m.Due).Milliseconds()),
		)
	}
	return ctx, span
}

// endDelivery ends the span of a delivery (nil: none) whose handler
// returned err, and, when the span records, has the partition's loop
// record the write of its outcome in a child span, from now to the
// write (see poller.Msg.Settled).
func (k *Consumer) endDelivery(span trace.Span, m *poller.Msg, err error) {
	if span == nil {
		return
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	end := time.Now()
	topic := k.opts.Topic
	ctx := trace.ContextWithSpan(context.Background(), span)
	m.Settled = func(s poller.Settlement) {
		_, ack := k.c.tracer.Start(ctx, "delayq."+string(s)+" "+topic, trace.WithTimestamp(end),
			trace.WithAttributes(semconv.MessagingSystemKey.String(messagingSystem),
				semconv.MessagingOperationTypeSettle, semconv.MessagingOperationName(string(s)),
				semconv.MessagingDestinationName(topic), semconv.MessagingMessageID(m.ID),
				attrOutcome.String(string(s))))
		switch s {
		case poller.SettledKept:
			ack.SetStatus(codes.Error, "the ack was not written before the partition's loop ended: kept to be written once redis answers")
		case poller.SettledLeft:
			ack.SetStatus(codes.Error, "the outcome was not written: the message stays in flight for the partition's next owner")
		}
		ack.End()
	}
}
