package pgcall

import "context"

// DeliveryChannel is the NOTIFY channel outbox.append_event signals on commit, with the
// destination as payload (one notification per destination of the appended event).
const DeliveryChannel = "outbox_delivery"

const listenDeliveriesSQL = `LISTEN outbox_delivery`

// ListenDeliveries subscribes the session behind db (a dedicated connection) to
// DeliveryChannel. LISTEN needs no privilege. Caller role: outbox_dispatcher.
func ListenDeliveries(ctx context.Context, db DBTX) error {
	_, err := db.Exec(ctx, listenDeliveriesSQL)
	return interpretError("listen "+DeliveryChannel, err)
}
