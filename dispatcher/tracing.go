package dispatcher

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
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
	if sc, ok := tracing.SpanContext(r.TraceParent, r.TraceState); ok {
		return log.With("trace_id", sc.TraceID().String())
	}
	return log
}

// deliverTraced is safeDeliver inside the delivery span: a new root span (a retry days later is
// not a child of the append) LINKED to the producer's context when the event carries one, with
// the delivery's identity as attributes and the answer as its status. With the default no-op
// tracer provider it costs nothing.
func (d *Dispatcher) deliverTraced(ctx context.Context, t transport.Transport, dl wire.Delivery) (wire.Result, error) {
	ctx, span := d.tracer.Start(ctx, DeliverySpanName, tracing.LinkOptions(dl.TraceParent, dl.TraceState,
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("pgoutbox.destination", dl.Destination),
			attribute.String("pgoutbox.consumer", dl.ConsumerName),
			attribute.String("pgoutbox.event_id", dl.EventID),
			attribute.String("pgoutbox.attempt_id", dl.AttemptID),
			attribute.Int("pgoutbox.attempt_number", dl.AttemptNumber),
		))...)
	defer span.End()
	res, err := safeDeliver(ctx, t, dl)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, "transport error")
	case res.Status == wire.Acknowledged:
		span.SetAttributes(attribute.String("pgoutbox.answer", res.Status.String()))
	default:
		span.SetAttributes(attribute.String("pgoutbox.answer", res.Status.String()), attribute.String("pgoutbox.error_code", res.Code))
		span.SetStatus(codes.Error, res.Code)
	}
	return res, err
}
