package pgcall

import "context"

const retryDeliverySQL = `SELECT outbox.retry_delivery($1::text, $2::uuid, $3::uuid, $4::uuid, $5::text, $6::text)`

// RetryDelivery calls outbox.retry_delivery: closes the attempt as retryable and schedules the
// delivery per the destination's retry policy ("pending"), or quarantines it with reason
// retry_exhausted once max attempts is reached ("quarantined") (R-AK-5, R-AK-7). errorCode must
// be a retryable code of outbox.error_codes. Caller role: outbox_dispatcher.
func RetryDelivery(ctx context.Context, db DBTX, f Fence, errorCode string, errorRef *string) (string, error) {
	var s string
	err := db.QueryRow(ctx, retryDeliverySQL, f.Destination, f.EventID, f.AttemptID, f.LeaseToken, errorCode, errorRef).Scan(&s)
	return s, interpretError("retry delivery", err)
}
