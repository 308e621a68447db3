package pgcall

import "context"

// ArchiveVerification is the row outbox.verify_archive_run returns; Problem is "" when verified.
type ArchiveVerification struct {
	RunID    string
	Verified bool
	Problem  string
}

const verifyArchiveRunSQL = `SELECT run_id::text, verified, coalesce(problem, '') FROM outbox.verify_archive_run($1::uuid)`

// VerifyArchiveRun calls outbox.verify_archive_run: recomputes an archive run's counts, set
// digest, content digest and archived envelope digests and compares them with its audit row
// (SPEC R-RT-3). Caller role: outbox_auditor or outbox_retention.
func VerifyArchiveRun(ctx context.Context, db DBTX, runID string) (ArchiveVerification, error) {
	var v ArchiveVerification
	err := db.QueryRow(ctx, verifyArchiveRunSQL, runID).Scan(&v.RunID, &v.Verified, &v.Problem)
	return v, interpretError("verify archive run", err)
}
