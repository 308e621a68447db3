package pgcall

import "context"

// RedeliveryCount is one row of outbox.redelivery_stats: controlled recoveries so far for one
// destination and quarantine reason code (R-AK-10).
type RedeliveryCount struct {
	Destination  string
	Reason       string
	Redeliveries int64
}

const redeliveryStatsSQL = `SELECT destination, reason, redeliveries FROM outbox.redelivery_stats()`

// RedeliveryStats calls outbox.redelivery_stats. Caller roles: outbox_dispatcher, outbox_auditor.
func RedeliveryStats(ctx context.Context, db DBTX) ([]RedeliveryCount, error) {
	rows, err := db.Query(ctx, redeliveryStatsSQL)
	if err != nil {
		return nil, interpretError("redelivery stats", err)
	}
	defer rows.Close()
	var out []RedeliveryCount
	for rows.Next() {
		var r RedeliveryCount
		if err := rows.Scan(&r.Destination, &r.Reason, &r.Redeliveries); err != nil {
			return nil, interpretError("redelivery stats", err)
		}
		out = append(out, r)
	}
	return out, interpretError("redelivery stats", rows.Err())
}
