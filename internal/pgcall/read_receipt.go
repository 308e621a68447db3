package pgcall

import (
	"context"
	"encoding/json"
)

// ReadReceiptParams are the arguments of inbox.read_receipt.
type ReadReceiptParams struct {
	ConsumerName      string
	ProjectionName    string
	ProjectionVersion int
	EventID           string
	EnvelopeSHA256    string
}

const readReceiptSQL = `SELECT inbox.read_receipt($1::text, $2::text, $3::int, $4::uuid, $5::text)::text`

// ReadReceipt calls inbox.read_receipt: the stored canonical receipt document of the consumer
// for the event, or nil when there is none. ErrReceiptConflict (OB301) when the event was
// received with another envelope digest. Caller role: outbox_consumer.
func ReadReceipt(ctx context.Context, db DBTX, p ReadReceiptParams) (json.RawMessage, error) {
	var doc *string
	err := db.QueryRow(ctx, readReceiptSQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion,
		p.EventID, p.EnvelopeSHA256).Scan(&doc)
	if err != nil {
		return nil, interpretError("read receipt", err)
	}
	if doc == nil {
		return nil, nil
	}
	return json.RawMessage(*doc), nil
}
