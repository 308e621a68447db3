package pgcall

import (
	"context"
	"encoding/json"
)

const readReadinessProofSQL = `SELECT outbox.read_readiness_proof($1::uuid)::text`

// ReadReadinessProof calls outbox.read_readiness_proof (SPEC R-PV-2): the canonical
// CutoverReadinessProof@1 text of a proof; nil for an unknown one. Caller role: outbox_auditor.
func ReadReadinessProof(ctx context.Context, db DBTX, proofID string) (json.RawMessage, error) {
	var s *string
	if err := db.QueryRow(ctx, readReadinessProofSQL, proofID).Scan(&s); err != nil {
		return nil, interpretError("read readiness proof", err)
	}
	if s == nil {
		return nil, nil
	}
	return json.RawMessage(*s), nil
}
