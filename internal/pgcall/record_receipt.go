package pgcall

import (
	"context"
	"encoding/json"
)

// RecordReceiptParams are the arguments of inbox.record_receipt. ProjectionName/Version are
// "" and 0 for a consumer without projection.
type RecordReceiptParams struct {
	ConsumerName      string
	ProjectionName    string
	ProjectionVersion int
	// EventEnvelope is the EventEnvelope@1 the consumer applied; the database computes its digest.
	EventEnvelope json.RawMessage
	// Receipt is the receipt document (SPEC R-AK-1a); its ref and digest may be omitted (filled in).
	Receipt json.RawMessage
}

// RecordReceiptResult is the row inbox.record_receipt returns. Outcome is "new" or "existing";
// for "existing" Ref and Digest are the first receipt's.
type RecordReceiptResult struct {
	Outcome string
	Ref     string
	Digest  string
}

// Outcomes of inbox.record_receipt.
const (
	ReceiptNew      = "new"
	ReceiptExisting = "existing"
)

const recordReceiptSQL = `SELECT outcome, receipt_ref, receipt_digest
FROM inbox.record_receipt($1::text, $2::text, $3::int, $4::json, $5::json)`

// RecordReceipt calls inbox.record_receipt inside the consumer's transaction (insert-or-compare,
// SPEC R-CO-1). ErrReceiptConflict (OB301) when the event id was received with another envelope
// digest; ErrAckRejected (OB002) when the receipt is inconsistent. Caller role: outbox_consumer.
func RecordReceipt(ctx context.Context, db DBTX, p RecordReceiptParams) (RecordReceiptResult, error) {
	var r RecordReceiptResult
	err := db.QueryRow(ctx, recordReceiptSQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion,
		string(p.EventEnvelope), string(p.Receipt)).Scan(&r.Outcome, &r.Ref, &r.Digest)
	return r, interpretError("record receipt", err)
}
