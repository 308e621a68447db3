package kernel

// One closed-receipt rule (SPEC R-AK-1a, migration 039): outbox._receipt_problem is the rule
// the producer's ack (outbox._ack_problem, for ack_delivery and ack_deliveries) and the inbox
// (inbox.record_receipt) both apply, so the same receipt is refused on both sides with OB002 and
// the same problem text. Receipt kinds are data: requires_projection and a member's minimum are
// attributes of outbox.receipt_kinds / outbox.receipt_kind_members, so a newly registered kind
// behaves like the reference kinds that have them. One outcome-item parse (R-AK-9, HP-1): the
// three batch outcome functions call outbox._outcome_items once per batch.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// rrRuleProblem is outbox._receipt_problem of receipt for kind, asked directly (superuser).
func rrRuleProblem(t *testing.T, admin pgcall.DBTX, kind string, receipt json.RawMessage) string {
	t.Helper()
	var p *string
	if err := admin.QueryRow(context.Background(),
		`SELECT outbox._receipt_problem(k, $2::json, $2::json::jsonb) FROM outbox.receipt_kinds AS k WHERE k.receipt_kind = $1`,
		kind, string(receipt)).Scan(&p); err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return ""
	}
	return *p
}

func rrPgError(t *testing.T, err error, code string) *pgconn.PgError {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("got %v, want SQLSTATE %s", err, code)
	}
	return pe
}

