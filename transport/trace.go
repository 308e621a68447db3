package transport

import (
	"github.com/nats-io/nats.go"

	"github.com/oceanway/pgoutbox/wire"
)

// setNATSTrace sets the W3C traceparent/tracestate message headers of d (SPEC R-DP-7); nothing
// when the event has no trace context, so the message is then exactly what it was without
// tracing. (The HTTP transport sends the same headers through wire.SetHeaders.)
func setNATSTrace(h nats.Header, d wire.Delivery) {
	if d.TraceParent == "" {
		return
	}
	h.Set(wire.HeaderTraceParent, d.TraceParent)
	if d.TraceState != "" {
		h.Set(wire.HeaderTraceState, d.TraceState)
	}
}
