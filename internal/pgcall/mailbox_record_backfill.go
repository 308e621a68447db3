package pgcall

import "context"

// Backfill outcomes (what writing the mark did) and results of mailbox.record_backfill.
const (
	BackfillWritten       = "written"
	BackfillAlreadyMarked = "already_marked"
	BackfillMissing       = "missing"
	BackfillTransient     = "transient"

	BackfillDone      = "done"
	BackfillAbandoned = "abandoned"
	BackfillRetry     = "retry"
)

const recordBackfillSQL = `SELECT mailbox.record_backfill($1::text, $2::bigint, $3::text)`

// RecordBackfill calls mailbox.record_backfill and returns done, abandoned or retry (R-MX-7,
// R-MX-8). ErrMailboxWrongState (OB402) when the row owes no backfill. Caller role:
// outbox_mailbox.
func RecordBackfill(ctx context.Context, db DBTX, source string, msgID int64, outcome string) (string, error) {
	var s string
	err := db.QueryRow(ctx, recordBackfillSQL, source, msgID, outcome).Scan(&s)
	return s, interpretError("record backfill", err)
}
