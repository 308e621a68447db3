package pgcall

import (
	"context"
	"encoding/json"
)

// ReceiptKindRow is one row of outbox.receipt_kind_catalog: a receipt kind and its members, each
// member the JSON of its whole outbox.receipt_kind_members row minus receipt_kind (member,
// json_type, required, minimum, and whatever a later migration adds).
type ReceiptKindRow struct {
	ReceiptKind          string
	ReceiptType          string
	FieldPrefix          string
	TimeField            string
	ReceiptSchemaVersion int
	RequiresProjection   bool
	Members              json.RawMessage // a JSON array of member objects, sorted by member
}

const receiptKindCatalogSQL = `SELECT receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version,
       requires_projection, members::text
FROM outbox.receipt_kind_catalog()`

// ReceiptKindCatalog calls outbox.receipt_kind_catalog: every registered receipt kind with its
// members (SPEC R-AK-1a, §13), what receipt.LoadCatalog builds its catalog from. Caller roles:
// outbox_consumer, outbox_dispatcher, outbox_registrar, outbox_auditor.
func ReceiptKindCatalog(ctx context.Context, db DBTX) ([]ReceiptKindRow, error) {
	rows, err := db.Query(ctx, receiptKindCatalogSQL)
	if err != nil {
		return nil, interpretError("receipt kind catalog", err)
	}
	defer rows.Close()
	var out []ReceiptKindRow
	for rows.Next() {
		var r ReceiptKindRow
		var members string
		if err := rows.Scan(&r.ReceiptKind, &r.ReceiptType, &r.FieldPrefix, &r.TimeField, &r.ReceiptSchemaVersion,
			&r.RequiresProjection, &members); err != nil {
			return nil, interpretError("receipt kind catalog", err)
		}
		r.Members = json.RawMessage(members)
		out = append(out, r)
	}
	return out, interpretError("receipt kind catalog", rows.Err())
}
