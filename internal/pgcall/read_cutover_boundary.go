package pgcall

import (
	"context"
	"encoding/json"
)

const readCutoverBoundarySQL = `SELECT outbox.read_cutover_boundary($1::uuid)::text`

// ReadCutoverBoundary calls outbox.read_cutover_boundary (SPEC R-PV-2): the canonical
// CutoverCandidateBoundary@1 text of a boundary; nil for an unknown one. Caller role:
// outbox_auditor.
func ReadCutoverBoundary(ctx context.Context, db DBTX, boundaryID string) (json.RawMessage, error) {
	var s *string
	if err := db.QueryRow(ctx, readCutoverBoundarySQL, boundaryID).Scan(&s); err != nil {
		return nil, interpretError("read cutover boundary", err)
	}
	if s == nil {
		return nil, nil
	}
	return json.RawMessage(*s), nil
}
