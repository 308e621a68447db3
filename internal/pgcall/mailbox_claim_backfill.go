package pgcall

import "context"

const claimBackfillSQL = `SELECT msg_id FROM mailbox.claim_backfill($1::text, $2::int) AS msg_id`

// ClaimBackfill calls mailbox.claim_backfill: ids of terminal rows owing the processed mark,
// oldest first (R-MX-8). Caller role: outbox_mailbox.
func ClaimBackfill(ctx context.Context, db DBTX, source string, batch int) ([]int64, error) {
	rows, err := db.Query(ctx, claimBackfillSQL, source, batch)
	if err != nil {
		return nil, interpretError("claim backfill", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, interpretError("claim backfill", err)
		}
		out = append(out, id)
	}
	return out, interpretError("claim backfill", rows.Err())
}
