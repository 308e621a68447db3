package pgcall

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ClaimParams are the arguments of outbox.claim_deliveries.
type ClaimParams struct {
	Worker       string
	Destinations []string
	BatchSize    int
	Lease        time.Duration
}

// ClaimedDelivery is one row returned by outbox.claim_deliveries (SPEC §13), plus the event's
// type and schema version (extra trailing columns, for metrics labels).
type ClaimedDelivery struct {
	Destination, ConsumerName, EventID, AttemptID, LeaseToken string
	LeaseExpiresAt                                            time.Time
	AttemptNumber                                             int
	ExpectedReceiptType                                       string
	ExpectedReceiptSchemaVersion                              int
	RequiredProjectionName                                    *string
	RequiredProjectionVersion                                 *int
	EventEnvelope                                             json.RawMessage // the jsonb envelope as returned
	EventEnvelopeDigestAlgorithmVersion, EventEnvelopeSHA256  string
	EventType, EventSchemaVersion                             string
	// EventEnvelopeCanonical is the canonical envelope text the producer's database verified or
	// computed at append (D-2); nil for a row written outside append_event. When present,
	// EventEnvelope holds these same bytes and sha256(EventEnvelopeCanonical) is the whole
	// proof a dispatcher needs (P-5: no re-canonicalization).
	EventEnvelopeCanonical []byte
	// TraceParent and TraceState are the W3C trace context stored beside the event at append
	// (R-DP-7); "" when none.
	TraceParent, TraceState string
}

const claimDeliveriesSQL = `SELECT destination, consumer_name, event_id::text, attempt_id::text, lease_token::text,
       lease_expires_at, attempt_number, expected_receipt_type, expected_receipt_schema_version,
       required_projection_name, required_projection_version,
       CASE WHEN event_envelope_canonical IS NULL THEN event_envelope::text END,
       event_envelope_digest_algorithm_version, event_envelope_sha256, event_type, event_schema_version,
       event_envelope_canonical, coalesce(traceparent, ''), coalesce(tracestate, '')
FROM outbox.claim_deliveries($1::text, $2::text[], $3::int, $4::interval, 'canonical')`

// intervalString renders d as a PostgreSQL interval literal with microsecond precision.
func intervalString(d time.Duration) string {
	return fmt.Sprintf("%d microseconds", d.Microseconds())
}

// ClaimDeliveries calls outbox.claim_deliveries: leases up to BatchSize claimable deliveries of
// the given destinations to Worker for Lease, appending one attempt start per row in the same
// transaction (R-CL-1, R-CL-2, R-CL-5). Caller role: outbox_dispatcher.
func ClaimDeliveries(ctx context.Context, db DBTX, p ClaimParams) ([]ClaimedDelivery, error) {
	rows, err := db.Query(ctx, claimDeliveriesSQL, p.Worker, p.Destinations, p.BatchSize, intervalString(p.Lease))
	if err != nil {
		return nil, interpretError("claim deliveries", err)
	}
	defer rows.Close()
	var out []ClaimedDelivery
	for rows.Next() {
		var c ClaimedDelivery
		var env, canonical *string
		var projVersion *int32
		var attemptNumber, schemaVersion int32
		if err := rows.Scan(&c.Destination, &c.ConsumerName, &c.EventID, &c.AttemptID, &c.LeaseToken,
			&c.LeaseExpiresAt, &attemptNumber, &c.ExpectedReceiptType, &schemaVersion,
			&c.RequiredProjectionName, &projVersion, &env,
			&c.EventEnvelopeDigestAlgorithmVersion, &c.EventEnvelopeSHA256, &c.EventType, &c.EventSchemaVersion, &canonical,
			&c.TraceParent, &c.TraceState); err != nil {
			return nil, interpretError("claim deliveries", err)
		}
		c.AttemptNumber = int(attemptNumber)
		c.ExpectedReceiptSchemaVersion = int(schemaVersion)
		if projVersion != nil {
			v := int(*projVersion)
			c.RequiredProjectionVersion = &v
		}
		if canonical != nil {
			c.EventEnvelopeCanonical = []byte(*canonical)
			c.EventEnvelope = json.RawMessage(c.EventEnvelopeCanonical)
		} else if env != nil {
			c.EventEnvelope = json.RawMessage(*env)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError("claim deliveries", err)
	}
	return out, nil
}
