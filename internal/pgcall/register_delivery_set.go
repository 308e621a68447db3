package pgcall

import (
	"context"
	"encoding/json"
)

// Quartet identifies a delivery-set definition (SPEC §2, R-DS-4).
type Quartet struct {
	DeliverySetVersion      int    `json:"deliverySetVersion"`
	DefinitionSchemaVersion int    `json:"deliverySetDefinitionSchemaVersion"`
	DigestAlgorithmVersion  string `json:"deliverySetDefinitionDigestAlgorithmVersion"`
	DefinitionDigest        string `json:"deliverySetDefinitionDigest"`
}

const registerDeliverySetSQL = `SELECT delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest
FROM outbox.register_delivery_set($1::json, $2::text)`

// RegisterDeliverySet calls outbox.register_delivery_set: insert-or-compare of a complete
// DeliverySetDefinition@1 document (with its digest). Caller role: outbox_registrar.
func RegisterDeliverySet(ctx context.Context, db DBTX, definition json.RawMessage, sourceRelease string) (Quartet, error) {
	var q Quartet
	err := db.QueryRow(ctx, registerDeliverySetSQL, string(definition), sourceRelease).
		Scan(&q.DeliverySetVersion, &q.DefinitionSchemaVersion, &q.DigestAlgorithmVersion, &q.DefinitionDigest)
	return q, interpretError("register delivery set", err)
}
