// Package tracing carries a W3C Trace Context (https://www.w3.org/TR/trace-context/) across
// pgoutbox (SPEC R-DP-7) with the OpenTelemetry Go API: the producer library takes the
// traceparent/tracestate of the span active in its context.Context and stores them beside the
// event (never inside the digested envelope); the dispatcher sends them as the traceparent and
// tracestate headers of the HTTP request or NATS message; the dispatcher's delivery span and the
// consumer kit's handling span LINK to that producer context - they are not its children: a
// retry days later is its own trace, linked to the request that appended the event (as River's
// otelriver and Debezium's tracing do).
//
// Nothing here installs a tracer provider: spans go to whatever the application set with
// otel.SetTracerProvider (or the provider passed explicitly); with none, the OpenTelemetry
// no-op provider makes every span free. Without a trace context on the event nothing changes:
// no header is sent and the spans have no link.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oceanway/pgoutbox/wire"
)

// Header names of the W3C Trace Context (lower case, as the recommendation writes them; HTTP
// canonicalizes them, NATS headers are read case-sensitively with these exact names).
const (
	HeaderTraceParent = wire.HeaderTraceParent
	HeaderTraceState  = wire.HeaderTraceState
)

// ScopeName is the instrumentation scope of pgoutbox's spans.
const ScopeName = "github.com/oceanway/pgoutbox"

var w3c = propagation.TraceContext{}

// FromContext returns the W3C traceparent and tracestate of the span context active in ctx, or
// "" and "" when there is none (no span, or an invalid span context).
func FromContext(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c[HeaderTraceParent], c[HeaderTraceState]
}

// SpanContext parses a stored or received traceparent/tracestate into a remote span context;
// ok is false when traceparent is empty or not valid (the caller then links nothing).
func SpanContext(traceparent, tracestate string) (trace.SpanContext, bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	c := propagation.MapCarrier{HeaderTraceParent: traceparent}
	if tracestate != "" {
		c[HeaderTraceState] = tracestate
	}
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), c))
	return sc, sc.IsValid()
}

// LinkOptions returns the span start option that links a new span to the producer's context
// (none when there is no valid trace context).
func LinkOptions(traceparent, tracestate string, attrs ...trace.SpanStartOption) []trace.SpanStartOption {
	if sc, ok := SpanContext(traceparent, tracestate); ok {
		attrs = append(attrs, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return attrs
}

// DeliverySpanOptions returns the start options of a span around one delivery (the dispatcher's
// delivery span, the consumer kit's handling span): opts, the delivery's identity as attributes
// (no payload) and the link to the producer's context when the event carries one.
func DeliverySpanOptions(d wire.Delivery, opts ...trace.SpanStartOption) []trace.SpanStartOption {
	opts = append(opts, trace.WithAttributes(
		attribute.String("pgoutbox.destination", d.Destination),
		attribute.String("pgoutbox.consumer", d.ConsumerName),
		attribute.String("pgoutbox.event_id", d.EventID),
		attribute.String("pgoutbox.attempt_id", d.AttemptID),
		attribute.Int("pgoutbox.attempt_number", d.AttemptNumber),
	))
	return LinkOptions(d.TraceParent, d.TraceState, opts...)
}

// RecordResult records a delivery's answer on its span: the answer, and for anything but an
// acknowledgement its error code and an error status.
func RecordResult(span trace.Span, r wire.Result) {
	span.SetAttributes(attribute.String("pgoutbox.answer", r.Status.String()))
	if r.Status != wire.Acknowledged {
		span.SetAttributes(attribute.String("pgoutbox.error_code", r.Code))
		span.SetStatus(codes.Error, r.Code)
	}
}

// TraceID returns the hex trace id of a stored or received trace context for structured logs
// (trace_id); ok is false without a valid one.
func TraceID(traceparent, tracestate string) (string, bool) {
	sc, ok := SpanContext(traceparent, tracestate)
	if !ok {
		return "", false
	}
	return sc.TraceID().String(), true
}

// Tracer returns pgoutbox's tracer from tp, or from the global provider when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// IDs returns the trace and span id of the span in ctx as hex, or "" and "" without a valid
// one: for structured logs (trace_id, span_id).
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}
