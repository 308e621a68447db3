package pgcall

import "context"

// ProjectionComparison is the row of outbox.compare_projection_versions.
type ProjectionComparison struct {
	Same              bool
	DigestA, DigestB  string
	RowsA, RowsB      int64
	AntiJoin          int64
	OpenGaps          int64
	OpenQuarantine    int64
	SampleDifferences []string
}

const compareProjectionVersionsSQL = `SELECT same, digest_a, digest_b, rows_a, rows_b, anti_join, open_gaps, open_quarantine, sample_differences
FROM outbox.compare_projection_versions($1::text, $2::integer, $3::integer)`

// CompareProjectionVersions calls outbox.compare_projection_versions(name, a, b). Errors as
// ProjectionDigest. Caller role: outbox_auditor or outbox_projector.
func CompareProjectionVersions(ctx context.Context, db DBTX, projectionName string, a, b int) (ProjectionComparison, error) {
	var c ProjectionComparison
	err := db.QueryRow(ctx, compareProjectionVersionsSQL, projectionName, a, b).Scan(&c.Same, &c.DigestA, &c.DigestB,
		&c.RowsA, &c.RowsB, &c.AntiJoin, &c.OpenGaps, &c.OpenQuarantine, &c.SampleDifferences)
	return c, interpretError("compare projection versions", err)
}
