package pgcall

import "context"

const retireProjectionVersionSQL = `SELECT outbox.retire_projection_version($1::text, $2::integer)`

// RetireProjectionVersion calls outbox.retire_projection_version (SPEC R-PV-3): retires a shadow
// or frozen version. ErrProjectionVersionInUse (OB809) active, targeted by the active set or an
// open delivery, or the rollback target inside its window; ErrProjectionNotRegistered (OB802).
// Caller role: outbox_registrar.
func RetireProjectionVersion(ctx context.Context, db DBTX, projectionName string, projectionVersion int) error {
	_, err := db.Exec(ctx, retireProjectionVersionSQL, projectionName, projectionVersion)
	return interpretError("retire projection version", err)
}