// R-AK-1a, R-AK-9: the same bad receipt is refused by the same rule at the producer (ack_delivery
// and ack_deliveries: OB002, detail "receipt: <problem>") and at the inbox (record_receipt:
// OB002, detail "<problem>"), where <problem> is what outbox._receipt_problem says; the integer
// test is the stricter one (no fraction or exponent, |n| <= 2^53-1) on both sides.
func TestReceiptRuleSameAtProducerAndInbox(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	inbox := testdb.Conn(t, b.Dsn, "outbox_consumer")
	met := kernelfix.ReceiptKindByName(t, "metering_input_processor")
	sv := `"` + met.Prefix + `SchemaVersion":1`

	type variant struct {
		name    string
		edit    func(d *kernelfix.ReceiptDoc)            // before sealing (the digest follows)
		text    func(rc json.RawMessage) json.RawMessage // on the receipt's text after sealing
		problem string                                   // a part of the rule's problem text
	}
	variants := []variant{
		{name: "unknown member", edit: func(d *kernelfix.ReceiptDoc) { d.Receipt["note"] = "x" }, problem: `unknown member "note"`},
		{name: "member of the wrong type", edit: func(d *kernelfix.ReceiptDoc) { d.Receipt["consumerOutcome"] = 7 }, problem: `member "consumerOutcome" must be a JSON string`},
		{name: "schema version 1.0", text: func(rc json.RawMessage) json.RawMessage {
			return bytes.Replace(rc, []byte(sv), []byte(`"`+met.Prefix+`SchemaVersion":1.0`), 1)
		}, problem: "must be an integer written without fraction or exponent"},
		{name: "integer member 1e0", edit: func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionVersion"] = 1 }, text: func(rc json.RawMessage) json.RawMessage {
			return bytes.Replace(rc, []byte(`"projectionVersion":1`), []byte(`"projectionVersion":1e0`), 1)
		}, problem: `"projectionVersion" 1e0 must be an integer written without fraction or exponent`},
	}
	for i, v := range variants {
		for _, batch := range []bool{false, true} {
			kernelfix.Append(t, b.Admin, kernelfix.Metering, "rule-"+string(rune('a'+i))+map[bool]string{false: "1", true: "n"}[batch], 1)
			c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
			d := kernelfix.NewReceipt(t, c)
			if v.edit != nil {
				v.edit(d)
			}
			d.Seal(t)
			ack, rc := d.JSON(t)
			if v.text != nil {
				if rc2 := v.text(rc); bytes.Equal(rc2, rc) {
					t.Fatalf("%s: setup: the edit did not apply to %s", v.name, rc)
				} else {
					rc = rc2
				}
			}
			rule := rrRuleProblem(t, b.Admin, met.Kind, rc)
			if rule == "" || !strings.Contains(rule, v.problem) {
				t.Fatalf("%s: outbox._receipt_problem = %q, want it to name %q", v.name, rule, v.problem)
			}

			// producer
			var detail string
			if batch {
				outs, err := pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{{Fence: kernelfix.FenceOf(c), Ack: ack, Receipt: rc}})
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != 1 || outs[0].Outcome != "rejected" || outs[0].SQLState != "OB002" {
					t.Fatalf("%s (ack_deliveries): %+v, want rejected OB002", v.name, outs)
				}
				detail = outs[0].Detail
			} else {
				_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc)
				kernelfix.WantState(t, err, "OB002")
				var pe *pgcall.Error
				if !errors.As(err, &pe) {
					t.Fatalf("%s: %v is not a pgcall.Error", v.name, err)
				}
				detail = pe.PgErr.Detail
			}
			if detail != "receipt: "+rule {
				t.Fatalf("%s (batch %v): producer detail %q, want %q", v.name, batch, detail, "receipt: "+rule)
			}
			if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, c.EventID); s != "leased" {
				t.Fatalf("%s: status %s after a refused ack, want leased", v.name, s)
			}

			// inbox: the same receipt document for the same event
			env := c.EventEnvelopeCanonical
			if env == nil {
				env = c.EventEnvelope
			}
			_, err := consumerfix.Record(ctx, inbox, c.ConsumerName, "", 0, env, rc)
			pe := rrPgError(t, err, "OB002")
			if pe.Detail != rule {
				t.Fatalf("%s: inbox detail %q, want the rule's %q", v.name, pe.Detail, rule)
			}
		}
	}
	if n := consumerfix.Count(t, b.Admin, `SELECT count(*) FROM inbox.inbox_receipts`); n != 0 {
		t.Fatalf("%d receipts stored, want none", n)
	}
	// control: the unedited receipt passes the rule on both sides
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "rule-control", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	ack, rc := kernelfix.NewReceipt(t, c).Seal(t).JSON(t)
	if p := rrRuleProblem(t, b.Admin, met.Kind, rc); p != "" {
		t.Fatalf("control: outbox._receipt_problem = %q", p)
	}
	env := c.EventEnvelopeCanonical
	if env == nil {
		env = c.EventEnvelope
	}
	if r, err := consumerfix.Record(ctx, inbox, c.ConsumerName, "", 0, env, rc); err != nil || r.Outcome != "new" {
		t.Fatalf("control at the inbox: %+v %v", r, err)
	}
	if res, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc); err != nil || res != "complete" {
		t.Fatalf("control at the producer: %q %v", res, err)
	}
}

