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
	// EventEnvelope is the EventEnvelope@1 the consumer applied. Passed byte for byte (json keeps
	// the text): canonical bytes are hashed as they are, anything else is canonicalized by the
	// database (SPEC D-2).
	EventEnvelope json.RawMessage
	// Receipt is the receipt document (SPEC R-AK-1a); its ref and digest may be omitted (filled
	// in). On the hot path it is the canonical text of the complete receipt.
	Receipt json.RawMessage
	// DigestCandidate, when set, is the canonical text of the receipt's digest candidate
	// (receipt.DigestCandidate): the database verifies it instead of canonicalizing (D-2 hot
	// path). Nil: the database canonicalizes (slow path).
	DigestCandidate json.RawMessage
	// BuildToken is the live build token of a shadow projection version (outbox.start_shadow_build,
	// SPEC R-PV-1); "" for an active or frozen version, which take none.
	BuildToken string
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
FROM inbox.record_receipt($1::text, $2::text, $3::int, $4::json, $5::json, $6::text, $7::uuid)`

// RecordReceipt calls inbox.record_receipt inside the consumer's transaction (insert-or-compare,
// SPEC R-CO-1). ErrReceiptConflict (OB301) when the event id was received with another envelope
// digest; ErrAckRejected (OB002) when the receipt is inconsistent, not closed, or the candidate
// is not the receipt's; ErrNotCanonicalizable (OB201) when a document or the candidate is not
// canonical; ErrProjectionNotRegistered (OB802) an unregistered or retired projection version;
// ErrFencingRejected (OB001) a shadow version without its live build token, or a token for an
// active/frozen version. Caller role: outbox_consumer.
func RecordReceipt(ctx context.Context, db DBTX, p RecordReceiptParams) (RecordReceiptResult, error) {
	var r RecordReceiptResult
	var candidate *string
	if p.DigestCandidate != nil {
		s := string(p.DigestCandidate)
		candidate = &s
	}
	err := db.QueryRow(ctx, recordReceiptSQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion,
		string(p.EventEnvelope), string(p.Receipt), candidate, optionalUUID(p.BuildToken)).Scan(&r.Outcome, &r.Ref, &r.Digest)
	return r, interpretError("record receipt", err)
}

// optionalUUID is nil (SQL NULL) for "", else the text of a uuid argument.
func optionalUUID(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
