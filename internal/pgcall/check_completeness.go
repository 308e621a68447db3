package pgcall

import "context"

// Freshness is the row of outbox.check_completeness (R-OP-2).
type Freshness struct {
	Freshness string  // verified_current | stale | unverified
	Reason    *string // nil for verified_current
}

const checkCompletenessSQL = `SELECT freshness, reason FROM outbox.check_completeness($1::uuid)`

// CheckCompleteness calls outbox.check_completeness(manifest_id): re-checks a proof against the
// current state. Caller role: outbox_auditor.
func CheckCompleteness(ctx context.Context, db DBTX, manifestID string) (Freshness, error) {
	var f Freshness
	err := db.QueryRow(ctx, checkCompletenessSQL, manifestID).Scan(&f.Freshness, &f.Reason)
	return f, interpretError("check completeness", err)
}
