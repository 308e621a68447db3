package mailbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/producer"
)

// Result is what a handler decided for a message it could process: Outcome is
// pgcall.HeadSucceeded or pgcall.HeadDead (then Reason says why). The pump records it with
// mailbox.complete_head in the handler's own transaction.
type Result struct {
	Outcome string
	Reason  string
}

// Handler processes the head message inside tx, a transaction of our database that the pump
// commits together with mailbox.complete_head (SPEC R-MX-10): the business effect,
// the outbound events (outbox.append_event) and the terminal state are all or nothing.
//
// Return a *Rejection for a message that can never succeed (malformed, rejected by the
// business rules): the pump rolls tx back and records the message DEAD with the rejection as
// reason, in a transaction of its own (a non-business terminal state). Any other error is
// treated as transient: tx is rolled back and mailbox.fail_head backs off (the message keeps the
// head until max attempts, then it is DEAD with reason retry_exhausted).
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, source string, head *pgcall.Head) (Result, error)
}

// Rejection is a permanent, message-caused failure: the message ends DEAD with Reason.
type Rejection struct{ Reason string }

func (r *Rejection) Error() string { return "message rejected: " + r.Reason }

// Reject returns a *Rejection.
func Reject(format string, args ...any) error {
	return &Rejection{Reason: fmt.Sprintf(format, args...)}
}

// ErrorCode classifies a transient handler error as an R-AK-7 code for mailbox.fail_head.
type ErrorCode interface{ ErrorCode() string }

// The reference handler's outbound event (SPEC §10 "reference handler"): a destination with
// ordering per_aggregate receives it (RegisterReferenceDestination, ExtendRelease).
const (
	EventType          = "mailbox.message-applied@1"
	EventSchemaVersion = "1"
)

// ReferenceHandler maps a message {key, type, data} to one business record per identity
// (mailbox.apply_reference_effect) and one outbound event whose aggregate is key and whose
// revision is the key's processing sequence (SPEC R-MX-9, R-MX-10). The business identity is
// the jcs-sha256 digest of the message: an upstream resend of the same content under a new
// msg_id is a duplicate (R-MX-9) and produces no second record and no second event.
type ReferenceHandler struct {
	TenantKind, TenantID, WorkspaceID string
	// Reject, when set, is the business rule: a non-empty answer rejects the message (DEAD).
	Reject func(key, typ string, data json.RawMessage) string
}

type refMessage struct {
	Key  *string         `json:"key"`
	Type *string         `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Handle implements Handler.
func (h ReferenceHandler) Handle(ctx context.Context, tx pgx.Tx, source string, head *pgcall.Head) (Result, error) {
	var m refMessage
	dec := json.NewDecoder(bytes.NewReader(head.Message))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Result{}, Reject("malformed message: %s", shortErr(err))
	}
	switch {
	case m.Key == nil || *m.Key == "" || len(*m.Key) > 200:
		return Result{}, Reject("malformed message: key must be a string of 1..200 characters")
	case m.Type == nil || !literalRE.MatchString(*m.Type) || len(*m.Type) > 200:
		return Result{}, Reject("malformed message: type must match ^[a-z0-9][a-z0-9._@-]*$")
	case m.Data == nil:
		return Result{}, Reject("malformed message: data is missing")
	}
	identity, err := canon.SHA256Hex(head.Message)
	if err != nil {
		// Not canonicalizable (a float, a duplicate key, too deep): no event could carry it.
		return Result{}, Reject("malformed message: %s", shortErr(err))
	}
	if h.Reject != nil {
		if why := h.Reject(*m.Key, *m.Type, m.Data); why != "" {
			return Result{}, Reject("rejected by handler: %s", why)
		}
	}
	outcome, rev, err := pgcall.ApplyReferenceEffect(ctx, tx, source, head.MsgID, head.LeaseToken, identity, *m.Key, *m.Type)
	if err != nil {
		return Result{}, err
	}
	if outcome == pgcall.EffectDuplicate {
		return Result{Outcome: pgcall.HeadSucceeded}, nil // one identity, one effective record (R-MX-9)
	}
	payload, err := json.Marshal(map[string]any{"source": source, "msgId": fmt.Sprint(head.MsgID), "type": *m.Type, "data": m.Data})
	if err != nil {
		return Result{}, err
	}
	if _, err := producer.Append(ctx, tx, producer.Event{EventType: EventType, EventSchemaVersion: EventSchemaVersion,
		AggregateID: *m.Key, AggregateRevision: rev, Payload: payload,
		Tenant: producer.Tenant{TenantKind: h.TenantKind, TenantID: h.TenantID, WorkspaceID: h.WorkspaceID}}); err != nil {
		if errors.Is(err, producer.ErrNotCanonicalizable) || errors.Is(err, producer.ErrEnvelopeInvalid) {
			if pgcall.SQLState(err) == "" { // refused in Go, before the database saw it
				return Result{}, Reject("malformed message: %s", shortErr(err))
			}
			return Result{}, Reject("event refused: %s", pgcall.SQLState(err))
		}
		return Result{}, err
	}
	return Result{Outcome: pgcall.HeadSucceeded}, nil
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
