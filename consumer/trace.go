package consumer

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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
	if sc, ok := tracing.SpanContext(d.TraceParent, d.TraceState); ok {
		return []any{"trace_id", sc.TraceID().String()}
	}
	return nil
}

// handlingSpan starts the kit's handling span on the global OpenTelemetry tracer provider
// (otel.SetTracerProvider; the no-op provider by default). It is a child of whatever span the
// server's context holds (an HTTP server instrumentation), else a new root, and it LINKS to the
// producer's context: a retry days later is not a child of the append.
func handlingSpan(ctx context.Context, d wire.Delivery) (context.Context, trace.Span) {
	return tracing.Tracer(nil).Start(ctx, HandlingSpanName, tracing.LinkOptions(d.TraceParent, d.TraceState,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("pgoutbox.destination", d.Destination),
			attribute.String("pgoutbox.consumer", d.ConsumerName),
			attribute.String("pgoutbox.event_id", d.EventID),
			attribute.String("pgoutbox.attempt_id", d.AttemptID),
			attribute.Int("pgoutbox.attempt_number", d.AttemptNumber),
		))...)
}

// endHandlingSpan records the kit's answer on the span and ends it.
func endHandlingSpan(span trace.Span, r wire.Result) {
	span.SetAttributes(attribute.String("pgoutbox.answer", r.Status.String()))
	if r.Status != wire.Acknowledged {
		span.SetAttributes(attribute.String("pgoutbox.error_code", r.Code))
		span.SetStatus(codes.Error, r.Code)
	}
	span.End()
}
