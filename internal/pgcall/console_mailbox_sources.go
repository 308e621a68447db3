package pgcall

import "context"

// ConsoleMailboxSource is one row of mailbox.console_sources: a mailbox source and its
// pipeline status (R-MX-12).
type ConsoleMailboxSource struct {
	Source             string
	Watermark          int64
	LagIDs             int64
	LagSeconds         float64
	OpenHoles          int
	ReleasedHoles      int
	LateRows           int
	HeadMsgID          *int64
	HeadState          *string
	AbandonedBackfills int
	DeadLetters        int
}

const consoleMailboxSourcesSQL = `SELECT source, watermark, lag_ids, lag_seconds, open_holes, released_holes, late_rows,
	head_msg_id, head_state, abandoned_backfills, dead_letters FROM mailbox.console_sources($1::int)`

// ConsoleMailboxSources calls mailbox.console_sources: at most limit sources, by name.
// Caller role: outbox_auditor.
func ConsoleMailboxSources(ctx context.Context, db DBTX, limit int) ([]ConsoleMailboxSource, error) {
	rows, err := db.Query(ctx, consoleMailboxSourcesSQL, limit)
	if err != nil {
		return nil, interpretError("console mailbox sources", err)
	}
	defer rows.Close()
	var out []ConsoleMailboxSource
	for rows.Next() {
		var s ConsoleMailboxSource
		if err := rows.Scan(&s.Source, &s.Watermark, &s.LagIDs, &s.LagSeconds, &s.OpenHoles, &s.ReleasedHoles,
			&s.LateRows, &s.HeadMsgID, &s.HeadState, &s.AbandonedBackfills, &s.DeadLetters); err != nil {
			return nil, interpretError("console mailbox sources", err)
		}
		out = append(out, s)
	}
	return out, interpretError("console mailbox sources", rows.Err())
}
