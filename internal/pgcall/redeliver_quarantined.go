package pgcall

import "context"

// RedeliverParams are the arguments of outbox.redeliver_quarantined (R-AK-10). CaseID and
// IdempotencyKey are literals (1-128 characters of [A-Za-z0-9._:-], the case id also '/');
// Reason is free text for people, at most 500 characters, stored sanitized - never payload.
type RedeliverParams struct {
	Destination    string
	EventID        string
	CaseID         string
	Reason         string
	IdempotencyKey string
}

// Redelivery is the result of a recovery: its audit row's id and the delivery's new status
// ("pending"). Repeating a request with its key returns the first result.
type Redelivery struct {
	RecoveryID string
	Status     string
}

const redeliverQuarantinedSQL = `SELECT recovery_id::text, status
FROM outbox.redeliver_quarantined($1::text, $2::uuid, $3::text, $4::text, $5::text)`

// RedeliverQuarantined calls outbox.redeliver_quarantined: one quarantined delivery back to
// pending, due at once, with one immutable audit row; idempotent per key. Errors:
// ErrRecoveryKeyConflict (OB601) the key was used for another request, ErrNotQuarantined (OB602)
// the delivery does not exist or is not quarantined, 22023 an invalid argument.
// Caller role: outbox_operator.
func RedeliverQuarantined(ctx context.Context, db DBTX, p RedeliverParams) (Redelivery, error) {
	var r Redelivery
	err := db.QueryRow(ctx, redeliverQuarantinedSQL, p.Destination, p.EventID, p.CaseID, p.Reason, p.IdempotencyKey).
		Scan(&r.RecoveryID, &r.Status)
	return r, interpretError("redeliver quarantined", err)
}
