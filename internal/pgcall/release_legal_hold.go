package pgcall

import "context"

const releaseLegalHoldSQL = `SELECT outbox.release_legal_hold($1::uuid)`

// ReleaseLegalHold calls outbox.release_legal_hold: ends the active hold of an event (the hold
// row stays as its audit; SPEC R-RT-1). SQLSTATE P0002 when the event has no active hold.
// Caller role: outbox_retention.
func ReleaseLegalHold(ctx context.Context, db DBTX, eventID string) error {
	_, err := db.Exec(ctx, releaseLegalHoldSQL, eventID)
	return interpretError("release legal hold", err)
}
