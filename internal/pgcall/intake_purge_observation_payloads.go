package pgcall

import (
	"context"
	"time"
)

// PurgeRun is the row intake.purge_observation_payloads returns (SPEC R-OB-7).
type PurgeRun struct {
	RunID           string
	Purged          int
	Skipped         int
	PurgedSetSHA256 string
}

const purgeObservationPayloadsSQL = `SELECT run_id::text, purged, skipped, purged_set_sha256
FROM intake.purge_observation_payloads($1::interval, $2::integer)`

// PurgeObservationPayloads calls intake.purge_observation_payloads: removes the payloads of up to
// maxRows accepted observations older than olderThan that every registered projector has a
// receipt for and that are under no legal hold, with a purge marker per id and an audit run row.
// Errors: 22023 bounds. Caller role: outbox_retention.
func PurgeObservationPayloads(ctx context.Context, db DBTX, olderThan time.Duration, maxRows int) (PurgeRun, error) {
	var r PurgeRun
	err := db.QueryRow(ctx, purgeObservationPayloadsSQL, intervalString(olderThan), maxRows).Scan(&r.RunID, &r.Purged, &r.Skipped, &r.PurgedSetSHA256)
	return r, interpretError("purge observation payloads", err)
}
