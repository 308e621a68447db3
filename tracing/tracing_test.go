package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// R-DP-7: the producer's context round-trips through traceparent/tracestate; no span, an
// invalid span context or an invalid traceparent give nothing.
func TestTraceContextRoundTrip(t *testing.T) {
	t.Parallel()
	if tp, ts := FromContext(context.Background()); tp != "" || ts != "" {
		t.Fatalf("no span: %q %q", tp, ts)
	}
	state, _ := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled, TraceState: state})
	tp, ts := FromContext(trace.ContextWithSpanContext(context.Background(), sc))
	if tp != "00-01020300000000000000000000000000-0405060000000000-01" || ts != "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" {
		t.Fatalf("traceparent %q tracestate %q", tp, ts)
	}
	back, ok := SpanContext(tp, ts)
	if !ok || back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || !back.IsRemote() || back.TraceState().Get("congo") != "t61rcWkgMzE" {
		t.Fatalf("parsed %+v %v", back, ok)
	}
	if n := len(LinkOptions(tp, ts)); n != 1 {
		t.Fatalf("%d options with a trace context, want the link", n)
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-0405060000000000-01", "garbage", "ff-01020300000000000000000000000000-0405060000000000-01"} {
		if _, ok := SpanContext(bad, ""); ok {
			t.Errorf("%q parsed", bad)
		}
		if n := len(LinkOptions(bad, "")); n != 0 {
			t.Errorf("%q: %d link options", bad, n)
		}
	}
	if id, span := IDs(context.Background()); id != "" || span != "" {
		t.Fatalf("IDs without a span: %q %q", id, span)
	}
}
