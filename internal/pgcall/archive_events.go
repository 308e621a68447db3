package pgcall

import (
	"context"
	"time"
)

// ArchiveRun is the row outbox.archive_events returns.
type ArchiveRun struct {
	RunID             string
	Archived, Skipped int
	ArchivedSetSHA256 string
}

const archiveEventsSQL = `SELECT run_id::text, archived, skipped, archived_set_sha256
FROM outbox.archive_events($1::interval, $2::int)`

// ArchiveEvents calls outbox.archive_events: one audited retention run that moves up to maxRows
// eligible events older than olderThan into the archive (SPEC R-RT-1..4). Caller role:
// outbox_retention.
func ArchiveEvents(ctx context.Context, db DBTX, olderThan time.Duration, maxRows int) (ArchiveRun, error) {
	var r ArchiveRun
	err := db.QueryRow(ctx, archiveEventsSQL, intervalString(olderThan), maxRows).
		Scan(&r.RunID, &r.Archived, &r.Skipped, &r.ArchivedSetSHA256)
	return r, interpretError("archive events", err)
}
