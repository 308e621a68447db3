package pgcall

import (
	"context"
	"encoding/json"
)

const ackDeliverySQL = `SELECT outbox.ack_delivery($1::text, $2::uuid, $3::uuid, $4::uuid, $5::json, $6::json, $7::text)`

// AckDelivery calls outbox.ack_delivery with an ActiveConsumerAck@1 and the receipt body it
// summarizes (R-AK-1, R-AK-1a): on success the delivery is acknowledged and the publication
// function's result is returned, "complete" or "not_complete". ErrFencingRejected (OB001) when
// the fence no longer holds, ErrAckRejected (OB002) when the ack or receipt does not match.
// An optional candidate is the D-2 hot-path argument: the canonical text of the receipt's digest
// candidate (receipt.DigestCandidate); without it the database canonicalizes the receipt itself.
// Caller role: outbox_dispatcher.
func AckDelivery(ctx context.Context, db DBTX, f Fence, ack, receipt json.RawMessage, candidate ...string) (string, error) {
	var s string
	var cand *string
	if len(candidate) > 0 && candidate[0] != "" {
		cand = &candidate[0]
	}
	err := db.QueryRow(ctx, ackDeliverySQL, f.Destination, f.EventID, f.AttemptID, f.LeaseToken, string(ack), string(receipt), cand).Scan(&s)
	return s, interpretError("ack delivery", err)
}
