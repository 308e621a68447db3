package orders_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// eventID is the event examples/orders/append.sql appends.
const eventID = "6f1c3a52-8e0b-4d7a-9c1e-2b5d7f9a0c11"

// Issue 34 item 4, R-DS-4, R-AP-4, R-DP-2, R-AK-1, R-AK-1a, R-AK-4: a release of its own on a
// kernel-only database, by exactly the steps of docs/getting-started.md: register.sql (receipt
// kinds and destinations through outbox.register_receipt_kind / register_destination, run by
// psql), `outboxctl release activate release.json`, the orders-consumer binary and the real
// dispatcher binary with dispatcher.toml, append.sql (outbox.append_event), check.sql. Both
// deliveries end acknowledged with the example's own receipt kinds, the event is published, the
// consumers' receipts are recorded with those kinds and re-verify, and each consumer applied the
// event once.
func TestOrdersReleaseEndToEnd(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	admin := testdb.Conn(t, dsn, "")
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(os.PathSeparator), "github.com/oceanway/pgoutbox/cmd/dispatcher",
		"github.com/oceanway/pgoutbox/cmd/outboxctl", "github.com/oceanway/pgoutbox/examples/orders/cmd/orders-consumer")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// A kernel-only database knows none of the example's kinds, destinations or event types.
	if n := count(t, admin, `SELECT count(*) FROM outbox.receipt_kinds WHERE receipt_kind IN ('order_email', 'order_ledger')`); n != 0 {
		t.Fatalf("%d order receipt kinds before registration", n)
	}

	// 1. Receipt kinds and destinations (twice: the second run changes nothing).
	psql(t, dsn, "register.sql")
	psql(t, dsn, "register.sql")
	// A kind or a destination registered differently under the same name is refused (OB101).
	registrar := testdb.Conn(t, dsn, "outbox_registrar")
	for _, q := range []string{
		`SELECT outbox.register_receipt_kind('order_email', 'OrderEmailReceipt', 'orderEmailReceipt', 'sentAt', 1,
			'{"messageId": {"type": "string", "required": false}}')`,
		`SELECT outbox.register_destination('order_email', 'order_email_sender', 'order_ledger', 'OrderLedgerReceipt', 1, false)`,
	} {
		_, err := registrar.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "OB101" {
			t.Fatalf("%s: %v, want OB101", q, err)
		}
	}
	if n := count(t, admin, `SELECT count(*) FROM outbox.receipt_kinds k JOIN outbox.delivery_destinations d USING (receipt_kind)
		WHERE (k.receipt_kind, k.receipt_type, k.field_prefix, d.destination) IN
		      (('order_email', 'OrderEmailReceipt', 'orderEmailReceipt', 'order_email'),
		       ('order_ledger', 'OrderLedgerReceipt', 'orderLedgerReceipt', 'order_ledger'))`); n != 2 {
		t.Fatalf("%d of 2 kinds with their destinations registered", n)
	}

	// 2. The delivery set, registered and activated by outboxctl.
	out, err := exec.Command(filepath.Join(bin, "outboxctl"), "-db", dsn, "release", "activate", "release.json", "orders-first-release").CombinedOutput()
	if err != nil {
		t.Fatalf("outboxctl release activate: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "registered 1 1 jcs-sha256-v1 ") || !strings.HasPrefix(lines[1], "activated 1 1 jcs-sha256-v1 ") {
		t.Fatalf("outboxctl release activate said:\n%s", out)
	}
	auditor := testdb.Conn(t, dsn, "outbox_auditor")
	sets, err := pgcall.ListDeliverySets(ctx, auditor)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || sets[0].Status != "active" || sets[0].MemberCount != 2 || sets[0].SourceRelease != "orders-first-release" {
		t.Fatalf("delivery sets %+v, want the orders release active with 2 members", sets)
	}

	// 3. The consumers and the dispatcher, over HTTP with the HMAC secret both read from
	// ORDERS_HMAC_SECRET.
	secret := randomHex(t, 24)
	addr := freeAddr(t)
	cons := procfix.Start(t, "orders-consumer", filepath.Join(bin, "orders-consumer"), []string{"-listen", addr, "-db", dsn},
		[]string{"ORDERS_HMAC_SECRET=" + secret})
	cons.WaitLine(t, "orders-consumer listening on "+addr)
	toml, err := os.ReadFile("dispatcher.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(strings.ReplaceAll(string(toml), "127.0.0.1:8091", addr), "127.0.0.1:9464", "127.0.0.1:0")
	if cfg == string(toml) || strings.Count(cfg, addr) != 2 {
		t.Fatalf("dispatcher.toml no longer names 127.0.0.1:8091 twice and 127.0.0.1:9464:\n%s", toml)
	}
	cfgPath := filepath.Join(t.TempDir(), "dispatcher.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	disp := procfix.Start(t, "dispatcher", filepath.Join(bin, "dispatcher"), []string{"-config", cfgPath},
		[]string{"PGOUTBOX_DATABASE_URL=" + dsn, "ORDERS_HMAC_SECRET=" + secret})
	disp.WaitLine(t, `"msg":"metrics listening"`)

	// 4. The event, appended through outbox.append_event as outbox_producer.
	psql(t, dsn, "append.sql")
	if n := count(t, admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = '`+eventID+`'`); n != 2 {
		t.Fatalf("%d deliveries written at append, want 2 (order_email, order_ledger)", n)
	}

	// 5. check.sql until both deliveries are acknowledged and the event is published.
	want := "order_email|acknowledged|order_email|t\norder_ledger|acknowledged|order_ledger|t"
	var got string
	deadline := time.Now().Add(procfix.Deadline)
	for got = psql(t, dsn, "check.sql"); got != want; got = psql(t, dsn, "check.sql") {
		if time.Now().After(deadline) {
			t.Fatalf("check.sql says\n%s\nwant\n%s", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	disp.Stop(t)
	cons.Stop(t)

	// Every attempt was acknowledged at once, by the receipts of the registered kinds, and both
	// the acks and the consumers' receipts re-verify.
	if n := count(t, admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome = 'acknowledged'`); n != 2 {
		t.Fatalf("%d acknowledged attempts, want 2", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome <> 'acknowledged'`); n != 0 {
		t.Fatalf("%d attempts did not end acknowledged", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = '`+eventID+`'`); n != 1 {
		t.Fatal("the event is not published")
	}
	if probs, err := pgcall.VerifyAckDigests(ctx, admin, 100); err != nil || len(probs) != 0 {
		t.Fatalf("verify_ack_digests: %v %+v", err, probs)
	}
	if probs, err := pgcall.VerifyReceiptDigests(ctx, admin, 100); err != nil || len(probs) != 0 {
		t.Fatalf("verify_receipt_digests: %v %+v", err, probs)
	}
	type rec struct{ consumer, kind, typ, ackDigest, digest, doc string }
	rows, err := admin.Query(ctx, `SELECT r.consumer_name, r.receipt_kind, r.receipt_type, d.ack_receipt_digest, r.receipt_digest, r.receipt_document
		FROM inbox.inbox_receipts r JOIN outbox.outbox_deliveries d ON d.event_id = r.event_id AND d.destination = r.destination
		WHERE r.event_id = $1 ORDER BY r.consumer_name`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	var recs []rec
	for rows.Next() {
		var r rec
		if err := rows.Scan(&r.consumer, &r.kind, &r.typ, &r.ackDigest, &r.digest, &r.doc); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(recs) != 2 || recs[0].consumer != "order_email_sender" || recs[0].kind != "order_email" || recs[0].typ != "OrderEmailReceipt" ||
		recs[1].consumer != "order_ledger_writer" || recs[1].kind != "order_ledger" || recs[1].typ != "OrderLedgerReceipt" {
		t.Fatalf("inbox receipts %+v, want one OrderEmailReceipt and one OrderLedgerReceipt", recs)
	}
	var emailDoc, ledgerDoc map[string]any
	for i, d := range []*map[string]any{&emailDoc, &ledgerDoc} {
		if recs[i].ackDigest != recs[i].digest {
			t.Fatalf("%s: acknowledged with digest %s, receipt recorded with %s", recs[i].consumer, recs[i].ackDigest, recs[i].digest)
		}
		if err := json.Unmarshal([]byte(recs[i].doc), d); err != nil {
			t.Fatal(err)
		}
	}
	// The receipts carry the registered members, with the effects the consumers wrote.
	var messageID string
	var entryID, amount int64
	if err := admin.QueryRow(ctx, `SELECT (SELECT message_id FROM orders_example.outgoing_emails WHERE event_id = $1),
		(SELECT entry_id FROM orders_example.ledger_entries WHERE event_id = $1),
		(SELECT amount_cents FROM orders_example.ledger_entries WHERE event_id = $1)`, eventID).Scan(&messageID, &entryID, &amount); err != nil {
		t.Fatal(err)
	}
	if emailDoc["messageId"] != messageID || emailDoc["orderEmailReceiptSchemaVersion"] != float64(1) || emailDoc["sentAt"] == nil {
		t.Fatalf("email receipt %v, want messageId %q", emailDoc, messageID)
	}
	if ledgerDoc["ledgerEntryId"] != float64(entryID) || ledgerDoc["amountCents"] != float64(4250) || amount != 4250 || ledgerDoc["bookedAt"] == nil {
		t.Fatalf("ledger receipt %v, want entry %d and 4250 cents", ledgerDoc, entryID)
	}
	if n := count(t, admin, `SELECT (SELECT count(*) FROM orders_example.outgoing_emails) + (SELECT count(*) FROM orders_example.ledger_entries)`); n != 2 {
		t.Fatalf("%d effects, want one e-mail and one ledger entry", n)
	}

	// Appending the same event again returns the stored row and writes nothing; an event type
	// the active release does not route is refused with OB103.
	psql(t, dsn, "append.sql")
	if n := count(t, admin, `SELECT count(*) FROM outbox.outbox_deliveries`); n != 2 {
		t.Fatalf("%d deliveries after appending the same event again", n)
	}
	producer := testdb.Conn(t, dsn, "outbox_producer")
	_, err = pgcall.AppendEvent(ctx, producer, pgcall.AppendParams{Event: []byte(`{"eventId":"7a1c3a52-8e0b-4d7a-9c1e-2b5d7f9a0c12",
		"eventType":"order.placed@2","eventSchemaVersion":"2","aggregateId":"order-1002","aggregateRevision":1,
		"tenant":{"tenantKind":"organization","tenantId":"acme","workspaceId":"shop"},"operationId":"checkout-1002",
		"causationId":"cart-1002","occurredAt":"2026-12-06T08:00:00.000000Z","payload":{}}`)})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "OB103" {
		t.Fatalf("appending an unrouted event type: %v, want OB103", err)
	}
}

// psql runs one of the example's SQL files with psql (as the docs do) and returns its rows,
// unaligned and without headers.
func psql(t *testing.T, dsn, file string) string {
	t.Helper()
	bin, err := exec.LookPath("psql")
	if err != nil {
		bin = filepath.Join(envOr("PGBIN", "/usr/lib/postgresql/15/bin"), "psql")
	}
	out, err := exec.Command(bin, dsn, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", file).CombinedOutput()
	if err != nil {
		t.Fatalf("psql -f %s: %v\n%s", file, err, out)
	}
	return strings.TrimSpace(string(out))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func count(t *testing.T, db pgcall.DBTX, sql string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
