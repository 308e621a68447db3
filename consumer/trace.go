package consumer

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/oceanway/pgoutbox/tracing"
	"github.com/oceanway/pgoutbox/wire"
)

// HandlingSpanName is the name of the consumer kit's span around the handling of one delivery
// (R-DP-7).
const HandlingSpanName = "pgoutbox.handle"

// traceHeaders reads the W3C trace context the dispatcher sent (the producer's, stored beside
// the event); "" and "" when absent or not a valid traceparent (a tracing hint is never a
// reason to refuse a delivery).
func traceHeaders(h http.Header) (traceparent, tracestate string) {
	tp, ts := h.Get(wire.HeaderTraceParent), h.Get(wire.HeaderTraceState)
	if _, ok := tracing.SpanContext(tp, ts); !ok {
		return "", ""
	}
	return tp, ts
}

// traceLogAttrs is the producer's trace id for the kit's log lines, none without one.
func traceLogAttrs(d wire.Delivery) []any {
	if id, ok := tracing.TraceID(d.TraceParent, d.TraceState); ok {
		return []any{"trace_id", id}
	}
	return nil
}

// handlingSpan starts the kit's handling span on the global OpenTelemetry tracer provider
// (otel.SetTracerProvider; the no-op provider by default). It is a child of whatever span the
// server's context holds (an HTTP server instrumentation), else a new root, and it LINKS to the
// producer's context: a retry days later is not a child of the append.
func handlingSpan(ctx context.Context, d wire.Delivery) (context.Context, trace.Span) {
	return tracing.Tracer(nil).Start(ctx, HandlingSpanName,
		tracing.DeliverySpanOptions(d, trace.WithSpanKind(trace.SpanKindConsumer))...)
}

// endHandlingSpan records the kit's answer on the span and ends it.
func endHandlingSpan(span trace.Span, r wire.Result) {
	tracing.RecordResult(span, r)
	span.End()
}
