package pgcall

import "context"

const registerProjectionRowsSQL = `SELECT outbox.register_projection_rows($1::text, $2::integer, $3::text)`

// RegisterProjectionRows calls outbox.register_projection_rows: names the relation (row_key text,
// row_document json|jsonb) holding a projection version's content rows; "registered" or
// "existing". Errors: OB802 version not registered; ErrProjectionVersionConflict (OB801) another
// relation; 22023 wrong columns; 42501 outbox_owner may not SELECT it. Caller role:
// outbox_registrar.
func RegisterProjectionRows(ctx context.Context, db DBTX, projectionName string, projectionVersion int, relation string) (string, error) {
	var status string
	err := db.QueryRow(ctx, registerProjectionRowsSQL, projectionName, projectionVersion, relation).Scan(&status)
	return status, interpretError("register projection rows", err)
}
