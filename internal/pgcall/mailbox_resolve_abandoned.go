package pgcall

import "context"

const resolveAbandonedSQL = `SELECT mailbox.resolve_abandoned($1::text, $2::bigint, $3::text, $4::text)`

// ResolveAbandoned calls mailbox.resolve_abandoned: an operator's audited resolution
// (marked_manually | not_needed) of an abandoned backfill (R-MX-8). Caller role: outbox_mailbox.
func ResolveAbandoned(ctx context.Context, db DBTX, source string, msgID int64, resolution, note string) error {
	_, err := db.Exec(ctx, resolveAbandonedSQL, source, msgID, resolution, note)
	return interpretError("resolve abandoned", err)
}
