package pgcall

import "context"

// QuarantineReason is one (destination, reason) group of the outbox.open_quarantines view.
type QuarantineReason struct {
	Destination string
	Reason      string
	Count       int64
}

const quarantineReasonsSQL = `SELECT destination, reason, count(*)
FROM outbox.open_quarantines GROUP BY destination, reason ORDER BY destination, reason`

// QuarantineReasons counts the deliveries quarantined now per destination and reason (no event
// content). Caller role: outbox_auditor.
func QuarantineReasons(ctx context.Context, db DBTX) ([]QuarantineReason, error) {
	rows, err := db.Query(ctx, quarantineReasonsSQL)
	if err != nil {
		return nil, interpretError("quarantine reasons", err)
	}
	defer rows.Close()
	var out []QuarantineReason
	for rows.Next() {
		var q QuarantineReason
		if err := rows.Scan(&q.Destination, &q.Reason, &q.Count); err != nil {
			return nil, interpretError("quarantine reasons", err)
		}
		out = append(out, q)
	}
	return out, interpretError("quarantine reasons", rows.Err())
}
