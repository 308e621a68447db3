package kernel

// The set-based ack path (SPEC §12a HP-1..HP-4): the one-statement predicate of
// outbox.ack_deliveries accepts exactly what the full rule accepts, the publication clock
// (R-AK-4) and the integer form of receipt members (R-AK-1a).

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// R-AK-4: published_at is never earlier than the finish of any of the event's
// acknowledgements. The first ack of a two-delivery event takes its clock, then waits for a row
// lock (held by a third session) while the second delivery is acknowledged and committed with a
// later finish time; when the first ack then publishes the event, the publication must carry
// the clock of the publishing statement, not the first call's start (which is what it carried
// before: published_at 1-3 ms earlier than the last acknowledgement under concurrency).
func TestPublicationClockNeverBeforeLastAck(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "clock-1", 1)
	ops := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	coord := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoord)

	holder := testdb.Conn(t, b.Dsn, "")
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid FOR UPDATE`,
		kernelfix.DestCoreOps, eventID); err != nil {
		t.Fatal(err)
	}

	first := testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	var firstPID int
	if err := first.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&firstPID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res string
		err error
	}
	done := make(chan result, 1)
	ack, rc := kernelfix.ValidAck(t, ops)
	go func() {
		res, err := pgcall.AckDelivery(ctx, first, kernelfix.FenceOf(ops), ack, rc)
		done <- result{res, err}
	}()
	dxWaitBlocked(t, b.Admin, firstPID) // the first ack has taken its clock and waits for the row

	time.Sleep(5 * time.Millisecond) // the second ack's clock is later than the first's
	if res := kernelfix.Ack(t, b.Disp, coord); res != "not_complete" {
		t.Fatalf("second ack: %s, want not_complete (the first delivery is still leased)", res)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res != "complete" {
		t.Fatalf("first ack: %q, %v; want complete", r.res, r.err)
	}

	var published, lastFinish, firstFinish time.Time
	if err := b.Admin.QueryRow(ctx, `
		SELECT p.published_at,
		       (SELECT max(f.finished_at) FROM outbox.outbox_delivery_attempt_finishes f
		          JOIN outbox.outbox_delivery_attempt_starts s ON s.attempt_id = f.attempt_id
		         WHERE s.event_id = p.event_id),
		       (SELECT f.finished_at FROM outbox.outbox_delivery_attempt_finishes f WHERE f.attempt_id = $2::uuid)
		  FROM outbox.outbox_publications p WHERE p.event_id = $1::uuid`, eventID, ops.AttemptID).
		Scan(&published, &lastFinish, &firstFinish); err != nil {
		t.Fatal(err)
	}
	if !lastFinish.After(firstFinish) {
		t.Fatalf("setup: the second acknowledgement (%v) should finish after the first (%v)", lastFinish, firstFinish)
	}
	if published.Before(lastFinish) {
		t.Fatalf("published_at %v is earlier than the event's last acknowledgement %v (R-AK-4)", published, lastFinish)
	}
}

// R-AK-1a: an integer member written with a fraction or an exponent is OB002 on every path -
// the batch's one-statement predicate and the full rule alike, in ack_deliveries and in
// ack_delivery - even though 1.0 and 1e0 canonicalize to the same digest as 1.
func TestAckIntegerFormRefused(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	for _, spelling := range []string{"1.0", "1e0", "1E0", "10e-1"} {
		for _, batch := range []bool{true, false} {
			kernelfix.Append(t, b.Admin, kernelfix.Metering, "intform-"+spelling, 1)
			c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
			d := kernelfix.NewReceipt(t, c).Seal(t)
			ack, rc := d.JSON(t)
			field := `"` + d.K.Prefix + `SchemaVersion":1`
			if !bytes.Contains(ack, []byte(field)) || !bytes.Contains(rc, []byte(field)) {
				t.Fatalf("setup: %s not in the documents", field)
			}
			ack = bytes.Replace(ack, []byte(field), []byte(`"`+d.K.Prefix+`SchemaVersion":`+spelling), 1)
			rc = bytes.Replace(rc, []byte(field), []byte(`"`+d.K.Prefix+`SchemaVersion":`+spelling), 1)
			if batch {
				outs, err := pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{{Fence: kernelfix.FenceOf(c), Ack: ack, Receipt: rc}})
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != 1 || outs[0].Outcome != "rejected" || outs[0].SQLState != "OB002" ||
					!strings.Contains(outs[0].Detail, "SchemaVersion") {
					t.Fatalf("%s (batch): %+v, want rejected OB002 naming SchemaVersion", spelling, outs)
				}
			} else {
				_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc)
				kernelfix.WantState(t, err, "OB002")
			}
			if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, c.EventID); s != "leased" {
				t.Fatalf("%s: status %s after a refused ack, want leased", spelling, s)
			}
			if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 0 {
				t.Fatalf("%s: %d finishes after a refused ack", spelling, n)
			}
			// the same delivery with the integer written as 1 is accepted
			good, goodRc := d.JSON(t)
			if res, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), good, goodRc); err != nil || res != "complete" {
				t.Fatalf("%s: the correct ack afterwards: %q %v", spelling, res, err)
			}
		}
	}
}

// HP-1, R-AK-9: the one-statement predicate and the full rule agree. In one batch: canonical
// acks (the predicate accepts them), correct acks that are not canonical text (indented, keys
// out of order - the predicate rejects them and the full rule accepts them), and wrong ones
// (the full rule names the problem). Every correct item is acknowledged with the same ack
// columns, every wrong one changes nothing.
func TestAckBatchPredicateAgreesWithRule(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	const n = 6
	for i := range n {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "agree-"+string(rune('a'+i)), 1)
	}
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, n, kernelfix.LongLease, kernelfix.DestMetering)
	if len(cs) != n {
		t.Fatalf("claimed %d, want %d", len(cs), n)
	}
	items := make([]pgcall.AckItem, n)
	wantOK := map[string]bool{}
	for i, c := range cs {
		d := kernelfix.NewReceipt(t, c).Seal(t)
		ack, rc := d.JSON(t)
		switch i % 3 {
		case 0: // canonical (json.Marshal of a map sorts the keys): the predicate's case
			wantOK[c.EventID] = true
		case 1: // the same documents, indented: not canonical text, still correct
			var a, r bytes.Buffer
			if err := json.Indent(&a, ack, "", "  "); err != nil {
				t.Fatal(err)
			}
			if err := json.Indent(&r, rc, "", "  "); err != nil {
				t.Fatal(err)
			}
			ack, rc = a.Bytes(), r.Bytes()
			wantOK[c.EventID] = true
		case 2: // a receipt digest that does not match its candidate
			d.Receipt[d.K.Prefix+"Digest"] = strings.Repeat("0", 64)
			d.AppliedReceipt()[d.K.Prefix+"Digest"] = strings.Repeat("0", 64)
			ack, rc = d.JSON(t)
		}
		items[i] = pgcall.AckItem{Fence: kernelfix.FenceOf(c), Ack: ack, Receipt: rc}
	}
	outs, err := pgcall.AckDeliveries(ctx, b.Disp, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		c := cs[i]
		if wantOK[c.EventID] {
			if o.Outcome != "complete" {
				t.Fatalf("item %d: %+v, want complete", i, o)
			}
			var ref, digest, consumer string
			if err := b.Admin.QueryRow(ctx, `SELECT ack_receipt_ref, ack_receipt_digest, ack_consumer_name FROM outbox.outbox_deliveries
			                                  WHERE destination = $1 AND event_id = $2::uuid`, c.Destination, c.EventID).
				Scan(&ref, &digest, &consumer); err != nil {
				t.Fatal(err)
			}
			var rc map[string]any
			if err := json.Unmarshal(items[i].Receipt, &rc); err != nil {
				t.Fatal(err)
			}
			k := kernelfix.ReceiptKindByType(t, c.ExpectedReceiptType)
			if ref != rc[k.Prefix+"Ref"] || digest != rc[k.Prefix+"Digest"] || consumer != c.ConsumerName {
				t.Fatalf("item %d: ack columns %q %q %q do not match the receipt", i, ref, digest, consumer)
			}
			continue
		}
		if o.Outcome != "rejected" || o.SQLState != "OB002" || !strings.Contains(o.Detail, "digest") {
			t.Fatalf("item %d: %+v, want rejected OB002 about the digest", i, o)
		}
		if s := kernelfix.Status(t, b.Admin, c.Destination, c.EventID); s != "leased" {
			t.Fatalf("item %d: status %s, want leased", i, s)
		}
	}
}
