package pgcall

import (
	"context"
	"encoding/json"
	"time"
)

// MailboxRow is one row read from the mailbox table: {msgId, receivedAt, message}.
type MailboxRow struct {
	MsgID      int64           `json:"msgId"`
	ReceivedAt *time.Time      `json:"receivedAt"`
	Message    json.RawMessage `json:"message"`
}

// DiscoveryResult is the row mailbox.record_discovery returns.
type DiscoveryResult struct {
	Watermark     int64
	Enqueued      int
	OpenHoles     int
	ReleasedHoles int
}

const recordDiscoverySQL = `SELECT watermark, enqueued, open_holes, released_holes FROM mailbox.record_discovery($1::text, $2::json)`

// RecordDiscovery calls mailbox.record_discovery with rows read with msg_id > W (and re-read
// released hole ids): enqueue and watermark move in one transaction (R-MX-2). ErrMailboxConflict
// (OB401) for a known id with another message. Caller role: outbox_mailbox.
func RecordDiscovery(ctx context.Context, db DBTX, source string, rows []MailboxRow) (DiscoveryResult, error) {
	if rows == nil {
		rows = []MailboxRow{}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return DiscoveryResult{}, err
	}
	return RecordDiscoveryJSON(ctx, db, source, b)
}

// RecordDiscoveryJSON is RecordDiscovery with the messages document as given (tests of bad input).
func RecordDiscoveryJSON(ctx context.Context, db DBTX, source string, messages []byte) (DiscoveryResult, error) {
	var r DiscoveryResult
	err := db.QueryRow(ctx, recordDiscoverySQL, source, string(messages)).Scan(&r.Watermark, &r.Enqueued, &r.OpenHoles, &r.ReleasedHoles)
	return r, interpretError("record discovery", err)
}
