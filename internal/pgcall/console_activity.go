package pgcall

import (
	"context"
	"time"
)

// ConsoleActivity is one row of outbox.console_activity: one destination's finished attempts in
// one time bucket, by outcome, and the largest acknowledgement lag (nil without an ack).
type ConsoleActivity struct {
	Destination      string
	BucketStart      time.Time
	Finished         int64
	Acknowledged     int64
	Retried          int64
	Quarantined      int64
	LeaseExpired     int64
	MaxAckLagSeconds *float64
}

const consoleActivitySQL = `SELECT destination, bucket_start, finished, acknowledged, retried, quarantined, lease_expired,
       max_ack_lag_seconds
FROM outbox.console_activity(make_interval(secs => $1::double precision), make_interval(secs => $2::double precision))`

// ConsoleActivityWindow calls outbox.console_activity over the last window in buckets of bucket
// (window at most 24 h, bucket 10 s..1 h, at most 1440 buckets; else 22023). Only buckets with a
// finish come back. Caller role: outbox_auditor.
func ConsoleActivityWindow(ctx context.Context, db DBTX, window, bucket time.Duration) ([]ConsoleActivity, error) {
	rows, err := db.Query(ctx, consoleActivitySQL, window.Seconds(), bucket.Seconds())
	if err != nil {
		return nil, interpretError("console activity", err)
	}
	defer rows.Close()
	var out []ConsoleActivity
	for rows.Next() {
		var a ConsoleActivity
		if err := rows.Scan(&a.Destination, &a.BucketStart, &a.Finished, &a.Acknowledged, &a.Retried, &a.Quarantined,
			&a.LeaseExpired, &a.MaxAckLagSeconds); err != nil {
			return nil, interpretError("console activity", err)
		}
		out = append(out, a)
	}
	return out, interpretError("console activity", rows.Err())
}
