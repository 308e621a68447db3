package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Result is what a handler decided for a message it could process: Outcome is
// pgcall.HeadSucceeded or pgcall.HeadDead (then Reason says why). The pump records it with
// mailbox.complete_head in the handler's own transaction.
type Result struct {
	Outcome string
	Reason  string
}

// Handler processes the head message inside tx, a transaction of our database that the pump
// commits together with mailbox.complete_head (SPEC R-MX-10, seed INV-17): the business effect,
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

var literal = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]*$`)

// ReferenceHandler maps a message {key, type, data} to one business record per identity
// (mailbox.apply_reference_effect) and one outbound event whose aggregate is key and whose
// revision is the key's processing sequence (SPEC R-MX-9, R-MX-10). The business identity is
// the jcs-sha256 digest of the message: an upstream resend of the same content under a new
// msg_id is a duplicate (seed PRE-7) and produces no second record and no second event.
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
	dec := json.NewDecoder(bytesReader(head.Message))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Result{}, Reject("malformed message: %s", shortErr(err))
	}
	switch {
	case m.Key == nil || *m.Key == "" || len(*m.Key) > 200:
		return Result{}, Reject("malformed message: key must be a string of 1..200 characters")
	case m.Type == nil || !literal.MatchString(*m.Type) || len(*m.Type) > 200:
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
	env := map[string]any{
		"eventId":            newUUID(),
		"eventType":          EventType,
		"eventSchemaVersion": EventSchemaVersion,
		"aggregateId":        *m.Key,
		"aggregateRevision":  rev,
		"tenant":             map[string]any{"tenantKind": h.TenantKind, "tenantId": h.TenantID, "workspaceId": h.WorkspaceID},
		"occurredAt":         time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"payload": map[string]any{
			"source": source, "msgId": fmt.Sprint(head.MsgID), "type": *m.Type, "data": m.Data,
		},
	}
	b, err := json.Marshal(env)
	if err != nil {
		return Result{}, err
	}
	text, digest, err := canon.CanonicalizeDigest(b)
	if err != nil {
		return Result{}, Reject("malformed message: %s", shortErr(err))
	}
	s := string(text)
	if _, err := pgcall.AppendEvent(ctx, tx, pgcall.AppendParams{Event: b, CanonicalText: &s, EnvelopeSHA256: &digest}); err != nil {
		if errors.Is(err, pgcall.ErrNotCanonicalizable) || errors.Is(err, pgcall.ErrEnvelopeInvalid) {
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
