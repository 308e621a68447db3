package pgcall

import (
	"context"
	"time"
)

// ConsoleDestination is one row of outbox.console_destinations: a destination's backlog, open
// quarantine, open revision gaps and claim pause. A count above the cap passed means "more than
// the cap"; OldestGapAt is nil then.
type ConsoleDestination struct {
	Destination     string
	ConsumerName    string
	Pending, Leased int64
	OldestPendingAt *time.Time
	QuarantinedOpen int64
	OpenGaps        int64
	OldestGapAt     *time.Time
	PausedReason    *string // nil: claims run
	PausedAt        *time.Time
	PausedBy        *string
}

const consoleDestinationsSQL = `SELECT destination, consumer_name, pending_count, leased_count, oldest_pending_at,
       quarantined_open, open_gaps, oldest_gap_at, paused_reason, paused_at, paused_by
FROM outbox.console_destinations($1::int)`

// ConsoleDestinations calls outbox.console_destinations: the live overview's per-destination
// figures, in name order, each count stopping at limit + 1. 22023 for a cap outside
// 1..1000000. Caller role: outbox_auditor.
func ConsoleDestinations(ctx context.Context, db DBTX, limit int) ([]ConsoleDestination, error) {
	rows, err := db.Query(ctx, consoleDestinationsSQL, limit)
	if err != nil {
		return nil, interpretError("console destinations", err)
	}
	defer rows.Close()
	var out []ConsoleDestination
	for rows.Next() {
		var d ConsoleDestination
		if err := rows.Scan(&d.Destination, &d.ConsumerName, &d.Pending, &d.Leased, &d.OldestPendingAt, &d.QuarantinedOpen,
			&d.OpenGaps, &d.OldestGapAt, &d.PausedReason, &d.PausedAt, &d.PausedBy); err != nil {
			return nil, interpretError("console destinations", err)
		}
		out = append(out, d)
	}
	return out, interpretError("console destinations", rows.Err())
}
