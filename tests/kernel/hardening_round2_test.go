package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// R-AK-1a, D-2 (issue 26 item 3): a consumer's ack or receipt holding text PostgreSQL cannot
// hold (\u0000) or a lone UTF-16 surrogate escape answers OB201 - the document cannot be read,
// so no rule can judge it - on the one-row path and, for the whole call, on the batch path;
// nothing changes and the same delivery is then acknowledged normally.
func TestAckUnreadableTextOneCodeBothPaths(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-unreadable", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	before := kernelfix.Row(t, b.Admin, c.Destination, eventID)
	finishes := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes`)
	inject := func(doc json.RawMessage, esc string) json.RawMessage {
		s := string(doc)
		i := strings.Index(s, `"eventId":"`)
		if i < 0 {
			t.Fatalf("no eventId in %s", s)
		}
		i += len(`"eventId":"`)
		return json.RawMessage(s[:i] + esc + s[i:])
	}
	for _, esc := range []string{`\u0000`, `\ud800`, `\udc00`, `\ud800\u0041`} {
		for _, where := range []string{"ack", "receipt"} {
			a, r := kernelfix.ValidAck(t, c)
			if where == "ack" {
				a = inject(a, esc)
			} else {
				r = inject(r, esc)
			}
			_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), a, r)
			if got := pgcall.SQLState(err); got != "OB201" {
				t.Errorf("ack_delivery, %s in the %s: SQLSTATE %q (%v), want OB201", esc, where, got, err)
			}
			_, err = pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{{Fence: kernelfix.FenceOf(c), Ack: a, Receipt: r}})
			if got := pgcall.SQLState(err); got != "OB201" {
				t.Errorf("ack_deliveries, %s in the %s: SQLSTATE %q (%v), want OB201", esc, where, got, err)
			}
		}
	}
	if after := kernelfix.Row(t, b.Admin, c.Destination, eventID); after != before {
		t.Fatalf("refused acks changed the delivery:\n%s\n%s", before, after)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes`); n != finishes {
		t.Fatalf("refused acks wrote %d finishes", n-finishes)
	}
	if res := kernelfix.Ack(t, b.Disp, c); res != "complete" {
		t.Fatalf("ack after the refusals: %s", res)
	}
}

// R-AK-4, T-5, R-SEC-3 (issue 26 item 3): the publication guard rests on no session setting.
// The owner, in one transaction, moves a pending delivery to acknowledged by hand (the delivery
// trigger lets the owner through: no terminal row changes), forges every setting the guard once
// trusted, and inserts a publication - directly, and from a PL/pgSQL block that runs the very
// statement text of outbox._publish_events with a variable of the same name: OB202 each time,
// because the guard reads PostgreSQL's call stack, not a setting. Nothing is published; the
// real ack then publishes the event.
func TestForgedPublicationRefusedWithoutSettings(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-forge", 1)
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	attempts := map[string]string{
		"direct insert": `INSERT INTO outbox.outbox_publications (event_id, published_at) VALUES ('` + eventID + `'::uuid, now())`,
		"same statement in a DO block": fmt.Sprintf(`DO $do$
DECLARE v_complete uuid[] := ARRAY['%s'::uuid];
BEGIN
    INSERT INTO outbox.outbox_publications (event_id, published_at) SELECT u.event_id, pg_catalog.clock_timestamp() FROM pg_catalog.unnest(v_complete) AS u(event_id) ON CONFLICT (event_id) DO NOTHING;
END
$do$`, eventID),
		"statement text with a forged frame": fmt.Sprintf(`DO $do$
DECLARE v_complete uuid[] := ARRAY['%s'::uuid];
BEGIN
    INSERT INTO outbox.outbox_publications (event_id, published_at) SELECT u.event_id, pg_catalog.clock_timestamp() FROM pg_catalog.unnest(v_complete) AS u(event_id) ON CONFLICT (event_id) DO NOTHING/*"
PL/pgSQL function outbox._publish_events(uuid[],timestamp with time zone) line 1 at SQL statement
*/;
END
$do$`, eventID),
	}
	for name, forge := range attempts {
		t.Run(name, func(t *testing.T) {
			tx, err := owner.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `UPDATE outbox.outbox_deliveries
				SET status = 'acknowledged', delivered_at = now(), ack_receipt_digest = repeat('0', 64)
				WHERE event_id = $1::uuid`, eventID); err != nil {
				t.Fatalf("owner moves the delivery by hand: %v", err)
			}
			if _, err := tx.Exec(ctx, `SELECT set_config('pgoutbox.publishing', 'on', true),
				set_config('pgoutbox.publishing_event', $1, true)`, eventID); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, forge)
			kernelfix.WantState(t, err, "OB202")
		})
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p != nil {
		t.Fatalf("forged publication at %v", p)
	}
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if res := kernelfix.Ack(t, b.Disp, c); res != "complete" {
		t.Fatalf("ack %s", res)
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p == nil {
		t.Fatal("not published by the real ack")
	}
}

// R-SEC-3, R-SEC-5 (issue 26 item 3): the registry trigger names the table it guards with its
// own schema - inbox.consumer_roles, not outbox.consumer_roles.
func TestRegistryTriggerNamesItsTable(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	for stmt, table := range map[string]string{
		`TRUNCATE inbox.consumer_roles`:                               "inbox.consumer_roles",
		`DELETE FROM outbox.delivery_destinations`:                    "outbox.delivery_destinations",
		`UPDATE outbox.receipt_kinds SET receipt_kind = receipt_kind`: "outbox.receipt_kinds",
	} {
		t.Run(table, func(t *testing.T) {
			_, err := owner.Exec(ctx, stmt)
			kernelfix.WantState(t, err, "OB202")
			if !strings.Contains(err.Error(), " on "+table+" is not allowed") {
				t.Errorf("%s: message does not name %s: %v", stmt, table, err)
			}
		})
	}
}
