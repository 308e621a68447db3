package pgcall

import "context"

const recoverExpiredLeasesSQL = `SELECT outbox.recover_expired_leases($1::int)`

// RecoverExpiredLeases calls outbox.recover_expired_leases: closes the open attempt of up to
// maxRows expired leases as lease_expired_unknown and makes those deliveries pending again;
// returns how many it recovered (R-CL-4). Caller role: outbox_dispatcher.
func RecoverExpiredLeases(ctx context.Context, db DBTX, maxRows int) (int, error) {
	var n int32
	err := db.QueryRow(ctx, recoverExpiredLeasesSQL, maxRows).Scan(&n)
	return int(n), interpretError("recover expired leases", err)
}
