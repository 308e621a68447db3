package pgcall

import (
	"context"
	"time"
)

// ConsoleAttempt is one row of outbox.console_event_attempts: an attempt start and, when it has
// one, its finish (nil finish fields: the attempt is in flight).
type ConsoleAttempt struct {
	Destination      string
	AttemptNumber    int
	AttemptID        string
	Worker           string
	StartedAt        time.Time
	FinishedAt       *time.Time
	Outcome          *string
	RetryDisposition *string
	ErrorCode        *string
	ErrorRef         *string
}

const consoleEventAttemptsSQL = `SELECT destination, attempt_number, attempt_id::text, worker, started_at, finished_at,
       outcome, retry_disposition, error_code, error_ref
FROM outbox.console_event_attempts($1::uuid)`

// ConsoleEventAttempts calls outbox.console_event_attempts: the attempt history of every
// delivery of the event, by destination and attempt number. Caller role: outbox_auditor.
func ConsoleEventAttempts(ctx context.Context, db DBTX, eventID string) ([]ConsoleAttempt, error) {
	rows, err := db.Query(ctx, consoleEventAttemptsSQL, eventID)
	if err != nil {
		return nil, interpretError("console event attempts", err)
	}
	defer rows.Close()
	var out []ConsoleAttempt
	for rows.Next() {
		var a ConsoleAttempt
		if err := rows.Scan(&a.Destination, &a.AttemptNumber, &a.AttemptID, &a.Worker, &a.StartedAt, &a.FinishedAt,
			&a.Outcome, &a.RetryDisposition, &a.ErrorCode, &a.ErrorRef); err != nil {
			return nil, interpretError("console event attempts", err)
		}
		out = append(out, a)
	}
	return out, interpretError("console event attempts", rows.Err())
}
