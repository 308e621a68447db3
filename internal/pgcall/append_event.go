package pgcall

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
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

// appendEventSQL is the call without a trace context: the same three arguments as before
// migration 048, so a producer without tracing works against any schema version;
// appendEventTracedSQL passes the trace context (R-DP-7).
const (
	appendEventSQL = `SELECT event_id::text, event_envelope_sha256, delivery_count
FROM outbox.append_event($1::json, $2::text, $3::text)`
	appendEventTracedSQL = `SELECT event_id::text, event_envelope_sha256, delivery_count
FROM outbox.append_event($1::json, $2::text, $3::text, $4::text, $5::text)`
)

// AppendEvent calls outbox.append_event inside the caller's transaction. Caller role:
// outbox_producer.
func AppendEvent(ctx context.Context, db DBTX, p AppendParams) (AppendResult, error) {
	var r AppendResult
	var row pgx.Row
	if p.TraceParent == "" && p.TraceState == "" {
		row = db.QueryRow(ctx, appendEventSQL, string(p.Event), p.CanonicalText, p.EnvelopeSHA256)
	} else {
		row = db.QueryRow(ctx, appendEventTracedSQL, string(p.Event), p.CanonicalText, p.EnvelopeSHA256,
			nullText(p.TraceParent), nullText(p.TraceState))
	}
	err := row.Scan(&r.EventID, &r.EnvelopeSHA256, &r.DeliveryCount)
	return r, interpretError("append event", err)
}

// nullText is nil for "" (SQL NULL) and s otherwise.
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
