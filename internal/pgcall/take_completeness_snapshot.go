package pgcall

import (
	"context"
	"encoding/json"
)

// CompletenessSnapshot is the row of outbox.take_completeness_snapshot (R-OP-2).
type CompletenessSnapshot struct {
	ManifestID     string
	ManifestSHA256 string
	Status         string // complete_for_supported_scope | partial_source_gap | unknown
}

const takeCompletenessSnapshotSQL = `SELECT manifest_id::text, manifest_sha256, status FROM outbox.take_completeness_snapshot($1::json)`

// TakeCompletenessSnapshot calls outbox.take_completeness_snapshot(scope): db must be inside a
// REPEATABLE READ (or SERIALIZABLE) transaction, else ErrSnapshotIsolation (OB501); a
// malformed scope is 22023. Caller role: outbox_auditor.
func TakeCompletenessSnapshot(ctx context.Context, db DBTX, scope json.RawMessage) (CompletenessSnapshot, error) {
	var s CompletenessSnapshot
	err := db.QueryRow(ctx, takeCompletenessSnapshotSQL, string(scope)).Scan(&s.ManifestID, &s.ManifestSHA256, &s.Status)
	return s, interpretError("take completeness snapshot", err)
}
