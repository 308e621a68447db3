package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// The published JSON Schemas (contracts/schemas) and the kernel's ack rule (outbox._ack_problem,
// THE rule of ack_delivery/ack_deliveries) agree on every document shape (issue 12 defect 1;
// R-AK-1, R-AK-1a, R-AK-2, D-2). For each constraint of each receipt schema and of
// ActiveConsumerAck@1 (type, const, pattern, minLength, maxLength, format, minimum, maximum,
// required, additionalProperties), a document is derived from a valid one for a real claimed
// delivery by breaking exactly that constraint (or by standing exactly on its boundary), its
// digest and ack recomputed so it still matches the delivery wherever the schema allows; then
// the schema (a draft 2020-12 validator with format assertion, as a consumer in another language
// would use) and the kernel must give the same verdict: valid by schema <=> accepted by the
// kernel, and refused by the kernel <=> invalid by schema. Both kernel paths are asked: the slow
// path (the database canonicalizes the digest candidate) and the hot path (the Go candidate).
//
// What JSON Schema cannot say, and the docs state in words (docs/contract.md): an integer must
// be written without fraction or exponent (1.0 is "integer" to JSON Schema, refused by the
// kernel), and the values bound to the delivery (destination, consumerName, eventId,
// eventEnvelopeSha256, the receipt type/schema, projection target, eventType) must equal the
// delivery's, which the schema can only constrain in shape.
func TestSchemaKernelAgreement(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	for _, et := range []string{kernelfix.RunCreated, kernelfix.Metering, kernelfix.Closed, kernelfix.Settlement} {
		kernelfix.Append(t, b.Admin, et, "agg-schema", 1)
	}
	schemas := kernelfix.CompileContractSchemas(t)
	ackSchema := schemas["ActiveConsumerAck@1"]

	total, accepted := 0, 0
	for _, dest := range []string{kernelfix.DestCoreOps, kernelfix.DestMetering, kernelfix.DestCoord, kernelfix.DestCatchUp} {
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, dest)
		k := kernelfix.ReceiptKindByType(t, c.ExpectedReceiptType)
		rs := schemas[c.ExpectedReceiptType+"@1"]
		raw := schemaDoc(t, c.ExpectedReceiptType+"@1")
		base := func() *kernelfix.ReceiptDoc {
			d := kernelfix.NewReceipt(t, c)
			// every registered optional member present, so each can be broken
			if k.Kind == "operations_projection" {
				d.Receipt["projectionOutcome"] = "applied"
			} else {
				d.Receipt["consumerOutcome"] = "applied"
			}
			return d
		}
		verdict := func(name string, d *kernelfix.ReceiptDoc) {
			t.Helper()
			ack, rc := kernelfix.MustJSON(t, d.Ack), kernelfix.MustJSON(t, d.Receipt)
			schemaErr := validateAll(rs, rc, ackSchema, ack)
			for _, hot := range []bool{false, true} {
				var cand *string
				if hot {
					if _, cb, err := testdb.Receipts(t).DigestCandidate(rc); err == nil {
						s := string(cb)
						cand = &s
					}
				}
				problem := kernelAckProblem(t, b, c, ack, rc, cand)
				if (schemaErr == nil) != (problem == "") {
					t.Errorf("%s / %s (hot path %v): schema says %v, kernel says %q", dest, name, hot, schemaErr, problem)
				}
			}
			total++
			if schemaErr == nil {
				accepted++
			}
		}
		verdict("valid document", base().Seal(t))

		props := raw["properties"].(map[string]any)
		required := map[string]bool{}
		for _, r := range raw["required"].([]any) {
			required[r.(string)] = true
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, member := range names {
			ps := props[member].(map[string]any)
			for _, m := range mutationsOf(member, ps, required[member], k) {
				d := base()
				if member == k.Prefix+"Digest" {
					// the digest itself: sealed first, then broken in both documents
					d.Seal(t)
					for _, doc := range []map[string]any{d.Receipt, d.AppliedReceipt()} {
						if m.remove {
							delete(doc, member)
						} else {
							doc[member] = m.value
						}
					}
				} else {
					if m.remove {
						delete(d.Receipt, member)
					} else {
						d.Receipt[member] = m.value
					}
					sealLoose(d)
				}
				verdict("receipt."+member+" "+m.name, d)
			}
		}
		// The kernel's own limits, listed from outbox._ack_problem rather than derived from the
		// schema, so a limit the schema forgot is caught (the 500-character ref was).
		outcome := "consumerOutcome"
		if k.Kind == "operations_projection" {
			outcome = "projectionOutcome"
		}
		for _, m := range []struct {
			name, member string
			value        any
		}{
			{"ref of 500 characters", k.Prefix + "Ref", strings.Repeat("é", 500)},
			{"ref of 501 characters", k.Prefix + "Ref", strings.Repeat("é", 501)},
			{"ref empty", k.Prefix + "Ref", ""},
			{"ref with U+0000", k.Prefix + "Ref", "a\x00"},
			{"ref not a string", k.Prefix + "Ref", 7},
			{"time on an impossible date", k.TimeField, "2026-02-30T10:00:00.000000Z"},
			{"time without fraction", k.TimeField, "2026-01-01T10:00:00Z"},
			{"time not UTC", k.TimeField, "2026-01-01T10:00:00.000000+01:00"},
			{"eventId upper-case", "eventId", strings.ToUpper(c.EventID)},
			{"digest algorithm other", k.Prefix + "DigestAlgorithmVersion", "sha256"},
			{"schema version 2", k.Prefix + "SchemaVersion", 2},
			{"outcome member not a string", outcome, 1},
			{"unsafe integer", "projectionVersion", json.Number("9007199254740992")},
		} {
			d := base()
			d.Receipt[m.member] = m.value
			sealLoose(d)
			verdict("kernel limit: "+m.name, d)
		}

		// additionalProperties: false
		d := base()
		d.Receipt["extraMember"] = "x"
		verdict("receipt with an unregistered member", d.Seal(t))

		// ActiveConsumerAck@1: the ack-only constraints (the quartet is shared with the
		// receipt and broken above through the receipt, which Seal copies into the ack).
		for name, edit := range map[string]func(a map[string]any){
			"ack.eventId upper-case":           func(a map[string]any) { a["eventId"] = strings.ToUpper(c.EventID) },
			"ack.eventEnvelopeSha256 upper":    func(a map[string]any) { a["eventEnvelopeSha256"] = strings.ToUpper(c.EventEnvelopeSHA256) },
			"ack.destination not a literal":    func(a map[string]any) { a["destination"] = "Core Operations" },
			"ack.consumerName not a string":    func(a map[string]any) { a["consumerName"] = 1 },
			"ack.algorithm other":              func(a map[string]any) { a["eventEnvelopeDigestAlgorithmVersion"] = "jcs-sha256-v2" },
			"ack with an extra member":         func(a map[string]any) { a["note"] = "x" },
			"ack without appliedReceipt":       func(a map[string]any) { delete(a, "appliedReceipt") },
			"ack.appliedReceipt other kind":    func(a map[string]any) { a["appliedReceipt"].(map[string]any)["kind"] = "broker_publication" },
			"ack.appliedReceipt extra member":  func(a map[string]any) { a["appliedReceipt"].(map[string]any)["note"] = "x" },
			"ack.appliedReceipt without kind":  func(a map[string]any) { delete(a["appliedReceipt"].(map[string]any), "kind") },
			"ack.appliedReceipt not an object": func(a map[string]any) { a["appliedReceipt"] = "receipt" },
		} {
			d := base().Seal(t)
			edit(d.Ack)
			verdict(name, d)
		}
	}
	t.Logf("%d documents, %d valid by schema and accepted by the kernel, %d refused by both", total, accepted, total-accepted)
	if accepted < 8 || total-accepted < 40 {
		t.Fatalf("the cases do not exercise both sides: %d accepted of %d", accepted, total)
	}

	// The boundary through the public function: a 500-character ref is acknowledged, a
	// 501-character one is refused with OB002 (and the delivery stays leased).
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-schema-2", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-schema-3", 1)
	for _, n := range []int{501, 500} {
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
		d := kernelfix.NewReceipt(t, c)
		d.Receipt[d.K.Prefix+"Ref"] = strings.Repeat("é", n)
		d.Seal(t)
		ack, rc := d.JSON(t)
		_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc, "")
		if n == 500 && err != nil {
			t.Fatalf("500-character ref refused: %v", err)
		}
		if n == 501 && pgcall.SQLState(err) != "OB002" {
			t.Fatalf("501-character ref: %v, want OB002", err)
		}
	}
}

