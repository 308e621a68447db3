package pgcall

import (
	"context"
	"time"
)

// HoleRange is a released hole: ids FirstID..LastID.
type HoleRange struct {
	FirstID, LastID int64
	ReleasedAt      time.Time
}

const releasedHolesSQL = `SELECT first_id, last_id, released_at FROM mailbox.released_holes($1::text, $2::interval, $3::int)`

// ReleasedHoles calls mailbox.released_holes: the hole ranges released within the window, which
// the pump re-reads to find late rows (R-MX-2). Caller role: outbox_mailbox.
func ReleasedHoles(ctx context.Context, db DBTX, source string, within time.Duration, maxRanges int) ([]HoleRange, error) {
	rows, err := db.Query(ctx, releasedHolesSQL, source, intervalString(within), maxRanges)
	if err != nil {
		return nil, interpretError("released holes", err)
	}
	defer rows.Close()
	var out []HoleRange
	for rows.Next() {
		var h HoleRange
		if err := rows.Scan(&h.FirstID, &h.LastID, &h.ReleasedAt); err != nil {
			return nil, interpretError("released holes", err)
		}
		out = append(out, h)
	}
	return out, interpretError("released holes", rows.Err())
}
