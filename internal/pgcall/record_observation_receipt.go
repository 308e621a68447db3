package pgcall

import "context"

const recordObservationReceiptSQL = `SELECT outcome FROM inbox.record_observation_receipt($1::text, $2::text, $3::integer, $4::uuid, $5::text)`

// RecordObservationReceipt calls inbox.record_observation_receipt in the caller's transaction
// (the projector's mutation commits with it): "new" or "existing" (applied before: do not apply
// the mutation again). Errors: ErrReceiptConflict (OB301) a receipt of another digest;
// ErrAckRejected (OB002) not the accepted envelope digest or unknown observation; OB802
// projector not registered; 42501 the calling role is not bound to consumerName; 22023 out of
// form. Caller role: the projector's bound consumer role (member of outbox_consumer).
func RecordObservationReceipt(ctx context.Context, db DBTX, consumerName, projectionName string, projectionVersion int,
	observationID, acceptedEnvelopeSHA256 string) (string, error) {
	var outcome string
	err := db.QueryRow(ctx, recordObservationReceiptSQL, consumerName, projectionName, projectionVersion,
		observationID, acceptedEnvelopeSHA256).Scan(&outcome)
	return outcome, interpretError("record observation receipt", err)
}
