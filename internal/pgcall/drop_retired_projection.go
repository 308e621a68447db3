package pgcall

import "context"

const dropRetiredProjectionSQL = `SELECT dropped_rows FROM outbox.drop_retired_projection($1::text, $2::integer)`

// DropRetiredProjection calls outbox.drop_retired_projection (SPEC R-PV-3): deletes the inbox
// gaps, progress and unacknowledged receipts of a retired version; returns the rows deleted.
// ErrProjectionNotRegistered (OB802) the version is not retired. Caller role: outbox_registrar.
func DropRetiredProjection(ctx context.Context, db DBTX, projectionName string, projectionVersion int) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, dropRetiredProjectionSQL, projectionName, projectionVersion).Scan(&n)
	return n, interpretError("drop retired projection", err)
}
