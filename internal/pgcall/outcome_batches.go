package pgcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ItemOutcome is one row of a batch outcome function (R-AK-9), in input order: Outcome is
// complete | not_complete (ack), pending | quarantined (retry), quarantined (quarantine) or
// rejected, then SQLState (OB001, OB002, OB201, 22023) and Detail say why; a rejected item
// changed nothing.
type ItemOutcome struct {
	Destination, EventID, AttemptID string
	Outcome                         string
	SQLState, Detail                string
}

// Rejected reports whether the item was refused.
func (o ItemOutcome) Rejected() bool { return o.Outcome == "rejected" }

// ErrItemRejected stands for a rejected item's SQLSTATE that has no sentinel of its own (22023).
var ErrItemRejected = errors.New("outcome item rejected")

// Err turns a rejected item into the error its one-row function would have raised: an *Error
// carrying the sentinel (ErrItemRejected when the SQLSTATE has none) and the SQLSTATE, so
// errors.Is and SQLState work as for the one-row call; nil when the item was accepted.
func (o ItemOutcome) Err() error {
	if !o.Rejected() {
		return nil
	}
	s, ok := SQLStates[o.SQLState]
	if !ok {
		s = ErrItemRejected
	}
	return &Error{Sentinel: s, PgErr: &pgconn.PgError{Severity: "ERROR", Code: o.SQLState, Message: "batch item rejected", Detail: o.Detail}}
}

// AckItem is one item of outbox.ack_deliveries. ReceiptDigestCandidate is the canonical text of
// the receipt minus <prefix>Ref, <prefix>Digest and its time field (D-2 hot path); "" lets the
// database canonicalize.
type AckItem struct {
	Fence
	Ack, Receipt           json.RawMessage
	ReceiptDigestCandidate string
}

// RetryItem is one item of outbox.retry_deliveries.
type RetryItem struct {
	Fence
	ErrorCode string
	ErrorRef  *string
}

// QuarantineItem is one item of outbox.quarantine_deliveries.
type QuarantineItem struct {
	Fence
	Reason, ErrorCode string
	ErrorRef          *string
}

type fenceJSON struct {
	Destination string `json:"destination"`
	EventID     string `json:"eventId"`
	AttemptID   string `json:"attemptId"`
	LeaseToken  string `json:"leaseToken"`
}

func fenceOf(f Fence) fenceJSON {
	return fenceJSON(f)
}

const ackDeliveriesSQL = `SELECT destination, event_id::text, attempt_id::text, outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM outbox.ack_deliveries($1::json)`

// AckDeliveries calls outbox.ack_deliveries: many acks in one call and one transaction, each
// fenced and validated like AckDelivery; one ItemOutcome per item in input order (R-AK-9).
// Caller role: outbox_dispatcher.
func AckDeliveries(ctx context.Context, db DBTX, items []AckItem) ([]ItemOutcome, error) {
	type ackJSON struct {
		fenceJSON
		Ack       json.RawMessage `json:"ack"`
		Receipt   json.RawMessage `json:"receipt"`
		Candidate *string         `json:"receiptDigestCandidate,omitempty"`
	}
	doc := make([]ackJSON, len(items))
	for i, it := range items {
		doc[i] = ackJSON{fenceJSON: fenceOf(it.Fence), Ack: rawOrNull(it.Ack), Receipt: rawOrNull(it.Receipt)}
		if it.ReceiptDigestCandidate != "" {
			c := it.ReceiptDigestCandidate
			doc[i].Candidate = &c
		}
	}
	return outcomeBatch(ctx, db, "ack deliveries", ackDeliveriesSQL, doc)
}

const retryDeliveriesSQL = `SELECT destination, event_id::text, attempt_id::text, outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM outbox.retry_deliveries($1::json)`

// RetryDeliveries calls outbox.retry_deliveries: many retryable outcomes in one transaction,
// each like RetryDelivery (R-AK-5, R-AK-9). Caller role: outbox_dispatcher.
func RetryDeliveries(ctx context.Context, db DBTX, items []RetryItem) ([]ItemOutcome, error) {
	type retryJSON struct {
		fenceJSON
		ErrorCode string  `json:"errorCode"`
		ErrorRef  *string `json:"errorRef,omitempty"`
	}
	doc := make([]retryJSON, len(items))
	for i, it := range items {
		doc[i] = retryJSON{fenceOf(it.Fence), it.ErrorCode, it.ErrorRef}
	}
	return outcomeBatch(ctx, db, "retry deliveries", retryDeliveriesSQL, doc)
}

const quarantineDeliveriesSQL = `SELECT destination, event_id::text, attempt_id::text, outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM outbox.quarantine_deliveries($1::json)`

// QuarantineDeliveries calls outbox.quarantine_deliveries: many non-retryable outcomes in one
// transaction, each like QuarantineDelivery (R-AK-6, R-AK-9). Caller role: outbox_dispatcher.
func QuarantineDeliveries(ctx context.Context, db DBTX, items []QuarantineItem) ([]ItemOutcome, error) {
	type quarantineJSON struct {
		fenceJSON
		Reason    string  `json:"reason"`
		ErrorCode string  `json:"errorCode"`
		ErrorRef  *string `json:"errorRef,omitempty"`
	}
	doc := make([]quarantineJSON, len(items))
	for i, it := range items {
		doc[i] = quarantineJSON{fenceOf(it.Fence), it.Reason, it.ErrorCode, it.ErrorRef}
	}
	return outcomeBatch(ctx, db, "quarantine deliveries", quarantineDeliveriesSQL, doc)
}

func rawOrNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func outcomeBatch(ctx context.Context, db DBTX, call, sql string, doc any) ([]ItemOutcome, error) {
	// No HTML escaping: the documents inside reach the database with the caller's text (the
	// receipt kept on the finish is the text the one-row function would keep).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	return outcomeRows(ctx, db, call, sql, buf.String())
}

// outcomeRows runs one batch outcome call and reads its rows (destination, event_id,
// attempt_id, outcome, sqlstate, detail).
func outcomeRows(ctx context.Context, db DBTX, call, sql string, args ...any) ([]ItemOutcome, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpretError(call, err)
	}
	defer rows.Close()
	var out []ItemOutcome
	for rows.Next() {
		var o ItemOutcome
		var dest, ev, att *string
		if err := rows.Scan(&dest, &ev, &att, &o.Outcome, &o.SQLState, &o.Detail); err != nil {
			return nil, interpretError(call, err)
		}
		if dest != nil {
			o.Destination = *dest
		}
		if ev != nil {
			o.EventID = *ev
		}
		if att != nil {
			o.AttemptID = *att
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(call, err)
	}
	return out, nil
}
