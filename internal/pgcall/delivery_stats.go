package pgcall

import (
	"context"
	"time"
)

// DestinationStats is one row of outbox.delivery_stats.
type DestinationStats struct {
	Destination           string
	ConsumerName          string
	ReceiptKind           string
	Pending               int64
	Leased                int64
	OldestPendingAt       *time.Time // nil when nothing is pending or leased
	OldestPendingAge      time.Duration
	QuarantinedUnresolved int64
	OldestGapAge          time.Duration // oldest non-terminal delivery waiting for a revision (R-AK-5), 0 when none
}

const deliveryStatsSQL = `SELECT destination, consumer_name, receipt_kind, pending_count, leased_count,
       oldest_pending_at, oldest_pending_age_seconds::float8, quarantined_unresolved, oldest_gap_age_seconds::float8
FROM outbox.delivery_stats()`

// DeliveryStats calls outbox.delivery_stats: per-destination backlog figures read from
// non-terminal rows only (SPEC R-DP-4). Caller roles: outbox_dispatcher, outbox_auditor.
func DeliveryStats(ctx context.Context, db DBTX) ([]DestinationStats, error) {
	rows, err := db.Query(ctx, deliveryStatsSQL)
	if err != nil {
		return nil, interpretError("delivery stats", err)
	}
	defer rows.Close()
	var out []DestinationStats
	for rows.Next() {
		var s DestinationStats
		var age, gap float64
		if err := rows.Scan(&s.Destination, &s.ConsumerName, &s.ReceiptKind, &s.Pending, &s.Leased,
			&s.OldestPendingAt, &age, &s.QuarantinedUnresolved, &gap); err != nil {
			return nil, interpretError("delivery stats", err)
		}
		s.OldestPendingAge = time.Duration(age * float64(time.Second))
		s.OldestGapAge = time.Duration(gap * float64(time.Second))
		out = append(out, s)
	}
	return out, interpretError("delivery stats", rows.Err())
}
