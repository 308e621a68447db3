package pgcall

import "context"

// BootstrapRun is the row outbox.bootstrap_legacy_events returns.
type BootstrapRun struct {
	RunID                                 string
	Imported, Quarantined, AlreadyPresent int
	EvidenceSHA256                        string
}

const bootstrapLegacyEventsSQL = `SELECT run_id::text, imported, quarantined, already_present, evidence_sha256
FROM outbox.bootstrap_legacy_events($1::regclass, $2::int, $3::int, $4::text, $5::text, $6::int)`

// BootstrapLegacyEvents calls outbox.bootstrap_legacy_events: imports up to maxRows rows of the
// legacy table or view source (a name as the DBA writes it, e.g. "legacy.outbox") against the
// registered Bootstrap Delivery Set q, under the append lock (SPEC R-BS-1..4). Resumable and
// idempotent; the caller's transaction holds the lock until it commits. Caller role:
// outbox_owner.
func BootstrapLegacyEvents(ctx context.Context, db DBTX, source string, q Quartet, maxRows int) (BootstrapRun, error) {
	var r BootstrapRun
	err := db.QueryRow(ctx, bootstrapLegacyEventsSQL, source, q.DeliverySetVersion, q.DefinitionSchemaVersion,
		q.DigestAlgorithmVersion, q.DefinitionDigest, maxRows).
		Scan(&r.RunID, &r.Imported, &r.Quarantined, &r.AlreadyPresent, &r.EvidenceSHA256)
	return r, interpretError("bootstrap legacy events", err)
}
