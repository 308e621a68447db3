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
	// TraceParent and TraceState are the optional W3C trace context stored beside the event
	// (R-DP-7); "" sends NULL. Never part of the envelope or its digest.
	TraceParent, TraceState string
}

// AppendResult is the row outbox.append_event returns.
type AppendResult struct {
	EventID        string
	EnvelopeSHA256 string
	DeliveryCount  int
}

const appendEventSQL = `SELECT event_id::text, event_envelope_sha256, delivery_count
FROM outbox.append_event($1::json, $2::text, $3::text, $4::text, $5::text)`

// AppendEvent calls outbox.append_event inside the caller's transaction. Caller role:
// outbox_producer.
func AppendEvent(ctx context.Context, db DBTX, p AppendParams) (AppendResult, error) {
	var r AppendResult
	err := db.QueryRow(ctx, appendEventSQL, string(p.Event), p.CanonicalText, p.EnvelopeSHA256,
		nullText(p.TraceParent), nullText(p.TraceState)).
		Scan(&r.EventID, &r.EnvelopeSHA256, &r.DeliveryCount)
	return r, interpretError("append event", err)
}

// nullText is nil for "" (SQL NULL) and s otherwise.
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
