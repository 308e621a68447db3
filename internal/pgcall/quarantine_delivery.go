package pgcall

import "context"

const quarantineDeliverySQL = `SELECT outbox.quarantine_delivery($1::text, $2::uuid, $3::uuid, $4::uuid, $5::text, $6::text, $7::text)`

// QuarantineDelivery calls outbox.quarantine_delivery: closes the attempt as non-retryable and
// moves the delivery to quarantine with the event digest (R-AK-6). reason must be a
// non-retryable code of outbox.error_codes; errorRef (nil for none) is the consumer's sanitized
// reference, kept on the finish and the delivery. Caller role: outbox_dispatcher.
func QuarantineDelivery(ctx context.Context, db DBTX, f Fence, reason, errorCode string, errorRef *string) error {
	_, err := db.Exec(ctx, quarantineDeliverySQL, f.Destination, f.EventID, f.AttemptID, f.LeaseToken, reason, errorCode, errorRef)
	return interpretError("quarantine delivery", err)
}
