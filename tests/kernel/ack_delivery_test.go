package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-AK-2, R-AK-3: a valid ack appends the success finish, sets acknowledged with the ack fields
// (the receipt quartet and the event digest) and clears the lease, in one transaction.
func TestAckDeliveryRecordsAck(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-1", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoreOps)
	doc := kernelfix.NewReceipt(t, c)
	doc.Receipt["projectionOutcome"] = "applied" // kind-specific (receipt_kind_members), in the digest
	doc.Seal(t)
	ack, rc := doc.JSON(t)
	res, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc)
	if err != nil || res != "complete" {
		t.Fatalf("ack: %q %v", res, err)
	}
	p := doc.K.Prefix
	var status, consumer, kind, typ, ref, alg, digest, evAlg, evSHA string
	var schema int
	var delivered *time.Time
	var owner, token *string
	if err := b.Admin.QueryRow(ctx, `SELECT status, ack_consumer_name, ack_receipt_kind, ack_receipt_type, ack_receipt_ref,
		ack_receipt_schema_version, ack_receipt_digest_algorithm_version, ack_receipt_digest,
		ack_event_envelope_digest_algorithm_version, ack_event_envelope_sha256, delivered_at, lease_owner, lease_token::text
		FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`, c.Destination, c.EventID).
		Scan(&status, &consumer, &kind, &typ, &ref, &schema, &alg, &digest, &evAlg, &evSHA, &delivered, &owner, &token); err != nil {
		t.Fatal(err)
	}
	if status != "acknowledged" || consumer != "operations_projector" || kind != "operations_projection" ||
		typ != "OperationsProjectionAppliedReceipt" || ref != doc.Receipt[p+"Ref"] || schema != 1 || alg != "jcs-sha256-v1" ||
		digest != doc.Receipt[p+"Digest"] || evAlg != "jcs-sha256-v1" || evSHA != c.EventEnvelopeSHA256 ||
		delivered == nil || owner != nil || token != nil {
		t.Fatalf("acknowledged row: %s %s %s %s %s %d %s %s %s %s %v %v %v", status, consumer, kind, typ, ref, schema, alg, digest, evAlg, evSHA, delivered, owner, token)
	}
	if o, d := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "acknowledged" || d != "none" {
		t.Fatalf("finish %s/%s", o, d)
	}
	// The same ack again: the attempt is finished - fencing, not a second finish.
	_, err = pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc)
	kernelfix.WantFencing(t, err)
	if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 1 {
		t.Fatalf("%d finishes", n)
	}
}

// dxOtherSHA is a well-formed digest that is not the event's.
const dxOtherSHA = "0000000000000000000000000000000000000000000000000000000000000000"