type schemaMutation struct {
	name   string
	value  any
	remove bool
}

// mutationsOf returns, for one member of a receipt schema, a document edit per constraint: the
// member removed; a value of another JSON type; each keyword broken (and, where a value on the
// boundary is not bound to the delivery, the boundary itself).
func mutationsOf(member string, ps map[string]any, required bool, k kernelfix.ReceiptKind) []schemaMutation {
	out := []schemaMutation{{name: "removed", remove: true}}
	if required {
		out[0].name = "removed (required)"
	}
	bound := member != k.Prefix+"Ref" && member != "consumerOutcome" && member != "projectionOutcome" &&
		!(k.Kind != "operations_projection" && (member == "projectionName" || member == "projectionVersion"))
	if c, ok := ps["const"]; ok {
		switch c := c.(type) {
		case string:
			out = append(out, schemaMutation{name: "other const", value: c + "x"}, schemaMutation{name: "wrong type", value: 1})
		default:
			out = append(out, schemaMutation{name: "other const", value: 2}, schemaMutation{name: "const as string", value: "1"})
		}
	}
	switch ps["type"] {
	case "string":
		out = append(out, schemaMutation{name: "wrong type", value: true})
		if n, ok := ps["minLength"].(float64); ok {
			out = append(out, schemaMutation{name: "below minLength", value: strings.Repeat("r", int(n)-1)})
		}
		if n, ok := ps["maxLength"].(float64); ok {
			out = append(out, schemaMutation{name: "above maxLength", value: strings.Repeat("é", int(n)+1)})
			if !bound {
				out = append(out, schemaMutation{name: "at maxLength", value: strings.Repeat("é", int(n))})
			}
		}
		if p, ok := ps["pattern"].(string); ok {
			switch {
			case strings.Contains(p, `\x00`):
				out = append(out, schemaMutation{name: "with U+0000", value: "a\x00b"})
			case strings.Contains(p, "0-9a-f]{64}"):
				out = append(out, schemaMutation{name: "upper-case hex", value: strings.Repeat("A", 64)})
			case strings.Contains(p, "0-9a-f]{8}"):
				out = append(out, schemaMutation{name: "not a lower-case uuid", value: "6F1C0000-0000-4000-8000-000000000000"})
			case strings.Contains(p, `\.[0-9]{6}Z`):
				out = append(out,
					schemaMutation{name: "three fractional digits", value: "2026-01-01T00:00:00.000Z"},
					schemaMutation{name: "offset instead of Z", value: "2026-01-01T00:00:00.000000+00:00"})
			default:
				out = append(out, schemaMutation{name: "not a literal", value: "Not A Literal"})
			}
		}
		if ps["format"] == "date-time" {
			out = append(out, schemaMutation{name: "impossible date", value: "2026-02-30T10:00:00.000000Z"},
				schemaMutation{name: "another valid time", value: "2025-12-31T23:59:59.999999Z"})
		}
		if !bound && ps["pattern"] == nil && ps["minLength"] == nil {
			out = append(out, schemaMutation{name: "any string", value: "Any string, é ✓"})
		}
	case "integer":
		out = append(out, schemaMutation{name: "wrong type", value: "1"})
		if n, ok := ps["minimum"].(float64); ok {
			out = append(out, schemaMutation{name: "below minimum", value: json.Number(fmt.Sprintf("%.0f", n-1))})
			if !bound {
				out = append(out, schemaMutation{name: "at minimum", value: json.Number(fmt.Sprintf("%.0f", n))})
			}
		}
		if n, ok := ps["maximum"].(float64); ok {
			out = append(out, schemaMutation{name: "above maximum", value: json.Number(fmt.Sprintf("%.0f", n+1))})
			if !bound {
				out = append(out, schemaMutation{name: "at maximum", value: json.Number(fmt.Sprintf("%.0f", n))})
			}
		}
	case "boolean":
		out = append(out, schemaMutation{name: "wrong type", value: "true"})
	}
	return out
}

