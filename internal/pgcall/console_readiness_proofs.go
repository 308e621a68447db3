package pgcall

import (
	"context"
	"time"
)

// ReadinessProofRow is one row of outbox.console_readiness_proofs.
type ReadinessProofRow struct {
	ProofID        string
	ProjectionName string
	FromVersion    int
	ToVersion      int
	Result         string // switched | blocked
	Reasons        []string
	ProofSHA256    string
	DecidedAt      time.Time
}

const consoleReadinessProofsSQL = `SELECT proof_id::text, projection_name, from_version, to_version, result, reasons, proof_sha256, decided_at
FROM outbox.console_readiness_proofs($1::int)`

// ConsoleReadinessProofs calls outbox.console_readiness_proofs: the limit (1..1000, else 22023)
// most recent readiness proofs, newest first. Caller role: outbox_auditor.
func ConsoleReadinessProofs(ctx context.Context, db DBTX, limit int) ([]ReadinessProofRow, error) {
	rows, err := db.Query(ctx, consoleReadinessProofsSQL, limit)
	if err != nil {
		return nil, interpretError("console readiness proofs", err)
	}
	defer rows.Close()
	var out []ReadinessProofRow
	for rows.Next() {
		var r ReadinessProofRow
		if err := rows.Scan(&r.ProofID, &r.ProjectionName, &r.FromVersion, &r.ToVersion, &r.Result, &r.Reasons, &r.ProofSHA256, &r.DecidedAt); err != nil {
			return nil, interpretError("console readiness proofs", err)
		}
		out = append(out, r)
	}
	return out, interpretError("console readiness proofs", rows.Err())
}
