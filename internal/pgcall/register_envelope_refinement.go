package pgcall

import "context"

const registerEnvelopeRefinementSQL = `SELECT outbox.register_envelope_refinement($1::text, $2::text, $3::text[])`

// RegisterEnvelopeRefinement calls outbox.register_envelope_refinement: insert-or-compare of an
// R-AP-7 refinement, the optional envelope members (correlationId, causationId, operationId,
// projectId) an event of this type and schema version must carry. The same list again is a
// no-op; another list for the pair is OB101. Caller role: outbox_registrar.
func RegisterEnvelopeRefinement(ctx context.Context, db DBTX, eventType, eventSchemaVersion string, requiredMembers []string) error {
	_, err := db.Exec(ctx, registerEnvelopeRefinementSQL, eventType, eventSchemaVersion, requiredMembers)
	return interpretError("register envelope refinement", err)
}
