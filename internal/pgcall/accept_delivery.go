package pgcall

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

// AcceptDeliveryParams are the arguments of inbox.accept_delivery. AggregateRevision 0 means
// "not ordered" (NULL: no revision check).
type AcceptDeliveryParams struct {
	ConsumerName      string
	ProjectionName    string
	ProjectionVersion int
	EventID           string
	EnvelopeSHA256    string
	AggregateID       string
	AggregateRevision int64
	// EventEnvelope, Receipt, DigestCandidate: as for RecordReceiptParams (the D-2 hot path:
	// canonical texts).
	EventEnvelope   json.RawMessage
	Receipt         json.RawMessage
	DigestCandidate json.RawMessage
}

// AcceptDeliveryResult is the row inbox.accept_delivery returns: Outcome "new" (Ref, Digest
// set), "existing" (Document: the stored receipt, byte for byte), "gap" or "duplicate_revision".
type AcceptDeliveryResult struct {
	Outcome  string
	Ref      string
	Digest   string
	Document json.RawMessage
}

// Outcomes of inbox.accept_delivery beyond ReceiptNew / ReceiptExisting.
const (
	AcceptGap               = "gap"
	AcceptDuplicateRevision = "duplicate_revision"
)

const acceptDeliverySQL = `SELECT outcome, receipt_ref, receipt_digest, receipt_document::text
FROM inbox.accept_delivery($1::text, $2::text, $3::int, $4::uuid, $5::text, $6::text, $7::bigint, $8::json, $9::json, $10::text)`

func (p AcceptDeliveryParams) args() []any {
	var rev *int64
	if p.AggregateRevision != 0 {
		rev = &p.AggregateRevision
	}
	var candidate *string
	if p.DigestCandidate != nil {
		s := string(p.DigestCandidate)
		candidate = &s
	}
	return []any{p.ConsumerName, p.ProjectionName, p.ProjectionVersion, p.EventID, p.EnvelopeSHA256,
		p.AggregateID, rev, string(p.EventEnvelope), string(p.Receipt), candidate}
}

func scanAccept(row pgx.Row, r *AcceptDeliveryResult) error {
	var ref, digest, doc *string
	if err := row.Scan(&r.Outcome, &ref, &digest, &doc); err != nil {
		return interpretError("accept delivery", err)
	}
	if ref != nil {
		r.Ref = *ref
	}
	if digest != nil {
		r.Digest = *digest
	}
	if doc != nil {
		r.Document = json.RawMessage(*doc)
	}
	return nil
}

// AcceptDelivery calls inbox.accept_delivery on db (inside the consumer's transaction).
// Errors as RecordReceipt's (ErrReceiptConflict, ErrAckRejected, ErrNotCanonicalizable,
// ErrEnvelopeInvalid). Caller role: outbox_consumer.
func AcceptDelivery(ctx context.Context, db DBTX, p AcceptDeliveryParams) (AcceptDeliveryResult, error) {
	var r AcceptDeliveryResult
	err := scanAccept(db.QueryRow(ctx, acceptDeliverySQL, p.args()...), &r)
	return r, err
}

// QueueAcceptDelivery queues inbox.accept_delivery on b (the consumer kit's one-round-trip
// chain); *out is filled when the batch's results are read, even if a later statement of the
// chain fails.
func QueueAcceptDelivery(b *pgx.Batch, p AcceptDeliveryParams, out *AcceptDeliveryResult) {
	b.Queue(acceptDeliverySQL, p.args()...).QueryRow(func(row pgx.Row) error { return scanAccept(row, out) })
}
