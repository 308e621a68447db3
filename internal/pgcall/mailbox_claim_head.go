package pgcall

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Head is the leased queue head mailbox.claim_head returns.
type Head struct {
	MsgID      int64
	Message    json.RawMessage
	Attempt    int
	LeaseToken string
}

const claimHeadSQL = `SELECT msg_id, message::text, attempt, lease_token::text FROM mailbox.claim_head($1::text, $2::text, $3::interval)`

// ClaimHead calls mailbox.claim_head: the single executable head when it is due, else nil
// (R-MX-3, R-MX-4). Caller role: outbox_mailbox.
func ClaimHead(ctx context.Context, db DBTX, source, worker string, lease time.Duration) (*Head, error) {
	var h Head
	var msg string
	err := db.QueryRow(ctx, claimHeadSQL, source, worker, intervalString(lease)).Scan(&h.MsgID, &msg, &h.Attempt, &h.LeaseToken)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, interpretError("claim head", err)
	}
	h.Message = json.RawMessage(msg)
	return &h, nil
}
