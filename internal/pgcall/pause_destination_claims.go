package pgcall

import "context"

const pauseDestinationClaimsSQL = `SELECT outbox.pause_destination_claims($1::text, $2::text)`

// PauseDestinationClaims calls outbox.pause_destination_claims (SPEC R-PV-2): claim_deliveries
// skips the destination until ResumeDestinationClaims (leases already out run to their end);
// idempotent, audited. 22023 unknown destination or empty reason. Caller role: outbox_projector
// or outbox_operator.
func PauseDestinationClaims(ctx context.Context, db DBTX, destination, reason string) error {
	_, err := db.Exec(ctx, pauseDestinationClaimsSQL, destination, reason)
	return interpretError("pause destination claims", err)
}
