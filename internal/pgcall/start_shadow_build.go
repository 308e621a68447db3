package pgcall

import "context"

// ShadowBuild is the row outbox.start_shadow_build returns: the build and its fencing token.
type ShadowBuild struct {
	BuildID    string
	BuildToken string
}

const startShadowBuildSQL = `SELECT build_id::text, build_token::text FROM outbox.start_shadow_build($1::text, $2::integer)`

// StartShadowBuild calls outbox.start_shadow_build (SPEC R-PV-1): starts a build of a registered
// shadow version; a live build of that version is abandoned (its token is refused from then on,
// ErrFencingRejected). ErrProjectionNotRegistered (OB802) the version is not registered or not a
// shadow. Caller role: outbox_projector.
func StartShadowBuild(ctx context.Context, db DBTX, projectionName string, projectionVersion int) (ShadowBuild, error) {
	var b ShadowBuild
	err := db.QueryRow(ctx, startShadowBuildSQL, projectionName, projectionVersion).Scan(&b.BuildID, &b.BuildToken)
	return b, interpretError("start shadow build", err)
}
