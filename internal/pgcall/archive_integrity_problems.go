package pgcall

import (
	"context"
	"time"
)

// ArchiveProblem is one row of outbox.archive_integrity_problems.
type ArchiveProblem struct {
	RunID, Problem string
}

const archiveIntegrityProblemsSQL = `SELECT run_id::text, problem FROM outbox.archive_integrity_problems($1::timestamptz, $2::timestamptz)`

// ArchiveIntegrityProblems calls outbox.archive_integrity_problems, the completeness hook of
// SPEC R-RT-3: the archive runs overlapping [from, before) that fail verification and orphaned
// archive rows. Nil bounds are unbounded. A completeness proof may be complete only when the
// result is empty. Caller role: outbox_auditor or outbox_retention.
func ArchiveIntegrityProblems(ctx context.Context, db DBTX, from, before *time.Time) ([]ArchiveProblem, error) {
	rows, err := db.Query(ctx, archiveIntegrityProblemsSQL, from, before)
	if err != nil {
		return nil, interpretError("archive integrity problems", err)
	}
	defer rows.Close()
	var out []ArchiveProblem
	for rows.Next() {
		var p ArchiveProblem
		if err := rows.Scan(&p.RunID, &p.Problem); err != nil {
			return nil, interpretError("archive integrity problems", err)
		}
		out = append(out, p)
	}
	return out, interpretError("archive integrity problems", rows.Err())
}
