package pgcall

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConfirmDeliveryParams are the arguments of inbox.confirm_delivery.
type ConfirmDeliveryParams struct {
	ConsumerName      string
	ProjectionName    string
	ProjectionVersion int
	EventID           string
}

const confirmDeliverySQL = `SELECT inbox.confirm_delivery($1::text, $2::text, $3::int, $4::uuid)`

// ConfirmDelivery calls inbox.confirm_delivery: ErrNotRecorded (OB302) unless this transaction
// inserted the event's receipt. Caller role: outbox_consumer.
func ConfirmDelivery(ctx context.Context, db DBTX, p ConfirmDeliveryParams) error {
	_, err := db.Exec(ctx, confirmDeliverySQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion, p.EventID)
	return interpretError("confirm delivery", err)
}

// QueueConfirmDelivery queues inbox.confirm_delivery on b as the last statement of the consumer
// kit's chain; its error (ErrNotRecorded) is the batch's.
func QueueConfirmDelivery(b *pgx.Batch, p ConfirmDeliveryParams) {
	b.Queue(confirmDeliverySQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion, p.EventID).
		Exec(func(pgconn.CommandTag) error { return nil })
}