// rrRegisterKind registers a receipt kind that is not a reference kind (as outbox_owner, the
// registry's only writer), with its members.
func rrRegisterKind(t *testing.T, admin *pgx.Conn, kind, prefix string, requiresProjection bool, members string) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_owner`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox.receipt_kinds
		        (receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection)
		        VALUES ($1, $2, $3, 'appliedAt', 1, $4)`,
			kind, strings.ToUpper(prefix[:1])+prefix[1:], prefix, requiresProjection); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required, minimum)
		        SELECT $1, m.member, m.json_type, m.required, m.minimum
		          FROM json_to_recordset($2::json) AS m(member text, json_type text, required boolean, minimum bigint)`,
			kind, members)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// rrReceipt is a receipt of kind prefix (time field timeField) for the envelope env whose
// jcs-sha256-v1 digest is sha; its ref and digest are left for the inbox to fill in.
func rrReceipt(t *testing.T, prefix, timeField, consumer string, env json.RawMessage, sha string, extra map[string]any) json.RawMessage {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		prefix + "SchemaVersion":              1,
		prefix + "DigestAlgorithmVersion":     "jcs-sha256-v1",
		"destination":                         "rr_store",
		"consumerName":                        consumer,
		"eventId":                             e["eventId"],
		"eventEnvelopeDigestAlgorithmVersion": "jcs-sha256-v1",
		"eventEnvelopeSha256":                 sha,
		timeField:                             "2026-01-02T03:04:05.000000Z",
	}
	for k, v := range extra {
		m[k] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// R-AK-1a: no kernel SQL names a reference kind. A newly registered kind with
// requires_projection behaves like operations_projection at the inbox (recorded without a
// projection: OB002 "needs a projection"; with its projection: new), one without it does not
// need one; a member's registered minimum is enforced for any kind (and broker_publication's
// sequence >= 0 is that attribute now, set by migration 039).
func TestReceiptRuleKindAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	inbox := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "rr_timeline", 1) // R-PV-1

	var opsNeeds, brokerMin bool
	if err := admin.QueryRow(ctx, `SELECT
	        (SELECT requires_projection FROM outbox.receipt_kinds WHERE receipt_kind = 'operations_projection'),
	        (SELECT minimum = 0 FROM outbox.receipt_kind_members WHERE receipt_kind = 'broker_publication' AND member = 'sequence')`).
		Scan(&opsNeeds, &brokerMin); err != nil {
		t.Fatal(err)
	}
	if !opsNeeds || !brokerMin {
		t.Fatalf("migration 039: operations_projection requires_projection %v, broker sequence minimum 0 %v", opsNeeds, brokerMin)
	}

	rrRegisterKind(t, admin, "rr_projection", "rrProjectionAppliedReceipt", true,
		`[{"member":"projectionName","json_type":"string","required":true},
		  {"member":"projectionVersion","json_type":"integer","required":true}]`)
	rrRegisterKind(t, admin, "rr_ledger", "rrLedgerConsumerReceipt", false,
		`[{"member":"position","json_type":"integer","required":true,"minimum":1}]`)

	// requires_projection: without a projection refused exactly like operations_projection
	env, sha, _ := consumerfix.EnvelopeAndReceipt(t, nil)
	proj := rrReceipt(t, "rrProjectionAppliedReceipt", "appliedAt", "rr_projector", env, sha,
		map[string]any{"projectionName": "rr_timeline", "projectionVersion": 1})
	_, err := consumerfix.Record(ctx, inbox, "rr_projector", "", 0, env, proj)
	pe := rrPgError(t, err, "OB002")
	if !strings.Contains(pe.Message, "rr_projection receipts need a projection") {
		t.Fatalf("message %q, want the requires_projection refusal", pe.Message)
	}
	if r, err := consumerfix.Record(ctx, inbox, "rr_projector", "rr_timeline", 1, env, proj); err != nil || r.Outcome != "new" {
		t.Fatalf("rr_projection receipt with its projection: %+v %v", r, err)
	}

	// a kind without requires_projection: recorded without one
	env, sha, _ = consumerfix.EnvelopeAndReceipt(t, nil)
	led := rrReceipt(t, "rrLedgerConsumerReceipt", "appliedAt", "rr_ledger_consumer", env, sha, map[string]any{"position": 1})
	if r, err := consumerfix.Record(ctx, inbox, "rr_ledger_consumer", "", 0, env, led); err != nil || r.Outcome != "new" {
		t.Fatalf("rr_ledger receipt without projection: %+v %v", r, err)
	}

	// minimum: position 0 is below the registered minimum 1 (OB002, the rule's text)
	env, sha, _ = consumerfix.EnvelopeAndReceipt(t, nil)
	low := rrReceipt(t, "rrLedgerConsumerReceipt", "appliedAt", "rr_ledger_consumer", env, sha, map[string]any{"position": 0})
	_, err = consumerfix.Record(ctx, inbox, "rr_ledger_consumer", "", 0, env, low)
	pe = rrPgError(t, err, "OB002")
	if want := rrRuleProblem(t, admin, "rr_ledger", low); pe.Detail != want || !strings.Contains(want, `"position" 0 is below its minimum 1`) {
		t.Fatalf("detail %q, rule %q: want the minimum named", pe.Detail, want)
	}

	// broker_publication.sequence: minimum 0 (the attribute replacing the kind's name in the rule)
	env, sha, _ = consumerfix.EnvelopeAndReceipt(t, nil)
	neg := rrReceipt(t, "brokerPublicationReceipt", "publishedAt", "rr_broker", env, sha,
		map[string]any{"stream": "S", "sequence": -1, "duplicate": false})
	_, err = consumerfix.Record(ctx, inbox, "rr_broker", "", 0, env, neg)
	pe = rrPgError(t, err, "OB002")
	if !strings.Contains(pe.Detail, `"sequence" -1 is below its minimum 0`) {
		t.Fatalf("broker sequence -1: detail %q", pe.Detail)
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_receipts`); n != 2 {
		t.Fatalf("%d receipts stored, want the two accepted ones", n)
	}
}

