package pgcall

import (
	"context"
	"encoding/json"
)

// AppendParams are the arguments of outbox.append_event. CanonicalText and EnvelopeSHA256 are
// the D-2 hot path: both set (the database verifies them) or both nil (it canonicalizes itself).
type AppendParams struct {
	Event          json.RawMessage
	CanonicalText  *string
	EnvelopeSHA256 *string
}

// AppendResult is the row outbox.append_event returns.
type AppendResult struct {
	EventID        string
	EnvelopeSHA256 string
	DeliveryCount  int
}

const appendEventSQL = `SELECT event_id::text, event_envelope_sha256, delivery_count
FROM outbox.append_event($1::json, $2::text, $3::text)`

// AppendEvent calls outbox.append_event inside the caller's transaction. Caller role:
// outbox_producer.
func AppendEvent(ctx context.Context, db DBTX, p AppendParams) (AppendResult, error) {
	var r AppendResult
	err := db.QueryRow(ctx, appendEventSQL, string(p.Event), p.CanonicalText, p.EnvelopeSHA256).
		Scan(&r.EventID, &r.EnvelopeSHA256, &r.DeliveryCount)
	return r, interpretError("append event", err)
}
