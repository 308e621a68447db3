package pgcall

import (
	"context"
	"time"
)

// RedeliveryPreview is the row of outbox.preview_redelivery: what a controlled recovery of one
// delivery would do (R-AK-10). QuarantineReason and QuarantinedAt are nil when the delivery is
// not quarantined (WouldChange then says why a recovery would be refused).
type RedeliveryPreview struct {
	Destination      string
	EventID          string
	EventType        string
	ConsumerName     string
	Status           string
	AttemptCount     int
	QuarantineReason *string
	QuarantinedAt    *time.Time
	Published        bool
	WouldChange      string
}

const previewRedeliverySQL = `SELECT destination, event_id::text, event_type, consumer_name, status, attempt_count,
       quarantine_reason, quarantined_at, published, would_change
FROM outbox.preview_redelivery($1::text, $2::uuid)`

// PreviewRedelivery calls outbox.preview_redelivery: the impact preview of a re-delivery of the
// quarantined delivery (destination, eventID); it changes nothing. 22023 when there is no such
// delivery. Caller roles: outbox_operator, outbox_auditor.
func PreviewRedelivery(ctx context.Context, db DBTX, destination, eventID string) (RedeliveryPreview, error) {
	var p RedeliveryPreview
	err := db.QueryRow(ctx, previewRedeliverySQL, destination, eventID).Scan(&p.Destination, &p.EventID, &p.EventType,
		&p.ConsumerName, &p.Status, &p.AttemptCount, &p.QuarantineReason, &p.QuarantinedAt, &p.Published, &p.WouldChange)
	return p, interpretError("preview redelivery", err)
}
