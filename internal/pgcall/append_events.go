package pgcall

import (
	"context"
	"encoding/json"
)

// AppendEventsParams are the arguments of outbox.append_events. Events is a JSON array of
// EventEnvelope@1 objects. CanonicalTexts and EnvelopeSHA256s are the D-2 hot path: both nil
// (the database canonicalizes every element) or both parallel to Events, one entry per element
// (an element whose entries are both nil is canonicalized by the database).
type AppendEventsParams struct {
	Events          json.RawMessage
	CanonicalTexts  []*string
	EnvelopeSHA256s []*string
	// TraceParent and TraceState are the optional W3C trace context of the call, stored beside
	// each event it appends (R-DP-7); "" sends NULL. Never part of an envelope or its digest.
	TraceParent, TraceState string
}

// appendEventsSQL is the call without a trace context (the arguments before migration 048);
// appendEventsTracedSQL passes it (R-DP-7).
const (
	appendEventsSQL = `SELECT event_id::text, event_envelope_sha256, delivery_count
FROM outbox.append_events($1::json, $2::text[], $3::text[])`
	appendEventsTracedSQL = `SELECT event_id::text, event_envelope_sha256, delivery_count
FROM outbox.append_events($1::json, $2::text[], $3::text[], $4::text, $5::text)`
)

// AppendEvents calls outbox.append_events inside the caller's transaction and returns one row
// per element, in input order. Any invalid element fails the whole call (OB103, OB105, OB201).
// Caller role: outbox_producer.
func AppendEvents(ctx context.Context, db DBTX, p AppendEventsParams) ([]AppendResult, error) {
	sql, args := appendEventsSQL, []any{string(p.Events), p.CanonicalTexts, p.EnvelopeSHA256s}
	if p.TraceParent != "" || p.TraceState != "" {
		sql, args = appendEventsTracedSQL, append(args, nullText(p.TraceParent), nullText(p.TraceState))
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpretError("append events", err)
	}
	defer rows.Close()
	var out []AppendResult
	for rows.Next() {
		var r AppendResult
		if err := rows.Scan(&r.EventID, &r.EnvelopeSHA256, &r.DeliveryCount); err != nil {
			return nil, interpretError("append events", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError("append events", err)
	}
	return out, nil
}
