// Package orders is a release of its own built on pgoutbox, apart from the OceanWay reference
// release: one event, order.placed@1 (schema "1"), fanned out to two destinations, each with a
// receipt kind of its own.
//
//   - order_email: consumer order_email_sender queues a confirmation e-mail and answers with an
//     OrderEmailReceipt (kind order_email, member messageId);
//   - order_ledger: consumer order_ledger_writer books the order in a ledger and answers with an
//     OrderLedgerReceipt (kind order_ledger, members ledgerEntryId and amountCents).
//
// Everything is registered through the kernel's public interface: register.sql calls
// outbox.register_receipt_kind and outbox.register_destination, release.json is the delivery
// set that `outboxctl release activate release.json` registers and activates. The consumers are
// built on the consumer kit (package consumer) and served over HTTP by cmd/orders-consumer; the
// real dispatcher (cmd/dispatcher, dispatcher.toml) delivers to them. The walk-through is
// docs/getting-started.md; orders_test.go runs the same steps end to end.
package orders

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/receipt"
)

// Destinations, consumer names and receipt kinds of the example (register.sql, release.json).
const (
	EmailDestination  = "order_email"
	EmailConsumer     = "order_email_sender"
	EmailKind         = receipt.Kind("order_email")
	LedgerDestination = "order_ledger"
	LedgerConsumer    = "order_ledger_writer"
	LedgerKind        = receipt.Kind("order_ledger")
)

// OrderPlaced is the example's one event type with its exact schema version.
var OrderPlaced = consumer.EventKey{EventType: "order.placed@1", SchemaVersion: "1"}

// Order is the payload of an order.placed@1 event.
type Order struct {
	OrderID       string `json:"orderId"`
	CustomerEmail string `json:"customerEmail"`
	TotalCents    int64  `json:"totalCents"`
	Currency      string `json:"currency"`
}

//go:embed schema.sql
var schemaDDL string

// Execer runs SQL (a *pgx.Conn, pgx.Tx or *pgxpool.Pool).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Install creates the example's tables (idempotent) and grants them to grantee, the role the
// consumers' transactions run as ("" grants nothing).
func Install(ctx context.Context, db Execer, grantee string) error {
	if _, err := db.Exec(ctx, schemaDDL); err != nil {
		return fmt.Errorf("install orders_example: %w", err)
	}
	if grantee == "" {
		return nil
	}
	role := pgx.Identifier{grantee}.Sanitize()
	if _, err := db.Exec(ctx, `GRANT USAGE ON SCHEMA orders_example TO `+role+`;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA orders_example TO `+role+`;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA orders_example TO `+role); err != nil {
		return fmt.Errorf("grant orders_example to %s: %w", grantee, err)
	}
	return nil
}

// EmailConfig is the kit configuration of order_email_sender over pool; the caller adds
// authentication (HMACSecret or BearerToken), Role and Logger. The sender only writes, so it
// takes the kit's one-round-trip path (Config.Mutate; pool must be a *pgxpool.Pool).
func EmailConfig(pool consumer.TxBeginner) consumer.Config {
	return consumer.Config{Pool: pool, Destination: EmailDestination, ConsumerName: EmailConsumer,
		ReceiptKind: EmailKind, SupportedEvents: []consumer.EventKey{OrderPlaced}, Mutate: mutateEmail}
}

// LedgerConfig is the kit configuration of order_ledger_writer over pool. The ledger reads the
// entry id its insert generates (the receipt names it), so it runs on the Apply path.
func LedgerConfig(pool consumer.TxBeginner) consumer.Config {
	return consumer.Config{Pool: pool, Destination: LedgerDestination, ConsumerName: LedgerConsumer,
		ReceiptKind: LedgerKind, SupportedEvents: []consumer.EventKey{OrderPlaced}, Apply: applyLedger}
}

// order decodes and checks the payload; a payload the consumer can never apply is rejected
// (non-retryable: the source quarantines the delivery), nothing is written.
func order(ev consumer.Event) (Order, error) {
	var o Order
	if err := json.Unmarshal(ev.Payload, &o); err != nil {
		return o, consumer.Reject(consumer.CodeConsumerRejected, "payload_not_an_order", err)
	}
	if o.OrderID == "" || !strings.Contains(o.CustomerEmail, "@") || o.TotalCents < 0 || len(o.Currency) != 3 {
		return o, consumer.Reject(consumer.CodeConsumerRejected, "order_incomplete", errors.New("orderId, customerEmail, totalCents >= 0 and a 3-letter currency are required"))
	}
	return o, nil
}

// mutateEmail queues the confirmation e-mail in the kit's one-round-trip chain (the same
// transaction as the receipt); the receipt names it.
func mutateEmail(ev consumer.Event, q *consumer.Queue) (consumer.ReceiptFields, error) {
	o, err := order(ev)
	if err != nil {
		return nil, err
	}
	messageID := "order-confirmation:" + o.OrderID
	q.Exec(`INSERT INTO orders_example.outgoing_emails (message_id, event_id, order_id, recipient, subject)
VALUES ($1::text, $2::uuid, $3::text, $4::text, $5::text)`, messageID, ev.EventID, o.OrderID, o.CustomerEmail, "Your order "+o.OrderID)
	return consumer.ReceiptFields{"messageId": messageID}, nil
}

// applyLedger books the order; the receipt carries the entry's id and the amount booked.
func applyLedger(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
	o, err := order(ev)
	if err != nil {
		return nil, err
	}
	var entryID int64
	if err := tx.QueryRow(ctx, `INSERT INTO orders_example.ledger_entries (event_id, order_id, amount_cents, currency)
VALUES ($1::uuid, $2, $3, $4) RETURNING entry_id`, ev.EventID, o.OrderID, o.TotalCents, o.Currency).Scan(&entryID); err != nil {
		return nil, err
	}
	return consumer.ReceiptFields{"ledgerEntryId": entryID, "amountCents": o.TotalCents}, nil
}
