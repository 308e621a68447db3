package pgcall

import "context"

// Terminal outcomes of mailbox.complete_head.
const (
	HeadSucceeded = "succeeded"
	HeadDead      = "dead"
)

const completeHeadSQL = `SELECT mailbox.complete_head($1::text, $2::bigint, $3::uuid, $4::text, $5::text)`

// CompleteHead calls mailbox.complete_head inside the handler's transaction: the terminal state
// and the backfill intent in one statement (R-MX-6, R-MX-8, R-MX-10). reason is required for
// HeadDead and must be nil for HeadSucceeded. ErrFencingRejected (OB001) for a stale lease,
// ErrMailboxWrongState (OB402) for a terminal row. Caller role: outbox_mailbox.
func CompleteHead(ctx context.Context, db DBTX, source string, msgID int64, leaseToken, outcome string, reason *string) error {
	_, err := db.Exec(ctx, completeHeadSQL, source, msgID, leaseToken, outcome, reason)
	return interpretError("complete head", err)
}