// HP-1, HP-2, R-AK-9: the three batch outcome functions share one parse - each all-success
// batch calls outbox._outcome_items exactly once - an ack batch in internal/pgcall's layout is
// parsed in the fast form (no outbox._batch_items), and an all-success batch never runs the
// full rule (outbox._ack_item_problem, outbox._ack_problem, outbox._receipt_problem).
func TestOutcomeItemsParsedOncePerBatch(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	hpBacklog(t, b.Dsn, "rr-once", 60)
	disp := kernelfix.StatsSession(t, b.Dsn, "outbox_dispatcher")
	acks, retries, quarantines := hpClaim(t, b.Disp, 20), hpClaim(t, b.Disp, 20), hpClaim(t, b.Disp, 20)
	ref := "rr"
	run := map[string]func(tx pgx.Tx) error{
		"ack_deliveries": func(tx pgx.Tx) error {
			items := make([]pgcall.AckItem, len(acks))
			for i, c := range acks {
				items[i] = ackItem(t, c, true)
			}
			out, err := pgcall.AckDeliveries(ctx, tx, items)
			if err == nil {
				hpOutcomes(t, out, len(acks), "complete")
			}
			return err
		},
		"retry_deliveries": func(tx pgx.Tx) error {
			items := make([]pgcall.RetryItem, len(retries))
			for i, c := range retries {
				items[i] = pgcall.RetryItem{Fence: kernelfix.FenceOf(c), ErrorCode: "consumer_unavailable", ErrorRef: &ref}
			}
			out, err := pgcall.RetryDeliveries(ctx, tx, items)
			if err == nil {
				hpOutcomes(t, out, len(retries), "pending")
			}
			return err
		},
		"quarantine_deliveries": func(tx pgx.Tx) error {
			items := make([]pgcall.QuarantineItem, len(quarantines))
			for i, c := range quarantines {
				items[i] = pgcall.QuarantineItem{Fence: kernelfix.FenceOf(c), Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &ref}
			}
			out, err := pgcall.QuarantineDeliveries(ctx, tx, items)
			if err == nil {
				hpOutcomes(t, out, len(quarantines), "quarantined")
			}
			return err
		},
	}
	for _, name := range []string{"ack_deliveries", "retry_deliveries", "quarantine_deliveries"} {
		calls := kernelfix.CountCalls(t, disp, b.Admin, run[name], b.Disp)
		if calls["outbox."+name] != 1 || calls["outbox._outcome_items"] != 1 {
			t.Errorf("%s: %d calls of itself and %d of outbox._outcome_items, want 1 and 1 (calls: %v)",
				name, calls["outbox."+name], calls["outbox._outcome_items"], calls)
		}
		// acks in the layout internal/pgcall sends take the fast form (one json_to_recordset):
		// the generic parser is not called (HP-2)
		if name == "ack_deliveries" && calls["outbox._batch_items"] != 0 {
			t.Errorf("ack_deliveries: the generic parser outbox._batch_items ran %d times for a batch in the fast form", calls["outbox._batch_items"])
		}
		for _, rule := range []string{"outbox._ack_item_problem", "outbox._ack_problem", "outbox._receipt_problem"} {
			if calls[rule] != 0 {
				t.Errorf("%s: %s called %d times on the all-success path (HP-1)", name, rule, calls[rule])
			}
		}
	}
}