func kernelAckProblem(t *testing.T, b kernelfix.Bundle, c pgcall.ClaimedDelivery, ack, rc []byte, cand *string) string {
	t.Helper()
	var problem *string
	err := b.Admin.QueryRow(context.Background(), `
		SELECT outbox._ack_problem(d, e, rk, $3::json, $4::json, $5::text)
		  FROM outbox.outbox_deliveries AS d
		  JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
		  JOIN outbox.delivery_destinations AS dd ON dd.destination = d.destination
		  JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
		 WHERE d.destination = $1 AND d.event_id = $2::uuid`, c.Destination, c.EventID, string(ack), string(rc), cand).Scan(&problem)
	if err != nil {
		// A document PostgreSQL cannot even take as json is a refusal too (OB002 through the
		// public functions); say so rather than fail.
		return "not json: " + err.Error()
	}
	if problem == nil {
		return ""
	}
	return *problem
}

func schemaDoc(t *testing.T, name string) map[string]any { return testfix.LoadSchema(t, name) }

// validateAll validates receipt and ack; nil when both are valid.
func validateAll(rs *jsonschema.Schema, rc []byte, as *jsonschema.Schema, ack []byte) error {
	for _, p := range []struct {
		s   *jsonschema.Schema
		doc []byte
	}{{rs, rc}, {as, ack}} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(p.doc))
		if err != nil {
			return err
		}
		if err := p.s.Validate(v); err != nil {
			return err
		}
	}
	return nil
}

