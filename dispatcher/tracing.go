package dispatcher

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/tracing"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// DeliverySpanName is the name of the dispatcher's span around one transport call (R-DP-7).
const DeliverySpanName = "pgoutbox.deliver"

// withTraceLog adds the producer's trace id (from the trace context stored beside the event) to
// a delivery's log lines, so an operator can follow the delivery back to the request that
// appended the event; nothing when the event has none.
func withTraceLog(log *slog.Logger, r pgcall.ClaimedDelivery) *slog.Logger {
	if id, ok := tracing.TraceID(r.TraceParent, r.TraceState); ok {
		return log.With("trace_id", id)
	}
	return log
}

// deliverTraced is safeDeliver inside the delivery span: a new root span (a retry days later is
// not a child of the append) LINKED to the producer's context when the event carries one, with
// the delivery's identity as attributes and the answer as its status. With the default no-op
// tracer provider it costs nothing.
func (d *Dispatcher) deliverTraced(ctx context.Context, t transport.Transport, dl wire.Delivery) (wire.Result, error) {
	ctx, span := d.tracer.Start(ctx, DeliverySpanName,
		tracing.DeliverySpanOptions(dl, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer))...)
	defer span.End()
	res, err := safeDeliver(ctx, t, dl)
	if err != nil {
		span.SetStatus(codes.Error, "transport error")
	} else {
		tracing.RecordResult(span, res)
	}
	return res, err
}
