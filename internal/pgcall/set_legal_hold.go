package pgcall

import "context"

const setLegalHoldSQL = `SELECT outbox.set_legal_hold($1::uuid, $2::text)`

// SetLegalHold calls outbox.set_legal_hold: an audited legal hold on an event, which
// outbox.archive_events then never archives (SPEC R-RT-1). Idempotent while the hold is active.
// Caller role: outbox_retention.
func SetLegalHold(ctx context.Context, db DBTX, eventID, reason string) error {
	_, err := db.Exec(ctx, setLegalHoldSQL, eventID, reason)
	return interpretError("set legal hold", err)
}
