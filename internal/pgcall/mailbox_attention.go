package pgcall

import (
	"context"
	"time"
)

// MailboxAttention is one processing row an operator should look at: a dead letter, a late row
// (committed inside a released hole) or an abandoned backfill.
type MailboxAttention struct {
	MsgID  int64
	Kind   string // dead | late | abandoned
	Reason string // dead reason, abandon reason (missing | deadline), or "" for late rows
	Since  time.Time
}

const mailboxAttentionSQL = `
SELECT m.msg_id, k.kind, coalesce(CASE k.kind WHEN 'dead' THEN m.dead_reason WHEN 'abandoned' THEN m.abandon_reason END, ''),
       coalesce(CASE k.kind WHEN 'dead' THEN m.finished_at WHEN 'abandoned' THEN m.abandoned_at END, m.enqueued_at)
  FROM mailbox.messages AS m
 CROSS JOIN LATERAL (VALUES (CASE WHEN m.backfill_state = 'abandoned' THEN 'abandoned'
                                  WHEN m.state IN ('dead', 'late') THEN m.state END)) AS k(kind)
 WHERE m.source = $1 AND (m.state IN ('dead', 'late') OR m.backfill_state = 'abandoned')
 ORDER BY m.msg_id
 LIMIT $2`

// ListMailboxAttention reads (as outbox_auditor, who may SELECT the mailbox tables) the rows of
// a source needing an operator: abandoned backfills (to resolve), dead letters and late rows.
func ListMailboxAttention(ctx context.Context, db DBTX, source string, limit int) ([]MailboxAttention, error) {
	rows, err := db.Query(ctx, mailboxAttentionSQL, source, limit)
	if err != nil {
		return nil, interpretError("mailbox attention", err)
	}
	defer rows.Close()
	var out []MailboxAttention
	for rows.Next() {
		var a MailboxAttention
		if err := rows.Scan(&a.MsgID, &a.Kind, &a.Reason, &a.Since); err != nil {
			return nil, interpretError("mailbox attention", err)
		}
		out = append(out, a)
	}
	return out, interpretError("mailbox attention", rows.Err())
}
