package pgcall

import "context"

const registerNormalizationPolicySQL = `SELECT intake.register_normalization_policy($1::text, $2::text, $3::text[])`

// RegisterNormalizationPolicy calls intake.register_normalization_policy: one cell of the
// per-workload normalization-policy matrix (the policy version and the normalized codes the
// workload may send); insert-or-compare. Errors: ErrObservationInvalid (OB702) other codes under
// that cell; 22023 unknown workload or literal out of form. Caller role: outbox_registrar.
func RegisterNormalizationPolicy(ctx context.Context, db DBTX, workloadPrincipalID, policyVersion string, normalizedCodes []string) error {
	_, err := db.Exec(ctx, registerNormalizationPolicySQL, workloadPrincipalID, policyVersion, normalizedCodes)
	return interpretError("register normalization policy", err)
}
