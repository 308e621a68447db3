package pgcall

import "context"

// PurgeVerification is the row intake.verify_purge_run returns; Problem is "" when verified.
type PurgeVerification struct {
	RunID    string
	Verified bool
	Problem  string
}

const verifyPurgeRunSQL = `SELECT run_id::text, verified, coalesce(problem, '') FROM intake.verify_purge_run($1::uuid)`

// VerifyPurgeRun calls intake.verify_purge_run: re-checks a purge run's markers, set digest,
// removed payloads and registry agreement (SPEC R-OB-7). Caller role: outbox_auditor or
// outbox_retention.
func VerifyPurgeRun(ctx context.Context, db DBTX, runID string) (PurgeVerification, error) {
	var v PurgeVerification
	err := db.QueryRow(ctx, verifyPurgeRunSQL, runID).Scan(&v.RunID, &v.Verified, &v.Problem)
	return v, interpretError("verify purge run", err)
}
