package pgcall

import "context"

const resumeDestinationClaimsSQL = `SELECT outbox.resume_destination_claims($1::text)`

// ResumeDestinationClaims calls outbox.resume_destination_claims (SPEC R-PV-2): ends a claim
// pause of the destination; idempotent, audited. 22023 unknown destination. Caller role:
// outbox_projector or outbox_operator.
func ResumeDestinationClaims(ctx context.Context, db DBTX, destination string) error {
	_, err := db.Exec(ctx, resumeDestinationClaimsSQL, destination)
	return interpretError("resume destination claims", err)
}
