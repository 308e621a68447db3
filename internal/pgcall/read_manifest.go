package pgcall

import (
	"context"
	"encoding/json"
)

const readManifestSQL = `SELECT outbox.read_manifest($1::uuid)::text`

// ReadManifest calls outbox.read_manifest(manifest_id): the CompletenessProofManifest@2 document (@1 for proofs stored before migration 037)
// (its canonical text), nil for an unknown id. Caller role: outbox_auditor.
func ReadManifest(ctx context.Context, db DBTX, manifestID string) (json.RawMessage, error) {
	var s *string
	if err := db.QueryRow(ctx, readManifestSQL, manifestID).Scan(&s); err != nil {
		return nil, interpretError("read manifest", err)
	}
	if s == nil {
		return nil, nil
	}
	return json.RawMessage(*s), nil
}
