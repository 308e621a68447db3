package pgcall

import (
	"context"
	"encoding/json"
)

const registerObservationSchemaSQL = `SELECT intake.register_observation_schema($1::text, $2::integer, $3::json)`

// RegisterObservationSchema calls intake.register_observation_schema: registers the closed body
// schema of (observationType, version) (ObservationSchemaDefinition@1, docs/intake.md) and
// returns its jcs-sha256-v1 digest; insert-or-compare. Errors: ErrObservationInvalid (OB702)
// definition out of form or another definition under that version; ErrNotCanonicalizable
// (OB201). Caller role: outbox_registrar.
func RegisterObservationSchema(ctx context.Context, db DBTX, observationType string, version int, definition json.RawMessage) (string, error) {
	var digest string
	err := db.QueryRow(ctx, registerObservationSchemaSQL, observationType, version, string(definition)).Scan(&digest)
	return digest, interpretError("register observation schema", err)
}
