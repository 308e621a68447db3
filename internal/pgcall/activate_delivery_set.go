package pgcall

import "context"

const activateDeliverySetSQL = `SELECT outbox.activate_delivery_set($1::int, $2::int, $3::text, $4::text)`

// ActivateDeliverySet calls outbox.activate_delivery_set: the registered quartet becomes the
// one active version of this database (R-DS-5). Caller role: outbox_registrar.
func ActivateDeliverySet(ctx context.Context, db DBTX, q Quartet) error {
	_, err := db.Exec(ctx, activateDeliverySetSQL, q.DeliverySetVersion, q.DefinitionSchemaVersion, q.DigestAlgorithmVersion, q.DefinitionDigest)
	return interpretError("activate delivery set", err)
}
