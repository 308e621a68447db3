package pgcall

import "context"

// Outcomes of outbox.register_projection_version.
const (
	ProjectionVersionRegistered = "registered"
	ProjectionVersionExisting   = "existing"
)

// UnknownSemanticDigest is the semantic definition digest of a version registered before its
// definition was recorded (the migration's and a delivery-set activation's registrations).
const UnknownSemanticDigest = "unknown"

const registerProjectionVersionSQL = `SELECT outbox.register_projection_version($1::text, $2::integer, $3::text)`

// RegisterProjectionVersion calls outbox.register_projection_version (SPEC R-PV-1):
// insert-or-compare of (projection, version, semantic definition digest). Returns
// ProjectionVersionRegistered (the first version of a projection becomes active, later ones
// shadow) or ProjectionVersionExisting. ErrProjectionVersionConflict (OB801) another digest for
// the version; 22023 invalid key or digest. Caller role: outbox_registrar.
func RegisterProjectionVersion(ctx context.Context, db DBTX, projectionName string, projectionVersion int, semanticDefinitionSHA256 string) (string, error) {
	var status string
	err := db.QueryRow(ctx, registerProjectionVersionSQL, projectionName, projectionVersion, semanticDefinitionSHA256).Scan(&status)
	return status, interpretError("register projection version", err)
}
