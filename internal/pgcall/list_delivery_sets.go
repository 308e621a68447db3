package pgcall

import (
	"context"
	"time"
)

// DeliverySetRow is one registered definition as the auditor sees it.
type DeliverySetRow struct {
	Quartet
	Status        string
	ActivatedAt   *time.Time
	SourceRelease string
	MemberCount   int
}

const listDeliverySetsSQL = `SELECT v.delivery_set_version, v.definition_schema_version, v.digest_algorithm_version,
       v.definition_digest, v.status, v.activated_at, v.source_release,
       (SELECT count(*)::int FROM outbox.delivery_set_members m WHERE m.delivery_set_version = v.delivery_set_version)
FROM outbox.delivery_set_versions v ORDER BY v.delivery_set_version`

// ListDeliverySets reads the registry (a read of outbox.delivery_set_versions, granted to
// outbox_auditor and outbox_registrar; not a function call).
func ListDeliverySets(ctx context.Context, db DBTX) ([]DeliverySetRow, error) {
	rows, err := db.Query(ctx, listDeliverySetsSQL)
	if err != nil {
		return nil, interpretError("list delivery sets", err)
	}
	defer rows.Close()
	var out []DeliverySetRow
	for rows.Next() {
		var r DeliverySetRow
		if err := rows.Scan(&r.DeliverySetVersion, &r.DefinitionSchemaVersion, &r.DigestAlgorithmVersion,
			&r.DefinitionDigest, &r.Status, &r.ActivatedAt, &r.SourceRelease, &r.MemberCount); err != nil {
			return nil, interpretError("list delivery sets", err)
		}
		out = append(out, r)
	}
	return out, interpretError("list delivery sets", rows.Err())
}
