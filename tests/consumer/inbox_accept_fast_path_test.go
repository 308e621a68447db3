package consumer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

// fastCase is one reference consumer's delivery with the receipt the kit would build for it.
type fastCase struct {
	spec reference.Spec
	d    wire.Delivery
	doc  receipt.Document
}

func fastCaseOf(t *testing.T, spec reference.Spec, aggregate string) fastCase {
	t.Helper()
	d := consumerfix.Delivery(t, spec, consumerfix.Env(spec.Events[0], aggregate, 1))
	p := receipt.Params{Destination: spec.Destination, ConsumerName: spec.ConsumerName, EventID: d.EventID,
		EventEnvelopeSHA256: d.EnvelopeSHA256, ProjectionName: spec.ProjectionName, ProjectionVersion: spec.ProjectionVersion,
		Fields: receipt.Fields{"consumerOutcome": "recorded"}}
	if spec.ProjectionName != "" {
		p.Fields = receipt.Fields{"projectionOutcome": "applied"}
		p.EventType, p.EventSchemaVersion = spec.Events[0].EventType, spec.Events[0].SchemaVersion
	}
	doc, err := testdb.Receipts(t).Build(spec.Kind, p)
	if err != nil {
		t.Fatal(err)
	}
	return fastCase{spec: spec, d: d, doc: doc}
}

func (c fastCase) acceptParams() pgcall.AcceptDeliveryParams {
	return pgcall.AcceptDeliveryParams{ConsumerName: c.spec.ConsumerName, ProjectionName: c.spec.ProjectionName,
		ProjectionVersion: c.spec.ProjectionVersion, EventID: c.d.EventID, EnvelopeSHA256: c.d.EnvelopeSHA256,
		EventEnvelope: c.d.Envelope, Receipt: c.doc.Receipt, DigestCandidate: c.doc.Candidate}
}

// inTx runs f in a transaction as the consumers' role with function tracking on, and rolls it
// back; it returns the stored receipt row (every column but recorded_at, as JSON) and the
// functions f called (pg_stat_xact_user_functions before and after: name → calls).
func inTx(t *testing.T, conn *pgx.Conn, c fastCase, f func(tx pgx.Tx) error) (string, map[string]int64, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+consumerfix.Role); err != nil {
		t.Fatal(err)
	}
	before := xactCalls(t, tx)
	if err := f(tx); err != nil {
		return "", nil, err
	}
	if _, err := tx.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}
	calls := xactCalls(t, tx)
	for name, n := range before {
		if calls[name] -= n; calls[name] == 0 {
			delete(calls, name)
		}
	}
	var row string
	if err := tx.QueryRow(ctx, `SELECT (to_jsonb(r) - 'recorded_at')::text FROM inbox.inbox_receipts r
		WHERE r.consumer_name = $1 AND r.event_id = $2::uuid`, c.spec.ConsumerName, c.d.EventID).Scan(&row); err != nil {
		t.Fatalf("%s: stored row: %v", c.spec.ConsumerName, err)
	}
	return row, calls, nil
}

