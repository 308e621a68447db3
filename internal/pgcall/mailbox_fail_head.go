package pgcall

import "context"

const failHeadSQL = `SELECT mailbox.fail_head($1::text, $2::bigint, $3::uuid, $4::text)`

// FailHead calls mailbox.fail_head after the handler's transaction rolled back: "failed" (backoff,
// the row keeps the head) or "dead" (retry_exhausted, or a non-retryable code). Caller role:
// outbox_mailbox.
func FailHead(ctx context.Context, db DBTX, source string, msgID int64, leaseToken, errorCode string) (string, error) {
	var s string
	err := db.QueryRow(ctx, failHeadSQL, source, msgID, leaseToken, errorCode).Scan(&s)
	return s, interpretError("fail head", err)
}
