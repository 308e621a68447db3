package pgcall

import (
	"context"
	"time"
)

// ConsoleListItem is one row of outbox.console_deliveries.
type ConsoleListItem struct {
	Destination    string
	EventID        string
	EventType      string
	Status         string
	CreatedAt      time.Time
	AvailableAt    time.Time
	AttemptCount   int
	LastAttemptAt  *time.Time
	LastErrorCode  *string
	LeaseOwner     *string
	LeaseExpiresAt *time.Time
	DeliveredAt    *time.Time
}

// ConsoleCursor is the keyset cursor of a delivery list: the (created_at, event_id) of the last
// row of the previous page. The zero value asks for the first page.
type ConsoleCursor struct {
	CreatedAt time.Time
	EventID   string
}

// ConsoleListParams are the arguments of outbox.console_deliveries.
type ConsoleListParams struct {
	Destination string
	Status      string // pending | leased | quarantined | acknowledged
	After       ConsoleCursor
	Limit       int // 1..500
}

const consoleDeliveriesSQL = `SELECT destination, event_id::text, event_type, status, created_at, available_at, attempt_count,
       last_attempt_at, last_error_code, lease_owner, lease_expires_at, delivered_at
FROM outbox.console_deliveries($1::text, $2::text, $3::timestamptz, $4::uuid, $5::int)`

// ConsoleDeliveries calls outbox.console_deliveries: one keyset page of a destination's
// deliveries in one state, oldest first. 22023 for an unknown state, half a cursor or a limit
// outside 1..500. Caller role: outbox_auditor.
func ConsoleDeliveries(ctx context.Context, db DBTX, p ConsoleListParams) ([]ConsoleListItem, error) {
	var after *time.Time
	var afterID *string
	if p.After.EventID != "" {
		after, afterID = &p.After.CreatedAt, &p.After.EventID
	}
	rows, err := db.Query(ctx, consoleDeliveriesSQL, p.Destination, p.Status, after, afterID, p.Limit)
	if err != nil {
		return nil, interpretError("console deliveries", err)
	}
	defer rows.Close()
	var out []ConsoleListItem
	for rows.Next() {
		var d ConsoleListItem
		if err := rows.Scan(&d.Destination, &d.EventID, &d.EventType, &d.Status, &d.CreatedAt, &d.AvailableAt,
			&d.AttemptCount, &d.LastAttemptAt, &d.LastErrorCode, &d.LeaseOwner, &d.LeaseExpiresAt, &d.DeliveredAt); err != nil {
			return nil, interpretError("console deliveries", err)
		}
		out = append(out, d)
	}
	return out, interpretError("console deliveries", rows.Err())
}