// xactCalls: function calls this backend has counted and not yet reported
// (pg_stat_xact_user_functions, never flushed inside a transaction): name -> calls.
func xactCalls(t *testing.T, tx pgx.Tx) map[string]int64 {
	t.Helper()
	calls := map[string]int64{}
	rows, err := tx.Query(context.Background(), `SELECT schemaname || '.' || funcname, calls FROM pg_stat_xact_user_functions WHERE calls > 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		calls[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

// Issue 36 item 1, HP-1/HP-2 on the inbox: a new receipt through inbox.accept_delivery is one
// function call - no record_receipt, no _receipt_problem, no helper - for every reference kind
// (with and without projection), and the row it stores is exactly the row inbox.record_receipt
// (the full rule) stores for the same delivery.
func TestAcceptDeliveryFastPathSameRow(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	conn := testdb.Conn(t, b.Dsn, "")
	ctx := context.Background()
	for _, spec := range reference.All() {
		c := fastCaseOf(t, spec, "agg-fast-"+spec.ConsumerName)
		fast, calls, err := inTx(t, conn, c, func(tx pgx.Tx) error {
			res, err := pgcall.AcceptDelivery(ctx, tx, c.acceptParams())
			if err == nil && (res.Outcome != pgcall.ReceiptNew || res.Ref != c.doc.Ref || res.Digest != c.doc.Digest) {
				t.Fatalf("%s: accept_delivery %+v, want new %s %s", spec.ConsumerName, res, c.doc.Ref, c.doc.Digest)
			}
			if err == nil {
				err = pgcall.ConfirmDelivery(ctx, tx, pgcall.ConfirmDeliveryParams{ConsumerName: spec.ConsumerName,
					ProjectionName: spec.ProjectionName, ProjectionVersion: spec.ProjectionVersion, EventID: c.d.EventID})
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", spec.ConsumerName, err)
		}
		want := map[string]int64{"inbox.accept_delivery": 1, "inbox.confirm_delivery": 1}
		if len(calls) != len(want) || calls["inbox.accept_delivery"] != 1 || calls["inbox.confirm_delivery"] != 1 {
			t.Fatalf("%s: functions called %v, want only %v (HP-1: no per-delivery helper)", spec.ConsumerName, calls, want)
		}
		full, calls, err := inTx(t, conn, c, func(tx pgx.Tx) error {
			_, err := pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{ConsumerName: spec.ConsumerName,
				ProjectionName: spec.ProjectionName, ProjectionVersion: spec.ProjectionVersion, EventEnvelope: c.d.Envelope,
				Receipt: c.doc.Receipt, DigestCandidate: c.doc.Candidate})
			return err
		})
		if err != nil || calls["outbox._receipt_problem"] == 0 {
			t.Fatalf("%s: record_receipt: %v (calls %v)", spec.ConsumerName, err, calls)
		}
		if fast != full {
			t.Fatalf("%s: the hot path stored\n%s\nthe full rule stores\n%s", spec.ConsumerName, fast, full)
		}
	}
}

// What the hot path's predicates refuse goes to the full rule, which answers as before: the
// same SQLSTATE as inbox.record_receipt for a receipt that is not closed, a candidate that is
// not the receipt's, an impossible time, a wrong caller; nothing is stored. An ordered call and
// a redelivery take the full path too (existing: the stored document byte for byte).
func TestAcceptDeliveryFastPathRefusals(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	conn := testdb.Conn(t, b.Dsn, "")
	ctx := context.Background()
	spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
	edit := func(c *fastCase, f func(m map[string]any)) {
		var m map[string]any
		if err := json.Unmarshal(c.doc.Receipt, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		raw, _ := json.Marshal(m)
		c.doc.Receipt = raw
	}
	cases := map[string]struct {
		mutate func(c *fastCase)
		want   string
	}{
		"unknown member":    {func(c *fastCase) { edit(c, func(m map[string]any) { m["extra"] = "x" }) }, "OB002"},
		"wrong member type": {func(c *fastCase) { edit(c, func(m map[string]any) { m["consumerOutcome"] = 1 }) }, "OB002"},
		"candidate of another receipt": {func(c *fastCase) {
			c.doc.Candidate = json.RawMessage(strings.Replace(string(c.doc.Candidate), `"recorded"`, `"other"`, 1))
		}, "OB002"},
		"February 30": {func(c *fastCase) {
			edit(c, func(m map[string]any) { m["committedAt"] = "2026-02-30T00:00:00.000000Z" })
		}, "OB002"},
		"other consumer's name": {func(c *fastCase) {
			edit(c, func(m map[string]any) { m["consumerName"] = reference.BillingSettlementCatchUpConsumer })
		}, "OB002"},
	}
	for name, tc := range cases {
		c := fastCaseOf(t, spec, "agg-refuse-"+strings.ReplaceAll(name, " ", "-"))
		tc.mutate(&c)
		for _, fn := range []string{"accept_delivery", "record_receipt"} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+consumerfix.Role); err != nil {
				t.Fatal(err)
			}
			if fn == "accept_delivery" {
				_, err = pgcall.AcceptDelivery(ctx, tx, c.acceptParams())
			} else {
				_, err = pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{ConsumerName: spec.ConsumerName,
					EventEnvelope: c.d.Envelope, Receipt: c.doc.Receipt, DigestCandidate: c.doc.Candidate})
			}
			_ = tx.Rollback(ctx)
			if got := consumerfix.SQLState(err); got != tc.want {
				t.Fatalf("%s, %s: SQLSTATE %q (%v), want %s", name, fn, got, err, tc.want)
			}
		}
	}
	// An envelope with \u0000 (json accepts it, jsonb does not): both paths answer alike.
	c0 := fastCaseOf(t, spec, "agg-nul")
	c0.d.Envelope = json.RawMessage(strings.Replace(string(c0.d.Envelope), `"agg-nul"`, `"agg-\u0000"`, 1))
	var states [2]string
	for i, fn := range []string{"accept_delivery", "record_receipt"} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+consumerfix.Role); err != nil {
			t.Fatal(err)
		}
		if fn == "accept_delivery" {
			_, err = pgcall.AcceptDelivery(ctx, tx, c0.acceptParams())
		} else {
			_, err = pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{ConsumerName: spec.ConsumerName,
				EventEnvelope: c0.d.Envelope, Receipt: c0.doc.Receipt, DigestCandidate: c0.doc.Candidate})
		}
		_ = tx.Rollback(ctx)
		states[i] = consumerfix.SQLState(err)
	}
	if states[0] == "" || states[0] != states[1] {
		t.Fatalf("\\u0000 envelope: accept_delivery %q, record_receipt %q; want the same refusal", states[0], states[1])
	}
	if n := consumerfix.Count(t, b.Pool, `SELECT count(*) FROM inbox.inbox_receipts`); n != 0 {
		t.Fatalf("%d receipts stored by refused calls", n)
	}

	// A redelivery: the first call stores (hot path), the second answers existing with the
	// stored bytes through the full path.
	c := fastCaseOf(t, spec, "agg-again")
	for i, want := range []string{pgcall.ReceiptNew, pgcall.ReceiptExisting} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+consumerfix.Role); err != nil {
			t.Fatal(err)
		}
		res, err := pgcall.AcceptDelivery(ctx, tx, c.acceptParams())
		if err != nil || res.Outcome != want || (i == 1 && string(res.Document) != string(c.doc.Receipt)) {
			t.Fatalf("call %d: %+v, %v; want %s", i+1, res, err, want)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
