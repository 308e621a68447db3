package pgcall

import "context"

// CutoverBoundary is the row outbox.freeze_cutover_candidate returns: the boundary, the sha256
// of its canonical CutoverCandidateBoundary@1 text and the build's new token.
type CutoverBoundary struct {
	BoundaryID     string
	BoundarySHA256 string
	BuildToken     string
}

const freezeCutoverCandidateSQL = `SELECT boundary_id::text, boundary_sha256, build_token::text
FROM outbox.freeze_cutover_candidate($1::uuid, $2::uuid)`

// FreezeCutoverCandidate calls outbox.freeze_cutover_candidate (SPEC R-PV-2): freezes the build
// at an exact source boundary and rotates its token (the old one is ErrFencingRejected from
// then on). ErrFencingRejected (OB001) not a building build with this token;
// ErrProjectionNotRegistered (OB802) the active set routes the projection to no single
// consumer. Caller role: outbox_projector.
func FreezeCutoverCandidate(ctx context.Context, db DBTX, buildID, buildToken string) (CutoverBoundary, error) {
	var b CutoverBoundary
	err := db.QueryRow(ctx, freezeCutoverCandidateSQL, buildID, buildToken).Scan(&b.BoundaryID, &b.BoundarySHA256, &b.BuildToken)
	return b, interpretError("freeze cutover candidate", err)
}
