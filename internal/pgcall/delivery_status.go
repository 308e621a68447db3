package pgcall

import (
	"context"
	"time"
)

// DestinationStatus is one row of the outbox.delivery_status view (operator read).
type DestinationStatus struct {
	Destination      string
	ConsumerName     string
	Pending          int64
	Leased           int64
	Acknowledged     int64
	Quarantined      int64
	OldestPendingAt  *time.Time
	OldestPendingAge time.Duration
	OldestGapAge     time.Duration // oldest delivery waiting for an earlier revision (R-AK-5), 0 when none
}

// QuarantinedDelivery is one row of the outbox.quarantined_deliveries view.
type QuarantinedDelivery struct {
	Destination    string
	EventID        string
	EventType      string
	SchemaVersion  string
	Reason         string
	LastErrorCode  *string
	AttemptCount   int
	QuarantinedAt  time.Time
	AcknowledgedAt *time.Time
	CaseID         *string
}

const deliveryStatusSQL = `SELECT destination, consumer_name, pending, leased, acknowledged, quarantined,
       oldest_pending_at, oldest_pending_age_seconds::float8, oldest_gap_age_seconds::float8
FROM outbox.delivery_status ORDER BY destination`

// DeliveryStatus reads the outbox.delivery_status view. Caller role: outbox_auditor.
func DeliveryStatus(ctx context.Context, db DBTX) ([]DestinationStatus, error) {
	rows, err := db.Query(ctx, deliveryStatusSQL)
	if err != nil {
		return nil, interpretError("delivery status", err)
	}
	defer rows.Close()
	var out []DestinationStatus
	for rows.Next() {
		var s DestinationStatus
		var age, gap float64
		if err := rows.Scan(&s.Destination, &s.ConsumerName, &s.Pending, &s.Leased, &s.Acknowledged,
			&s.Quarantined, &s.OldestPendingAt, &age, &gap); err != nil {
			return nil, interpretError("delivery status", err)
		}
		s.OldestPendingAge = time.Duration(age * float64(time.Second))
		s.OldestGapAge = time.Duration(gap * float64(time.Second))
		out = append(out, s)
	}
	return out, interpretError("delivery status", rows.Err())
}

const quarantinedDeliveriesSQL = `SELECT destination, event_id::text, event_type, schema_version, reason,
       last_error_code, attempt_count, quarantined_at, acknowledged_at, case_id
FROM outbox.quarantined_deliveries
WHERE ($1::text IS NULL OR destination = $1::text)
LIMIT $2::int`

// QuarantinedDeliveries reads the newest limit rows of outbox.quarantined_deliveries, for one
// destination or (destination nil) all. Caller role: outbox_auditor.
func QuarantinedDeliveries(ctx context.Context, db DBTX, destination *string, limit int) ([]QuarantinedDelivery, error) {
	rows, err := db.Query(ctx, quarantinedDeliveriesSQL, destination, limit)
	if err != nil {
		return nil, interpretError("quarantined deliveries", err)
	}
	defer rows.Close()
	var out []QuarantinedDelivery
	for rows.Next() {
		var q QuarantinedDelivery
		if err := rows.Scan(&q.Destination, &q.EventID, &q.EventType, &q.SchemaVersion, &q.Reason,
			&q.LastErrorCode, &q.AttemptCount, &q.QuarantinedAt, &q.AcknowledgedAt, &q.CaseID); err != nil {
			return nil, interpretError("quarantined deliveries", err)
		}
		out = append(out, q)
	}
	return out, interpretError("quarantined deliveries", rows.Err())
}
