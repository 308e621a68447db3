package pgcall

import (
	"context"
	"time"
)

const recordSendFailuresSQL = `SELECT intake.record_send_failures($1::integer, $2::timestamptz, $3::timestamptz, $4::text)`

// RecordSendFailures calls intake.record_send_failures: the calling workload reports how many
// observations it could not send in [windowStart, windowEnd) and why (a low-cardinality
// literal). Errors: ErrNotAWorkload (OB704); 22023 bounds. Caller role: outbox_intake.
func RecordSendFailures(ctx context.Context, db DBTX, failed int, windowStart, windowEnd time.Time, reason string) error {
	_, err := db.Exec(ctx, recordSendFailuresSQL, failed, windowStart, windowEnd, reason)
	return interpretError("record send failures", err)
}
