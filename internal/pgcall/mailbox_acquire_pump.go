package pgcall

import "context"

const acquirePumpSQL = `SELECT mailbox.acquire_pump($1::text)`

// AcquirePump calls mailbox.acquire_pump: true when this session now holds the source's pump
// (for the rest of the session), false when another live session holds it (R-MX-11). Call it
// again periodically as a heartbeat. Caller role: outbox_mailbox.
func AcquirePump(ctx context.Context, db DBTX, source string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, acquirePumpSQL, source).Scan(&ok)
	return ok, interpretError("acquire pump", err)
}
