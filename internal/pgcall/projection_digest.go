package pgcall

import "context"

const projectionDigestSQL = `SELECT outbox.projection_digest($1::text, $2::integer)`

// ProjectionDigest calls outbox.projection_digest: the version's content digest (no apply times,
// no version number). Errors: OB802 not registered or no row source; 22023 duplicate or NULL row
// keys. Caller role: outbox_auditor or outbox_projector.
func ProjectionDigest(ctx context.Context, db DBTX, projectionName string, projectionVersion int) (string, error) {
	var d string
	err := db.QueryRow(ctx, projectionDigestSQL, projectionName, projectionVersion).Scan(&d)
	return d, interpretError("projection digest", err)
}