// R-AK-1, R-AK-1a, R-AK-2: every mismatch between the ack/receipt and the frozen member, the
// destination's receipt kind or the event raises OB002 with a DETAIL naming the field, and
// changes nothing: the delivery stays leased to the same attempt and can still be acked.
func TestAckDeliveryRejectsMismatches(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-1", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	ops := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	met := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	metKind := kernelfix.ReceiptKindByName(t, "metering_input_processor")
	opsKind := kernelfix.ReceiptKindByName(t, "operations_projection")

	type mutation struct {
		c      pgcall.ClaimedDelivery
		build  func(t *testing.T, c pgcall.ClaimedDelivery) (ack, receipt json.RawMessage)
		detail string // a fragment of the expected DETAIL
	}
	// sealed builds a receipt for c, lets pre edit it before the digest is computed (so the
	// digest is consistent with the edit) and post edit receipt/ack afterwards.
	sealed := func(pre func(d *kernelfix.ReceiptDoc), post func(d *kernelfix.ReceiptDoc)) func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
		return func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
			d := kernelfix.NewReceipt(t, c)
			if pre != nil {
				pre(d)
			}
			d.Seal(t)
			if post != nil {
				post(d)
			}
			return d.JSON(t)
		}
	}
	ofKind := func(k kernelfix.ReceiptKind) func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
		return func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
			return kernelfix.NewReceiptOfKind(t, c, k).Seal(t).JSON(t)
		}
	}
	raw := func(ack, receipt string) func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
		return func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
			a, r := kernelfix.ValidAck(t, c)
			if ack != "" {
				a = json.RawMessage(ack)
			}
			if receipt != "" {
				r = json.RawMessage(receipt)
			}
			return a, r
		}
	}
	op := opsKind.Prefix
	cases := map[string]mutation{
		"wrong consumer":         {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["consumerName"] = "metering_input_processor_consumer" }, nil), "consumerName"},
		"wrong destination":      {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["destination"] = kernelfix.DestMetering }, nil), "destination"},
		"wrong event id":         {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventId"] = testfix.NewUUID() }, nil), "eventId"},
		"event id not canonical": {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventId"] = strings.ToUpper(ops.EventID) }, nil), "eventId"},
		"wrong receipt kind for the destination (projection)":     {ops, ofKind(metKind), "kind"},
		"wrong receipt kind for the destination (non-projection)": {met, ofKind(opsKind), "kind"},
		"quartet kind only changed":                               {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.AppliedReceipt()["kind"] = "billing_settlement_catch_up" }), "kind"},
		"wrong schema version":                                    {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt[op+"SchemaVersion"] = 2 }, nil), "SchemaVersion"},
		"wrong schema version (non-projection)":                   {met, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt[metKind.Prefix+"SchemaVersion"] = 2 }, nil), "SchemaVersion"},
		"schema version as string":                                {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt[op+"SchemaVersion"] = "1" }, nil), "SchemaVersion"},
		"wrong receipt digest algorithm":                          {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt[op+"DigestAlgorithmVersion"] = "sha256" }, nil), "DigestAlgorithmVersion"},
		"wrong envelope sha":                                      {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventEnvelopeSha256"] = dxOtherSHA }, nil), "eventEnvelopeSha256"},
		"wrong envelope sha (non-projection)":                     {met, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventEnvelopeSha256"] = dxOtherSHA }, nil), "eventEnvelopeSha256"},
		"wrong envelope digest algorithm":                         {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventEnvelopeDigestAlgorithmVersion"] = "jcs-sha256-v2" }, nil), "eventEnvelopeDigestAlgorithmVersion"},
		"missing quartet Ref":                                     {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.AppliedReceipt(), op+"Ref") }), "missing receipt quartet field " + op + "Ref"},
		"missing quartet SchemaVersion":                           {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.AppliedReceipt(), op+"SchemaVersion") }), "SchemaVersion"},
		"missing quartet DigestAlgorithmVersion":                  {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.AppliedReceipt(), op+"DigestAlgorithmVersion") }), "DigestAlgorithmVersion"},
		"missing quartet Digest":                                  {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.AppliedReceipt(), op+"Digest") }), "missing receipt quartet field " + op + "Digest"},
		"missing quartet field (non-projection)":                  {met, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.AppliedReceipt(), metKind.Prefix+"Digest") }), "Digest"},
		"missing kind":                                            {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.AppliedReceipt(), "kind") }), "kind"},
		"empty receipt ref":                                       {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt[op+"Ref"] = "" }, nil), "Ref"},
		"digest not hex":                                          {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.AppliedReceipt()[op+"Digest"] = "ABC"; d.Receipt[op+"Digest"] = "ABC" }), "Digest"},
		"unknown ack key":                                         {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Ack["receipt"] = "x" }), "unknown key receipt"},
		"unknown appliedReceipt key":                              {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.AppliedReceipt()["projectionName"] = "operations_timeline" }), "unknown key projectionName"},
		"missing ack key":                                         {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.Ack, "eventEnvelopeSha256") }), "missing key eventEnvelopeSha256"},
		"receipt body whose digest differs": {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionOutcome"] = "applied" },
			func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionOutcome"] = "applied twice" }), "receipt digest"},
		"receipt body whose digest differs (non-projection)": {met, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["consumerOutcome"] = "eligibility" },
			func(d *kernelfix.ReceiptDoc) { d.Receipt["consumerOutcome"] = "provider_cost" }), "receipt digest"},
		"unknown receipt member (closed, R-AK-1a)":      {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["note"] = "applied" }, nil), `unknown member "note"`},
		"kind member of the wrong type (R-AK-1a)":       {met, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["consumerOutcome"] = 7 }, nil), `member "consumerOutcome" must be a JSON string`},
		"receipt digest field differs from quartet":     {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Receipt[op+"Digest"] = dxOtherSHA }), op + "Digest"},
		"receipt ref differs from quartet":              {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Receipt[op+"Ref"] = "rcpt-other" }), op + "Ref"},
		"receipt body names another consumer":           {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Receipt["consumerName"] = "someone_else" }), "consumerName"},
		"projection name differs from frozen target":    {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionName"] = "operations_timeline_shadow" }, nil), "projectionName"},
		"projection version differs from frozen target": {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionVersion"] = 2 }, nil), "projectionVersion"},
		"receipt claims another projection about itself": {ops, sealed(func(d *kernelfix.ReceiptDoc) {
			d.Receipt["projectionName"] = "operations_timeline_v2"
			d.Receipt["projectionVersion"] = 2
		}, nil), "frozen projection target"},
		"projection fields missing": {ops, sealed(func(d *kernelfix.ReceiptDoc) {
			delete(d.Receipt, "projectionName")
			delete(d.Receipt, "projectionVersion")
		}, nil), "projectionName"},
		"event type differs":            {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventType"] = "wallet.reserved@2.0" }, nil), "eventType"},
		"event schema differs":          {ops, sealed(func(d *kernelfix.ReceiptDoc) { d.Receipt["eventSchemaVersion"] = "2.1" }, nil), "eventSchemaVersion"},
		"time not 6 fractional digits":  {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Receipt["appliedAt"] = "2026-01-02T03:04:05Z" }), "appliedAt"},
		"time missing":                  {met, sealed(nil, func(d *kernelfix.ReceiptDoc) { delete(d.Receipt, "committedAt") }), "committedAt"},
		"receipt not canonicalizable":   {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionOutcome"] = "a\u0000b" }), "canonicalizable"},
		"integer member not an integer": {ops, sealed(nil, func(d *kernelfix.ReceiptDoc) { d.Receipt["projectionVersion"] = 1.5 }), "projectionVersion"},
		"ack not an object":             {ops, raw(`[]`, ""), "JSON object"},
		"receipt not an object":         {ops, raw("", `null`), "receipt must be a JSON object"},
		"duplicate key in ack": {ops, func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
			a, r := kernelfix.ValidAck(t, c)
			return json.RawMessage(`{"consumerName":"operations_projector",` + string(a[1:])), r
		}, "duplicate key consumerName"},
		"duplicate key in receipt": {ops, func(t *testing.T, c pgcall.ClaimedDelivery) (json.RawMessage, json.RawMessage) {
			a, r := kernelfix.ValidAck(t, c)
			return a, json.RawMessage(`{"eventType":"run.created@2.0",` + string(r[1:]))
		}, "duplicate key eventType"},
	}

	snapshot := func() (string, string, int) {
		return kernelfix.Row(t, b.Admin, ops.Destination, ops.EventID), kernelfix.Row(t, b.Admin, met.Destination, met.EventID),
			kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes`)
	}
	opsBefore, metBefore, finBefore := snapshot()
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			ack, rc := m.build(t, m.c)
			_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(m.c), ack, rc)
			if name == "receipt not canonicalizable" {
				// \u0000 cannot be read by PostgreSQL's json operators at all: the call is refused
				// as a whole with OB201 (D-2), and nothing changes.
				kernelfix.WantState(t, err, "OB201")
				if a, m2, f := snapshot(); a != opsBefore || m2 != metBefore || f != finBefore {
					t.Fatalf("rejected ack changed state")
				}
				return
			}
			kernelfix.WantState(t, err, "OB002")
			if !errors.Is(err, pgcall.ErrAckRejected) {
				t.Fatalf("not ErrAckRejected: %v", err)
			}
			var pe *pgcall.Error
			if !errors.As(err, &pe) || !strings.Contains(pe.PgErr.Detail, m.detail) {
				t.Fatalf("DETAIL does not name %q: %v", m.detail, err)
			}
			opsAfter, metAfter, finAfter := snapshot()
			if opsAfter != opsBefore || metAfter != metBefore || finAfter != finBefore {
				t.Fatalf("rejected ack changed state")
			}
		})
	}
	// Still leased to the same attempt: the correct ack goes through.
	if res := kernelfix.Ack(t, b.Disp, ops); res != "complete" {
		t.Fatalf("ops ack %s", res)
	}
	if res := kernelfix.Ack(t, b.Disp, met); res != "complete" {
		t.Fatalf("metering ack %s", res)
	}
}
