package pgcall

import "context"

// PipelineStatus is the row mailbox.pipeline_status returns (R-MX-12).
type PipelineStatus struct {
	Watermark                     int64
	LagIDs                        int64
	LagSeconds                    float64
	OpenHoles                     int
	ReleasedHoles                 int
	LateRows                      int
	HeadMsgID                     *int64
	HeadState                     *string
	OldestUnmarkedTerminalSeconds float64
	AbandonedBackfills            int
	DeadLetters                   int
}

const pipelineStatusSQL = `SELECT watermark, lag_ids, lag_seconds, open_holes, released_holes, late_rows, head_msg_id,
	head_state, oldest_unmarked_terminal_seconds, abandoned_backfills, dead_letters FROM mailbox.pipeline_status($1::text)`

// GetPipelineStatus calls mailbox.pipeline_status. Caller role: outbox_mailbox or outbox_auditor.
func GetPipelineStatus(ctx context.Context, db DBTX, source string) (PipelineStatus, error) {
	var s PipelineStatus
	err := db.QueryRow(ctx, pipelineStatusSQL, source).Scan(&s.Watermark, &s.LagIDs, &s.LagSeconds, &s.OpenHoles,
		&s.ReleasedHoles, &s.LateRows, &s.HeadMsgID, &s.HeadState, &s.OldestUnmarkedTerminalSeconds,
		&s.AbandonedBackfills, &s.DeadLetters)
	return s, interpretError("pipeline status", err)
}