// sealLoose is kernelfix.ReceiptDoc.Seal for documents the Go canonicalizer may refuse (a U+0000, an
// unsafe integer): the digest is then a well-formed stand-in, and the kernel must refuse the
// document for its shape anyway.
func sealLoose(d *kernelfix.ReceiptDoc) {
	p := d.K.Prefix
	cand := map[string]any{}
	for k, v := range d.Receipt {
		if k != p+"Ref" && k != p+"Digest" && k != d.K.TimeField {
			cand[k] = v
		}
	}
	digest, err := canon.Digest(cand)
	if err != nil {
		digest = strings.Repeat("0", 64)
	}
	d.Receipt[p+"Digest"] = digest
	d.Ack = map[string]any{
		"destination": d.Receipt["destination"], "consumerName": d.Receipt["consumerName"], "eventId": d.Receipt["eventId"],
		"eventEnvelopeDigestAlgorithmVersion": d.Receipt["eventEnvelopeDigestAlgorithmVersion"],
		"eventEnvelopeSha256":                 d.Receipt["eventEnvelopeSha256"],
		"appliedReceipt": map[string]any{
			"kind": d.K.Kind, p + "Ref": d.Receipt[p+"Ref"], p + "SchemaVersion": d.Receipt[p+"SchemaVersion"],
			p + "DigestAlgorithmVersion": d.Receipt[p+"DigestAlgorithmVersion"], p + "Digest": digest,
		},
	}
	for _, f := range []string{p + "Ref", p + "SchemaVersion", p + "DigestAlgorithmVersion"} {
		if _, ok := d.Receipt[f]; !ok {
			delete(d.AppliedReceipt(), f)
		}
	}
}

// Issue 12 defect 3 (R-AK-2, D-2): a consumer's receipt with a duplicate key, a float or an
// unsafe integer is refused by ack_delivery with OB002 (its DETAIL naming the defect), not
// OB201 — what docs/errors.md and docs/transport-http.md say — and the delivery stays leased.
func TestAckDeliveryNonCanonicalReceiptIsOB002(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-dup", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	d := kernelfix.NewReceipt(t, c).Seal(t)
	ack, rc := d.JSON(t)
	for name, receiptDoc := range map[string]string{
		"duplicate key":  `{"consumerName":"x",` + string(rc[1:]),
		"float":          strings.Replace(string(rc), `"committedAt"`, `"consumerOutcome":1.5,"committedAt"`, 1),
		"unsafe integer": strings.Replace(string(rc), `"committedAt"`, `"projectionVersion":9007199254740993,"committedAt"`, 1),
	} {
		for _, cand := range []string{"", "x"} { // slow path, and a hot-path candidate that is not the receipt's
			_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, json.RawMessage(receiptDoc), cand)
			if pgcall.SQLState(err) != "OB002" {
				t.Errorf("%s (candidate %q): %v, want OB002", name, cand, err)
			}
		}
	}
	if res, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc, ""); err != nil || res != "complete" {
		t.Fatalf("the delivery must still be ackable: %q %v", res, err)
	}
}
