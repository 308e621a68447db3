// Package mailbox is what you need to write a handler for the mailbox inbox pipeline (SPEC §10,
// R-MX-1..12, docs/mailbox.md): the pump (mailbox/pump, run by cmd/mailboxpump) discovers
// the rows of a legacy mailbox table, claims the single queue head of a source and hands it to
// a Handler inside a transaction of our database; the handler's business effect, its outbound
// events (producer.Append, i.e. outbox.append_event) and the message's terminal state
// (mailbox.complete_head) commit together or not at all.
//
// A handler is any type with a Handle method:
//
//	type orders struct{}
//
//	func (orders) Handle(ctx context.Context, tx pgx.Tx, source string, head *mailbox.Head) (mailbox.Result, error) {
//		var m struct{ OrderID string }
//		if err := json.Unmarshal(head.Message, &m); err != nil || m.OrderID == "" {
//			return mailbox.Result{}, mailbox.Reject("malformed message") // DEAD, never retried
//		}
//		if _, err := tx.Exec(ctx, `INSERT INTO shop.orders (id) VALUES ($1) ON CONFLICT DO NOTHING`, m.OrderID); err != nil {
//			return mailbox.Result{}, err // transient: rolled back, retried with backoff
//		}
//		return mailbox.Result{Outcome: mailbox.Succeeded}, nil
//	}
//
// and is plugged into the pump in place of the reference handler (reference.MailboxHandler):
// pass it to the pump's constructor, pump.New(cfg, our, box, orders{}, nil, nil), or
// have the command build it by handing pump.Process a factory instead of
// reference.NewMailboxHandler (cmd/mailboxpump/main.go):
//
//	pump.Process(ctx, os.Args[1:], os.LookupEnv, os.Stderr,
//		func(source string, tenant producer.Tenant) mailbox.Handler { return orders{} })
//
// (pump being the package github.com/oceanway/pgoutbox/mailbox/pump).
package mailbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Head is the leased queue head of a source the pump hands to a Handler: the mailbox row's
// msg_id and message, which attempt this is (1 for the first), and the lease token that fences
// every call the handler makes for this message (a stale token is refused with OB001).
type Head struct {
	MsgID      int64
	Message    json.RawMessage
	Attempt    int
	LeaseToken string
}

// Terminal outcomes a handler reports in Result.Outcome (mailbox.complete_head).
const (
	Succeeded = "succeeded"
	Dead      = "dead"
)

// Result is what a handler decided for a message it could process: Outcome is Succeeded (also
// when empty) or Dead (then Reason says why). The pump records it with mailbox.complete_head in
// the handler's own transaction.
type Result struct {
	Outcome string
	Reason  string
}

// Handler processes the head message inside tx, a transaction of our database that the pump
// commits together with mailbox.complete_head (SPEC R-MX-10): the business effect, the outbound
// events (outbox.append_event) and the terminal state are all or nothing. The pump never runs
// two heads of one source at once, so a handler sees a source's messages in msg_id order.
//
// Return a *Rejection (Reject) for a message that can never succeed (malformed, rejected by the
// business rules): the pump rolls tx back and records the message DEAD with the rejection as
// reason, in a transaction of its own (a non-business terminal state). Any other error is
// treated as transient: tx is rolled back and mailbox.fail_head backs off (the message keeps the
// head until max attempts, then it is DEAD with reason retry_exhausted). A transient error that
// implements ErrorCode reports its R-AK-7 code; otherwise database_unavailable is recorded.
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, source string, head *Head) (Result, error)
}

// Rejection is a permanent, message-caused failure: the message ends DEAD with Reason.
type Rejection struct {
	// Reason is recorded as the DEAD message's reason.
	Reason string
}

// Error returns the rejection with its reason.
func (r *Rejection) Error() string { return "message rejected: " + r.Reason }

// Reject returns a *Rejection.
func Reject(format string, args ...any) error {
	return &Rejection{Reason: fmt.Sprintf(format, args...)}
}

// ErrorCode classifies a transient handler error as an R-AK-7 code for mailbox.fail_head.
type ErrorCode interface{ ErrorCode() string }
