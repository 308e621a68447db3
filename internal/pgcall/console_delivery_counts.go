package pgcall

import "context"

// ConsoleCount is one row of outbox.console_delivery_counts: deliveries in one state, capped
// (Capped: there are at least Deliveries).
type ConsoleCount struct {
	Status     string
	Deliveries int64
	Capped     bool
}

const consoleDeliveryCountsSQL = `SELECT status, deliveries, capped FROM outbox.console_delivery_counts($1::text, $2::int)`

// ConsoleDeliveryCounts calls outbox.console_delivery_counts: per state (pending, leased,
// quarantined, acknowledged) the deliveries of a destination, each count bounded by capAt.
// Caller role: outbox_auditor.
func ConsoleDeliveryCounts(ctx context.Context, db DBTX, destination string, capAt int) ([]ConsoleCount, error) {
	rows, err := db.Query(ctx, consoleDeliveryCountsSQL, destination, capAt)
	if err != nil {
		return nil, interpretError("console delivery counts", err)
	}
	defer rows.Close()
	var out []ConsoleCount
	for rows.Next() {
		var c ConsoleCount
		if err := rows.Scan(&c.Status, &c.Deliveries, &c.Capped); err != nil {
			return nil, interpretError("console delivery counts", err)
		}
		out = append(out, c)
	}
	return out, interpretError("console delivery counts", rows.Err())
}
