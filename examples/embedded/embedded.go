// Package embedded shows a Go service that embeds the pgoutbox dispatcher (package dispatcher)
// instead of running cmd/dispatcher, with a transport of its own: MailTransport delivers the
// orders example's order.placed@1 events (examples/orders) to the order_email destination by
// handing them to the service's Mailer, and answers with the OrderEmailReceipt the kernel
// expects, built with the receipt kit from the kinds registered in the database, the way the
// built-in JetStream transport builds its broker receipts.
//
// The configuration (dispatcher.toml) names the destination with transport = "custom": the
// service supplies that transport in dispatcher.Options.Transports. Run wires it all.
package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// EmailDestination is the destination MailTransport serves, with its receipt kind
// (examples/orders/register.sql).
const (
	EmailDestination = "order_email"
	EmailKind        = receipt.Kind("order_email")
)

// Mailer sends an order confirmation and returns the id of the queued message. Sending the same
// order twice must queue one message (a redelivery after a crash sends it again).
type Mailer interface {
	Send(ctx context.Context, orderID, recipient string) (messageID string, err error)
}

// MailTransport is a transport.Transport of the service's own: it sends the confirmation of each
// order.placed@1 event through a Mailer and builds the OrderEmailReceipt itself.
type MailTransport struct {
	mailer   Mailer
	receipts atomic.Pointer[receipt.Catalog]
}

// NewMailTransport returns a MailTransport over mailer.
func NewMailTransport(mailer Mailer) *MailTransport { return &MailTransport{mailer: mailer} }

// SetReceiptCatalog receives the receipt kinds the dispatcher loaded from the database at
// preflight (transport.ReceiptCatalogUser).
func (m *MailTransport) SetReceiptCatalog(c *receipt.Catalog) { m.receipts.Store(c) }

// ReceiptKind says that this transport builds order_email receipts itself
// (transport.ReceiptBuilder): the dispatcher's preflight checks it against the destination.
func (m *MailTransport) ReceiptKind() string { return string(EmailKind) }

// Deliver sends the confirmation of the order in d's envelope. A malformed order is refused for
// good (non-retryable); a mailer failure is an error the dispatcher retries.
func (m *MailTransport) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	cat := m.receipts.Load()
	if cat == nil {
		return wire.Result{}, errors.New("mail transport: no receipt catalog (dispatcher preflight not run)")
	}
	var env struct {
		Payload struct {
			OrderID       string `json:"orderId"`
			CustomerEmail string `json:"customerEmail"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(d.Envelope, &env); err != nil || env.Payload.OrderID == "" || env.Payload.CustomerEmail == "" {
		return wire.Result{Status: wire.NonRetryable, Code: "consumer_rejected", Ref: "order_incomplete"}, nil
	}
	id, err := m.mailer.Send(ctx, env.Payload.OrderID, env.Payload.CustomerEmail)
	if err != nil {
		return wire.Result{}, fmt.Errorf("mail transport: send: %w", err)
	}
	built, err := cat.Build(EmailKind, receipt.Params{
		Destination: d.Destination, ConsumerName: d.ConsumerName, EventID: d.EventID,
		EventEnvelopeSHA256: d.EnvelopeSHA256, Fields: receipt.Fields{"messageId": id},
	})
	if err != nil {
		return wire.Result{}, fmt.Errorf("mail transport: receipt: %w", err)
	}
	return wire.Result{Status: wire.Acknowledged, Ack: built.Ack, Receipt: built.Receipt}, nil
}

// Close does nothing.
func (m *MailTransport) Close() error { return nil }

var _ transport.ReceiptBuilder = (*MailTransport)(nil)

// Run embeds the dispatcher: it delivers the destinations of cfg (order_email through the
// service's MailTransport) with kernel calls on pool until ctx is cancelled, then drains.
func Run(ctx context.Context, pool *pgxpool.Pool, cfg *dispatcher.Config, mailer Mailer, log *slog.Logger) error {
	d, err := dispatcher.New(pool, cfg, dispatcher.Options{
		Transports: map[string]transport.Transport{EmailDestination: NewMailTransport(mailer)},
		Logger:     log,
	})
	if err != nil {
		return err
	}
	if err := d.Preflight(ctx); err != nil {
		return err
	}
	return d.Run(ctx)
}
