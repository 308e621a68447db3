package pgcall

import "context"

// Results of outbox.cutover_projection.
const (
	CutoverSwitched = "switched"
	CutoverBlocked  = "blocked"
)

// CutoverResult is the row of outbox.cutover_projection: the result, the readiness proof and,
// for a blocked cutover, its reasons ("guard=count").
type CutoverResult struct {
	Result      string
	ProofID     string
	ProofSHA256 string
	Reasons     []string
}

const cutoverProjectionSQL = `SELECT result, proof_id::text, proof_sha256, reasons
FROM outbox.cutover_projection($1::uuid, $2::uuid, $3::integer, $4::integer, $5::text, $6::text)`

// CutoverProjection calls outbox.cutover_projection (SPEC R-PV-2, R-PV-3): the fenced switch of
// the build's projection to its version, activating the delivery-set quartet q. CutoverBlocked
// with reasons when a guard is non-zero (only the proof is written). ErrFencingRejected (OB001)
// stale token; ErrProjectionNotRegistered (OB802) not frozen; ErrCutoverInProgress (OB804);
// ErrRetargetOutsideCutover (OB808) q retargets another projection; OB101 unknown quartet;
// 22023 q does not make the version the target. Caller role: outbox_projector.
func CutoverProjection(ctx context.Context, db DBTX, buildID, buildToken string, q Quartet) (CutoverResult, error) {
	var r CutoverResult
	err := db.QueryRow(ctx, cutoverProjectionSQL, buildID, buildToken, q.DeliverySetVersion, q.DefinitionSchemaVersion,
		q.DigestAlgorithmVersion, q.DefinitionDigest).Scan(&r.Result, &r.ProofID, &r.ProofSHA256, &r.Reasons)
	return r, interpretError("cutover projection", err)
}
