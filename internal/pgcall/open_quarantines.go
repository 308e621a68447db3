package pgcall

import (
	"context"
	"time"
)

// OpenQuarantine is one row of the outbox.open_quarantines view: a delivery quarantined now,
// with its current quarantine row and how often it was re-delivered before (R-AK-10).
type OpenQuarantine struct {
	Destination    string
	EventID        string
	EventType      string
	SchemaVersion  string
	ConsumerName   string
	Reason         string
	LastErrorCode  *string
	AttemptCount   int
	QuarantinedAt  time.Time
	AcknowledgedAt *time.Time
	CaseID         *string
	Recoveries     int
}

const openQuarantinesSQL = `SELECT destination, event_id::text, event_type, schema_version, consumer_name, reason,
       last_error_code, attempt_count, quarantined_at, acknowledged_at, case_id, recoveries::int
FROM outbox.open_quarantines
WHERE ($1::text IS NULL OR destination = $1::text)
  AND ($2::text IS NULL OR reason = $2::text)
LIMIT $3::int`

// OpenQuarantines reads at most limit rows of outbox.open_quarantines (newest first), optionally
// only one destination and/or one quarantine reason. Caller role: outbox_auditor.
func OpenQuarantines(ctx context.Context, db DBTX, destination, reason *string, limit int) ([]OpenQuarantine, error) {
	rows, err := db.Query(ctx, openQuarantinesSQL, destination, reason, limit)
	if err != nil {
		return nil, interpretError("open quarantines", err)
	}
	defer rows.Close()
	var out []OpenQuarantine
	for rows.Next() {
		var q OpenQuarantine
		if err := rows.Scan(&q.Destination, &q.EventID, &q.EventType, &q.SchemaVersion, &q.ConsumerName, &q.Reason,
			&q.LastErrorCode, &q.AttemptCount, &q.QuarantinedAt, &q.AcknowledgedAt, &q.CaseID, &q.Recoveries); err != nil {
			return nil, interpretError("open quarantines", err)
		}
		out = append(out, q)
	}
	return out, interpretError("open quarantines", rows.Err())
}
