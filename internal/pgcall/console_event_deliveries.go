package pgcall

import (
	"context"
	"time"
)

// ConsoleDelivery is one row of outbox.console_event_deliveries: a delivery of the event with
// its frozen member, state, last error, receipt quartet and latest quarantine. No lease token.
type ConsoleDelivery struct {
	Destination                  string
	ConsumerName                 string
	Mandatory                    bool
	ExpectedReceiptType          string
	ExpectedReceiptSchemaVersion int
	ProjectionState              *string
	RequiredProjectionName       *string
	RequiredProjectionVersion    *int
	Status                       string
	AvailableAt                  time.Time
	CreatedAt                    time.Time
	AttemptCount                 int
	RecoveryAttemptBase          int
	LeaseOwner                   *string
	LeaseExpiresAt               *time.Time
	LastAttemptAt                *time.Time
	LastErrorCode                *string
	LastErrorRef                 *string
	DeliveredAt                  *time.Time
	ReceiptKind                  *string
	ReceiptType                  *string
	ReceiptRef                   *string
	ReceiptSchemaVersion         *int
	ReceiptDigestAlgorithm       *string
	ReceiptDigest                *string
	QuarantineReason             *string
	QuarantinedAt                *time.Time
	CaseID                       *string
	Recoveries                   int64
}

const consoleEventDeliveriesSQL = `SELECT destination, consumer_name, mandatory, expected_receipt_type, expected_receipt_schema_version,
       projection_state, required_projection_name, required_projection_version, status, available_at, created_at,
       attempt_count, recovery_attempt_base, lease_owner, lease_expires_at, last_attempt_at, last_error_code,
       last_error_ref, delivered_at, ack_receipt_kind, ack_receipt_type, ack_receipt_ref, ack_receipt_schema_version,
       ack_receipt_digest_algorithm_version, ack_receipt_digest, quarantine_reason, quarantined_at, case_id, recoveries
FROM outbox.console_event_deliveries($1::uuid)`

// ConsoleEventDeliveries calls outbox.console_event_deliveries: every delivery of the event, in
// destination order. Caller role: outbox_auditor.
func ConsoleEventDeliveries(ctx context.Context, db DBTX, eventID string) ([]ConsoleDelivery, error) {
	rows, err := db.Query(ctx, consoleEventDeliveriesSQL, eventID)
	if err != nil {
		return nil, interpretError("console event deliveries", err)
	}
	defer rows.Close()
	var out []ConsoleDelivery
	for rows.Next() {
		var d ConsoleDelivery
		if err := rows.Scan(&d.Destination, &d.ConsumerName, &d.Mandatory, &d.ExpectedReceiptType,
			&d.ExpectedReceiptSchemaVersion, &d.ProjectionState, &d.RequiredProjectionName, &d.RequiredProjectionVersion,
			&d.Status, &d.AvailableAt, &d.CreatedAt, &d.AttemptCount, &d.RecoveryAttemptBase, &d.LeaseOwner,
			&d.LeaseExpiresAt, &d.LastAttemptAt, &d.LastErrorCode, &d.LastErrorRef, &d.DeliveredAt, &d.ReceiptKind,
			&d.ReceiptType, &d.ReceiptRef, &d.ReceiptSchemaVersion, &d.ReceiptDigestAlgorithm, &d.ReceiptDigest,
			&d.QuarantineReason, &d.QuarantinedAt, &d.CaseID, &d.Recoveries); err != nil {
			return nil, interpretError("console event deliveries", err)
		}
		out = append(out, d)
	}
	return out, interpretError("console event deliveries", rows.Err())
}
