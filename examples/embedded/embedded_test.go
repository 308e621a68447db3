package embedded_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/examples/embedded"
	"github.com/oceanway/pgoutbox/outboxtest"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// mailer records what it sent; sending an order twice queues one message.
type mailer struct {
	mu   sync.Mutex
	sent map[string]string // order id -> recipient
}

func (m *mailer) Send(_ context.Context, orderID, recipient string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sent == nil {
		m.sent = map[string]string{}
	}
	m.sent[orderID] = recipient
	return "order-confirmation:" + orderID, nil
}

func (m *mailer) count() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.sent) }

// setup is a throw-away database with the orders example's release (its register.sql and
// release.json, as docs/getting-started.md installs them) and two orders appended in one
// transaction: a valid one and one without a customer e-mail.
func setup(t *testing.T) (db *outboxtest.DB, good, bad string) {
	t.Helper()
	db = outboxtest.New(t)
	register, err := os.ReadFile("../orders/register.sql")
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(t, string(register))
	db.ActivateReleaseFile(t, "../orders/release.json")
	order := func(id, email string) producer.Event {
		p, _ := json.Marshal(map[string]any{"orderId": id, "customerEmail": email, "totalCents": 4250, "currency": "EUR"})
		return producer.Event{EventType: "order.placed@1", EventSchemaVersion: "1", AggregateID: id, AggregateRevision: 1,
			Tenant: producer.Tenant{TenantKind: "organization", TenantID: "acme", WorkspaceID: "shop"}, Payload: p}
	}
	ids := db.Append(t, order("order-1", "ada@example.com"), order("order-2", ""))
	return db, ids[0], ids[1]
}

// R-DP-8 (issue 39): the service's own transport, driven by one dispatch round of the test kit:
// the valid order's confirmation is sent once and its delivery acknowledged with the receipt the
// transport built (checked by the kernel against the registered order_email kind); the order
// without an e-mail address is refused for good (quarantined) and sends nothing. order_ledger
// is not this service's: it stays pending, so the event is not published yet.
func TestMailTransportInOneDispatchRound(t *testing.T) {
	t.Parallel()
	db, good, bad := setup(t)
	m := &mailer{}
	round := db.Dispatch(t, nil, outboxtest.DispatchOptions{
		Transports: map[string]transport.Transport{embedded.EmailDestination: embedded.NewMailTransport(m)},
	})
	got := round.Received(embedded.EmailDestination)
	if len(got) != 2 {
		t.Fatalf("order_email received %d deliveries, want 2", len(got))
	}
	answers := round.Answers(embedded.EmailDestination)
	for i, d := range got {
		want := wire.Acknowledged
		if d.EventID == bad {
			want = wire.NonRetryable
		}
		if answers[i].Status != want {
			t.Errorf("%s: answered %v, want %v", d.EventID, answers[i].Status, want)
		}
	}
	if s := db.Status(t, embedded.EmailDestination, good); s != "acknowledged" {
		t.Errorf("valid order: order_email %s", s)
	}
	if s := db.Status(t, embedded.EmailDestination, bad); s != "quarantined" {
		t.Errorf("order without e-mail: order_email %s", s)
	}
	if m.count() != 1 {
		t.Errorf("%d confirmations sent, want 1", m.count())
	}
	if s := db.Status(t, "order_ledger", good); s != "pending" {
		t.Errorf("order_ledger (not this service's) is %s", s)
	}
	if db.Published(t, good) {
		t.Error("published with order_ledger still pending")
	}
}

// R-DP-8: the service embeds the dispatcher with dispatcher.New and Run (embedded.Run) and the
// example's own configuration file (transport = "custom"); cancelling its context drains it.
func TestServiceEmbedsTheDispatcher(t *testing.T) {
	t.Parallel()
	db, good, _ := setup(t)
	cfg, err := dispatcher.LoadConfig("dispatcher.toml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.MetricsAddress = "127.0.0.1:0"
	pc, err := dispatcher.PoolConfig(cfg, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := mustPool(t, ctx, pc)
	m := &mailer{}
	done := make(chan error, 1)
	go func() { done <- embedded.Run(ctx, pool, cfg, m, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	deadline := time.Now().Add(60 * time.Second) // only keeps a broken test from hanging
	for db.Status(t, embedded.EmailDestination, good) != "acknowledged" {
		select {
		case err := <-done:
			t.Fatalf("service stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("order_email never acknowledged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("drain: %v", err)
	}
	if m.count() != 1 {
		t.Errorf("%d confirmations sent, want 1", m.count())
	}
}
