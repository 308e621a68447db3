package kernel

// The kernel seeds no domain (SPEC D-1, migration 041): a kernel-only install has no
// destination, broker_publication as its only receipt kind and no refinement; a release
// registers its receipt kinds (outbox.register_receipt_kind) and envelope refinements
// (outbox.register_envelope_refinement) as outbox_registrar, insert-or-compare; registered
// bounds are enforced on every receipt path; one kernel-wide default retry policy applies to
// every destination without a row of its own; `make migrate-reference` (reference.Install)
// installs the reference release and a second run changes nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
)

// keSnapshot is the registry a registration may change, as text (compared before/after).
func keSnapshot(t *testing.T, db pgcall.DBTX) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT concat_ws(' | ',
	        (SELECT string_agg(concat_ws(',', receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection), ';' ORDER BY receipt_kind) FROM outbox.receipt_kinds),
	        (SELECT string_agg(concat_ws(',', receipt_kind, member, json_type, required, minimum, max_length), ';' ORDER BY receipt_kind, member) FROM outbox.receipt_kind_members),
	        (SELECT string_agg(concat_ws(',', event_type, event_schema_version, required_field), ';' ORDER BY 1) FROM outbox.envelope_refinements),
	        (SELECT string_agg(destination, ';' ORDER BY destination) FROM outbox.delivery_destinations),
	        (SELECT count(*) FROM outbox.outbox_retry_policies), (SELECT count(*) FROM outbox.outbox_retry_policy_history))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// keCounts is the row count of every table the reference installer writes.
func keCounts(t *testing.T, db pgcall.DBTX) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT concat_ws(',',
	        (SELECT count(*) FROM outbox.receipt_kinds), (SELECT count(*) FROM outbox.receipt_kind_members),
	        (SELECT count(*) FROM outbox.delivery_destinations), (SELECT count(*) FROM outbox.envelope_refinements),
	        (SELECT count(*) FROM outbox.outbox_retry_policies), (SELECT count(*) FROM outbox.outbox_retry_policy_history),
	        (SELECT count(*) FROM outbox.projection_versions), (SELECT count(*) FROM intake.observation_schemas),
	        (SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'ref%'),
	        (SELECT count(*) FROM pg_class WHERE relnamespace::regnamespace::text LIKE 'ref%'),
	        (SELECT count(*) FROM pg_proc WHERE pronamespace::regnamespace::text LIKE 'ref%'))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// D-1: `make migrate` alone installs no domain: no destination, broker_publication the only
// receipt kind (with its members), no refinement, no projection version, no observation schema,
// no reference table or function; the kernel-wide default retry policy is there.
func TestKernelOnlyInstallSeedsNoDomain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Conn(t, testdb.KernelURL(t), "")
	var dests, refinements, versions, schemas, refObjects int
	var kinds, members, policy string
	if err := admin.QueryRow(ctx, `SELECT
	        (SELECT count(*) FROM outbox.delivery_destinations),
	        (SELECT count(*) FROM outbox.envelope_refinements),
	        (SELECT count(*) FROM outbox.projection_versions),
	        (SELECT count(*) FROM intake.observation_schemas),
	        (SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'ref%')
	          + (SELECT count(*) FROM pg_class WHERE relname LIKE 'ref\_%' AND relnamespace = 'mailbox'::regnamespace)
	          + (SELECT count(*) FROM pg_proc WHERE proname = 'apply_reference_effect'),
	        (SELECT string_agg(receipt_kind, ',' ORDER BY receipt_kind) FROM outbox.receipt_kinds),
	        (SELECT string_agg(member || ':' || json_type, ',' ORDER BY member) FROM outbox.receipt_kind_members),
	        (SELECT concat_ws(',', destination, base_delay, multiplier, max_delay, jitter, max_attempts) FROM outbox.outbox_retry_policy_default)`).
		Scan(&dests, &refinements, &versions, &schemas, &refObjects, &kinds, &members, &policy); err != nil {
		t.Fatal(err)
	}
	if dests != 0 || refinements != 0 || versions != 0 || schemas != 0 || refObjects != 0 {
		t.Fatalf("kernel-only install: %d destinations, %d refinements, %d projection versions, %d observation schemas, %d reference objects; want none",
			dests, refinements, versions, schemas, refObjects)
	}
	if kinds != "broker_publication" || members != "duplicate:boolean,sequence:integer,stream:string" {
		t.Fatalf("receipt kinds %q (members %q), want broker_publication only", kinds, members)
	}
	if policy != "*,00:00:01,2,00:05:00,0.2,20" {
		t.Fatalf("default retry policy %q, want base 1 s, x2, cap 5 min, jitter 0.2, 20 attempts", policy)
	}
}

// §13, R-AK-1a: register_receipt_kind is insert-or-compare as outbox_registrar; the same
// definition again (members in any order) is a no-op; another definition under the kind and
// every malformed form are OB101 and change nothing; a role other than the registrar may not.
func TestRegisterReceiptKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	call := func(kind, typ, prefix, timeField string, version int, members string, requiresProjection bool) error {
		_, err := reg.Exec(ctx, `SELECT outbox.register_receipt_kind($1, $2, $3, $4, $5, $6::json, $7)`,
			kind, typ, prefix, timeField, version, members, requiresProjection)
		return err
	}
	const members = `{"note": {"type": "string", "required": true, "maxLength": 5},
	                  "position": {"type": "integer", "required": false, "minimum": 1},
	                  "flag": {"type": "boolean", "required": false}}`
	if err := call("kx_ledger", "KxLedgerReceipt", "kxLedgerReceipt", "committedAt", 1, members, false); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := admin.QueryRow(ctx, `SELECT string_agg(concat_ws(':', member, json_type, required, minimum, max_length), ',' ORDER BY member)
	        FROM outbox.receipt_kind_members WHERE receipt_kind = 'kx_ledger'`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "flag:boolean:f,note:string:t:5,position:integer:f:1" {
		t.Fatalf("registered members %q", got)
	}
	before := keSnapshot(t, admin)
	// the same definition, members in another order: a no-op
	if err := call("kx_ledger", "KxLedgerReceipt", "kxLedgerReceipt", "committedAt", 1,
		`{"position": {"minimum": 1, "required": false, "type": "integer"}, "flag": {"type": "boolean", "required": false},
		  "note": {"maxLength": 5, "type": "string", "required": true}}`, false); err != nil {
		t.Fatalf("same definition again: %v", err)
	}
	if after := keSnapshot(t, admin); after != before {
		t.Fatalf("a no-op registration changed the registry:\n%s\n%s", before, after)
	}
	// the broker transport's own kind, as the kernel ships it: a no-op too
	if err := call("broker_publication", "BrokerPublicationReceipt", "brokerPublicationReceipt", "publishedAt", 1,
		`{"stream": {"type": "string", "required": true}, "sequence": {"type": "integer", "required": true, "minimum": 0},
		  "duplicate": {"type": "boolean", "required": true}}`, false); err != nil {
		t.Fatalf("broker_publication as shipped: %v", err)
	}

	type bad struct {
		name, kind, typ, prefix, timeField string
		version                            int
		members                            string
		requiresProjection                 bool
		detail                             string
	}
	ok := func(b bad) bad {
		if b.kind == "" {
			b.kind = "kx_other"
		}
		if b.typ == "" {
			b.typ = "KxOtherReceipt"
		}
		if b.prefix == "" {
			b.prefix = "kxOtherReceipt"
		}
		if b.timeField == "" {
			b.timeField = "appliedAt"
		}
		if b.version == 0 {
			b.version = 1
		}
		if b.members == "" {
			b.members = `{}`
		}
		return b
	}
	for _, b := range []bad{
		// conflicts with what is registered
		{name: "another member list", kind: "kx_ledger", typ: "KxLedgerReceipt", prefix: "kxLedgerReceipt", timeField: "committedAt",
			members: `{"note": {"type": "string", "required": true}}`, detail: "receipt kind kx_ledger is KxLedgerReceipt@1"},
		{name: "another bound", kind: "kx_ledger", typ: "KxLedgerReceipt", prefix: "kxLedgerReceipt", timeField: "committedAt",
			members: strings.Replace(members, `"maxLength": 5`, `"maxLength": 6`, 1), detail: "receipt kind kx_ledger is KxLedgerReceipt@1"},
		{name: "another schema version", kind: "kx_ledger", typ: "KxLedgerReceipt", prefix: "kxLedgerReceipt", timeField: "committedAt",
			version: 2, members: members, detail: "receipt kind kx_ledger is KxLedgerReceipt@1"},
		{name: "requires_projection changed", kind: "kx_ledger", typ: "KxLedgerReceipt", prefix: "kxLedgerReceipt", timeField: "committedAt",
			members: members, requiresProjection: true, detail: "receipt kind kx_ledger is KxLedgerReceipt@1"},
		{name: "receipt type of another kind", typ: "KxLedgerReceipt", detail: "used by receipt kind kx_ledger"},
		{name: "field prefix of another kind", prefix: "kxLedgerReceipt", detail: "used by receipt kind kx_ledger"},
		// malformed
		{name: "unknown type", members: `{"a": {"type": "number", "required": true}}`, detail: `type must be "string", "integer" or "boolean"`},
		{name: "maxLength on an integer", members: `{"a": {"type": "integer", "required": true, "maxLength": 3}}`, detail: "maxLength is a bound of string members only"},
		{name: "minimum on a string", members: `{"a": {"type": "string", "required": true, "minimum": 3}}`, detail: "minimum is a bound of integer members only"},
		{name: "minimum not an integer", members: `{"a": {"type": "integer", "required": true, "minimum": 1.5}}`, detail: "minimum must be an integer"},
		{name: "negative maxLength", members: `{"a": {"type": "string", "required": true, "maxLength": -1}}`, detail: "maxLength must be an integer from 0"},
		{name: "required missing", members: `{"a": {"type": "string"}}`, detail: "required must be true or false"},
		{name: "unknown key", members: `{"a": {"type": "string", "required": true, "pattern": "x"}}`, detail: "only type, required, minimum and maxLength"},
		{name: "member named like a common member", members: `{"eventId": {"type": "string", "required": true}}`, detail: "named like a common receipt member"},
		{name: "member named like the prefix's Ref", members: `{"kxOtherReceiptRef": {"type": "string", "required": true}}`, detail: "named like a common receipt member"},
		{name: "member named like the time field", members: `{"appliedAt": {"type": "string", "required": true}}`, detail: "named like a common receipt member or the time field"},
		{name: "member name out of form", members: `{"Bad-Name": {"type": "string", "required": true}}`, detail: "the name must match"},
		{name: "member named twice", members: `{"a": {"type": "string", "required": true}, "a": {"type": "string", "required": true}}`, detail: "names a member twice"},
		{name: "members not an object", members: `[]`, detail: "members must be a JSON object"},
		{name: "kind out of form", kind: "Kx Other", detail: "receipt_kind"},
		{name: "type out of form", typ: "kx-other", detail: "receipt_type"},
		{name: "prefix out of form", prefix: "KxOther", detail: "field_prefix"},
		{name: "time field out of form", timeField: "applied_at", detail: "time_field"},
		{name: "time field a common member", timeField: "destination", detail: "time_field destination is a common receipt member"},
		{name: "schema version 0", version: -1, detail: "receipt_schema_version"},
	} {
		b = ok(b)
		err := call(b.kind, b.typ, b.prefix, b.timeField, b.version, b.members, b.requiresProjection)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "OB101" || !strings.Contains(pe.Detail, b.detail) {
			t.Errorf("%s: %v (detail %q), want OB101 naming %q", b.name, err, detailOf(err), b.detail)
		}
		if after := keSnapshot(t, admin); after != before {
			t.Fatalf("%s: a refused registration changed the registry", b.name)
		}
	}
	// only the registrar
	_, err := testdb.Conn(t, dsn, "outbox_dispatcher").Exec(ctx,
		`SELECT outbox.register_receipt_kind('kx_x', 'KxX', 'kxX', 'at', 1, '{}'::json)`)
	kernelfix.WantState(t, err, "42501")
}

func detailOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return ""
}

// §13, R-AP-7: register_envelope_refinement is insert-or-compare; the same list in any order is
// a no-op; another list for the pair, an empty list, an unknown or repeated member, a literal
// out of form are OB101 and change nothing; a registered refinement is enforced by append (OB105).
func TestRegisterEnvelopeRefinement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	if err := pgcall.RegisterEnvelopeRefinement(ctx, reg, "kx.happened@1", "1", []string{"operationId", "correlationId"}); err != nil {
		t.Fatal(err)
	}
	before := keSnapshot(t, admin)
	if !strings.Contains(before, "kx.happened@1,1,correlationId;kx.happened@1,1,operationId") {
		t.Fatalf("registry after registration: %s", before)
	}
	if err := pgcall.RegisterEnvelopeRefinement(ctx, reg, "kx.happened@1", "1", []string{"correlationId", "operationId"}); err != nil {
		t.Fatalf("same list again: %v", err)
	}
	for name, c := range map[string]struct {
		typ, version string
		members      []string
	}{
		"another list":        {"kx.happened@1", "1", []string{"correlationId"}},
		"a longer list":       {"kx.happened@1", "1", []string{"correlationId", "operationId", "causationId"}},
		"empty list":          {"kx.other@1", "1", []string{}},
		"unknown member":      {"kx.other@1", "1", []string{"tenantId"}},
		"repeated member":     {"kx.other@1", "1", []string{"operationId", "operationId"}},
		"event type of form":  {"Kx Other", "1", []string{"operationId"}},
		"schema version form": {"kx.other@1", "", []string{"operationId"}},
		"an empty member":     {"kx.other@1", "1", []string{"operationId", ""}},
	} {
		err := pgcall.RegisterEnvelopeRefinement(ctx, reg, c.typ, c.version, c.members)
		kernelfix.WantState(t, err, "OB101")
		if after := keSnapshot(t, admin); after != before {
			t.Fatalf("%s: a refused registration changed the registry", name)
		}
	}
	_, err := testdb.Conn(t, dsn, "outbox_producer").Exec(ctx,
		`SELECT outbox.register_envelope_refinement('kx.x@1', '1', ARRAY['operationId'])`)
	kernelfix.WantState(t, err, "42501")
}

// keWorld is a kernel-only database with one release of its own: receipt kind kx_ledger
// (note: string maxLength 5, position: integer minimum 1, both required), destination kx_store
// and a delivery set routing kx.happened@1 to it, active.
type keWorld struct {
	dsn         string
	admin, disp *pgx.Conn
	kind        kernelfix.ReceiptKind
}

func keSetup(t *testing.T) keWorld {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	w := keWorld{dsn: dsn, admin: testdb.Conn(t, dsn, ""), disp: testdb.Conn(t, dsn, "outbox_dispatcher"),
		kind: kernelfix.ReceiptKind{Kind: "kx_ledger", Type: "KxLedgerReceipt", Prefix: "kxLedgerReceipt", TimeField: "committedAt"}}
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	maxLen, minPos := 5, int64(1)
	if err := pgcall.RegisterReceiptKind(ctx, reg, pgcall.ReceiptKindParams{
		ReceiptKind: w.kind.Kind, ReceiptType: w.kind.Type, FieldPrefix: w.kind.Prefix, TimeField: w.kind.TimeField,
		ReceiptSchemaVersion: 1, Members: map[string]pgcall.ReceiptMember{
			"note":     {Type: "string", Required: true, MaxLength: &maxLen},
			"position": {Type: "integer", Required: true, Minimum: &minPos},
		}}); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.RegisterDestination(ctx, reg, pgcall.DestinationParams{Destination: "kx_store", ConsumerName: "kx_consumer",
		ReceiptKind: w.kind.Kind, ReceiptType: w.kind.Type, ReceiptSchemaVersion: 1}); err != nil {
		t.Fatal(err)
	}
	def, err := json.Marshal(map[string]any{
		"deliverySetVersion": 1, "deliverySetDefinitionSchemaVersion": 1, "deliverySetDefinitionDigestAlgorithmVersion": "jcs-sha256-v1",
		"applicableEventCount": 1, "memberCount": 1,
		"applicableEvents": []any{map[string]any{"eventType": "kx.happened@1", "eventSchemaVersion": "1"}},
		"members": []any{map[string]any{"eventType": "kx.happened@1", "eventSchemaVersion": "1", "destination": "kx_store",
			"consumerName": "kx_consumer", "expectedReceiptType": w.kind.Type, "expectedReceiptSchemaVersion": 1,
			"projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := release.WithDigest(def)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pgcall.RegisterDeliverySet(ctx, reg, doc, "kx-release")
	if err != nil {
		t.Fatal(err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, reg, q); err != nil {
		t.Fatal(err)
	}
	return w
}

// R-AK-1a, §13: a registered maxLength and minimum are enforced with OB002 on every receipt
// path - ack_delivery (the full rule), ack_deliveries (the hot path's predicate, then the rule)
// and inbox.record_receipt - and a receipt within the bounds is accepted on each.
func TestRegisteredReceiptBoundsEnforced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := keSetup(t)
	inbox := testdb.Conn(t, w.dsn, "outbox_consumer")
	for _, c := range []struct {
		name     string
		note     string
		position int
		problem  string // "" accepted
	}{
		{"note longer than maxLength", "sixsix", 1, `member "note" is longer than its maxLength 5`},
		{"multibyte note of 5 characters", "ñañañ", 1, ""},
		{"position below minimum", "ok", 0, `"position" 0 is below its minimum 1`},
		{"within bounds", "fives", 1, ""},
	} {
		for _, path := range []string{"ack_delivery", "ack_deliveries", "record_receipt"} {
			testfix.Append(t, w.admin, testfix.Envelope("kx.happened@1", "1", "kx-"+path+"-"+c.name, 1))
			cl := kernelfix.ClaimOne(t, w.disp, kernelfix.WorkerA, kernelfix.LongLease, "kx_store")
			d := kernelfix.NewReceiptOfKind(t, cl, w.kind)
			d.Receipt["note"] = c.note
			d.Receipt["position"] = c.position
			ack, rc := d.Seal(t).JSON(t)
			var state, detail, outcome string
			switch path {
			case "ack_delivery":
				res, err := pgcall.AckDelivery(ctx, w.disp, kernelfix.FenceOf(cl), ack, rc)
				state, detail, outcome = pgcall.SQLState(err), detailOf(err), res
			case "ack_deliveries":
				outs, err := pgcall.AckDeliveries(ctx, w.disp, []pgcall.AckItem{{Fence: kernelfix.FenceOf(cl), Ack: ack, Receipt: rc}})
				if err != nil || len(outs) != 1 {
					t.Fatalf("%s: %v %+v", c.name, err, outs)
				}
				state, detail, outcome = outs[0].SQLState, outs[0].Detail, outs[0].Outcome
			case "record_receipt":
				env := cl.EventEnvelopeCanonical
				if env == nil {
					env = cl.EventEnvelope
				}
				r, err := consumerfix.Record(ctx, inbox, "kx_consumer", "", 0, env, rc)
				state, detail, outcome = pgcall.SQLState(err), detailOf(err), r.Outcome
			}
			if c.problem == "" {
				if state != "" || (outcome != "complete" && outcome != "new") {
					t.Fatalf("%s via %s: %s %s %q, want accepted", c.name, path, outcome, state, detail)
				}
				continue
			}
			if state != "OB002" || !strings.Contains(detail, c.problem) {
				t.Fatalf("%s via %s: %s %s %q, want OB002 naming %q", c.name, path, outcome, state, detail, c.problem)
			}
			if path != "record_receipt" {
				if s := kernelfix.Status(t, w.admin, "kx_store", cl.EventID); s != "leased" {
					t.Fatalf("%s via %s: status %s after a refused ack, want leased", c.name, path, s)
				}
			}
		}
	}
	if n := kernelfix.QueryInt(t, w.admin, `SELECT count(*) FROM inbox.inbox_receipts`); n != 2 {
		t.Fatalf("%d receipts recorded, want the two within bounds", n)
	}
}

// SPEC §2, D-1, D-5: a destination without a retry-policy row follows the kernel-wide default
// (first delay 1 s +- 20 %, 20 attempts); changing the default (set_retry_policy('*', ...),
// recorded in the history) changes the backoff and the attempt budget of such a destination,
// not of one with its own row; the default can be neither deleted nor truncated.
func TestDefaultRetryPolicyAppliesWithoutRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := keSetup(t)
	if n := kernelfix.QueryInt(t, w.admin, `SELECT count(*) FROM outbox.outbox_retry_policies`); n != 0 {
		t.Fatalf("%d policy rows after register_destination, want 0", n)
	}
	backoff := func(eventID string) time.Duration {
		t.Helper()
		var secs float64
		if err := w.admin.QueryRow(ctx, `SELECT extract(epoch FROM d.available_at - f.finished_at)::float8
		        FROM outbox.outbox_deliveries AS d JOIN outbox.outbox_delivery_attempt_finishes AS f ON f.attempt_id = d.current_attempt_id
		       WHERE d.destination = 'kx_store' AND d.event_id = $1`, eventID).Scan(&secs); err != nil {
			t.Fatal(err)
		}
		return time.Duration(secs * float64(time.Second))
	}
	retry := func(agg string) string {
		t.Helper()
		testfix.Append(t, w.admin, testfix.Envelope("kx.happened@1", "1", agg, 1))
		cl := kernelfix.ClaimOne(t, w.disp, kernelfix.WorkerA, kernelfix.LongLease, "kx_store")
		if res, err := pgcall.RetryDelivery(ctx, w.disp, kernelfix.FenceOf(cl), "transport_error", nil); err != nil || res != "pending" {
			t.Fatalf("retry: %q %v", res, err)
		}
		return cl.EventID
	}
	if d := backoff(retry("kx-default")); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Fatalf("backoff %v on the default policy, want 1 s +- 20 %%", d)
	}
	if n := kernelfix.QueryInt(t, w.admin, `SELECT count(*) FROM outbox.outbox_retry_policies`); n != 0 {
		t.Fatalf("a retry on the default wrote %d policy rows", n)
	}

	// the operator changes the default: 1 attempt, base 30 s, no jitter
	reg := testdb.Conn(t, w.dsn, "outbox_registrar")
	var v int
	if err := reg.QueryRow(ctx, `SELECT outbox.set_retry_policy('*', '30 seconds', 2, '1 minute', 0, 2)`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("set_retry_policy('*'): version %d, %v; want 2", v, err)
	}
	if h := kernelfix.QueryInt(t, w.admin, `SELECT count(*) FROM outbox.outbox_retry_policy_history WHERE destination = '*' AND operation = 'UPDATE' AND max_attempts = 2`); h != 1 {
		t.Fatalf("%d history rows for the default's change, want 1", h)
	}
	ev := retry("kx-changed")
	if d := backoff(ev); d < 29*time.Second || d > 31*time.Second {
		t.Fatalf("backoff %v after the default changed, want 30 s", d)
	}
	// the second attempt exhausts the budget of 2: quarantined
	if _, err := w.admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE destination = 'kx_store' AND event_id = $1`, ev); err != nil {
		t.Fatal(err)
	}
	cl := kernelfix.ClaimOne(t, w.disp, kernelfix.WorkerA, kernelfix.LongLease, "kx_store")
	if cl.EventID != ev {
		t.Fatalf("claimed %s, want %s", cl.EventID, ev)
	}
	if res, err := pgcall.RetryDelivery(ctx, w.disp, kernelfix.FenceOf(cl), "transport_error", nil); err != nil || res != "quarantined" {
		t.Fatalf("retry at the default's max attempts: %q %v, want quarantined", res, err)
	}
	// a destination's own row wins over the default
	if err := reg.QueryRow(ctx, `SELECT outbox.set_retry_policy('kx_store', '5 seconds', 1, '1 minute', 0, 20)`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("set_retry_policy(kx_store): %d %v", v, err)
	}
	if d := backoff(retry("kx-own")); d < 4*time.Second || d > 6*time.Second {
		t.Fatalf("backoff %v with the destination's own row, want 5 s", d)
	}
	owner := testdb.Conn(t, w.dsn, "outbox_owner")
	for _, stmt := range []string{`DELETE FROM outbox.outbox_retry_policy_default`, `TRUNCATE outbox.outbox_retry_policy_default`} {
		_, err := owner.Exec(ctx, stmt)
		kernelfix.WantState(t, err, "OB202")
	}
	_, err := reg.Exec(ctx, `SELECT outbox.set_retry_policy('*', '1 second', 2, '5 minutes', 1.5, 20)`)
	kernelfix.WantState(t, err, kernelfix.SQLStateParam)
}

// D-1: `make migrate-reference` (reference.Install) on a kernel-only database registers exactly
// the reference definitions the migrations seeded before 041 and creates the reference schemas;
// a second run changes nothing (every row count equal).
func TestMigrateReferenceTwiceIsNoOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	admin := testdb.Conn(t, dsn, "")
	if err := reference.Install(ctx, admin); err != nil {
		t.Fatal(err)
	}
	first := keCounts(t, admin)
	// 5 kinds, 23 members, 4 destinations, 5 refinement rows, no policy row, 1 projection
	// version, 2 observation schemas, 6 reference schemas
	if !strings.HasPrefix(first, "5,23,4,5,0,") || !strings.Contains(first, ",1,2,6,") {
		t.Fatalf("after reference install: %s", first)
	}
	if err := reference.Install(ctx, admin); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if again := keCounts(t, admin); again != first {
		t.Fatalf("second run changed row counts: %s -> %s", first, again)
	}
	// and the release activates on it (the registry the delivery set needs is there)
	testfix.ActivateReference(t, admin)
}

// D-1 for an existing install: a database at migration 040 that uses the reference rows (the
// reference release registered and activated, events appended and claimed, a mailbox effect
// recorded) keeps every one of them through 041 - destinations, their retry-policy rows, receipt
// kinds with members, refinements - and the mailbox effect's rows move to refmailbox; the
// reference installer then changes no registry row and the delivery set keeps delivering.
func TestUpgradeFrom040KeepsUsedReferenceRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := kernelfix.FreshDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	m, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrate.FS()); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 40); err != nil {
		t.Fatalf("install 040: %v", err)
	}
	testfix.ActivateReference(t, conn)
	testfix.Append(t, conn, testfix.Envelope(kernelfix.Metering, "1", "up40-1", 1))
	testfix.Append(t, conn, testfix.Envelope(kernelfix.Resolution, "1", "up40-2", 1))
	upExec(t, conn, `SET ROLE outbox_registrar`)
	if err := pgcall.RegisterMailboxSource(ctx, conn, pgcall.MailboxSourceParams{Source: "up40-box",
		HoleReleaseAfter: time.Hour, BackfillDeadline: time.Hour}); err != nil {
		t.Fatal(err)
	}
	upExec(t, conn, `RESET ROLE`)
	upExec(t, conn, `INSERT INTO mailbox.ref_effects (source, identity, msg_id, key, revision, type, applied_at)
	        VALUES ('up40-box', 'id-1', 1, 'k', 1, 't', now())`)
	upExec(t, conn, `INSERT INTO mailbox.ref_key_sequences (source, key, last_revision) VALUES ('up40-box', 'k', 1)`)
	registry := `SELECT concat_ws(' | ',
	        (SELECT string_agg(concat_ws(',', receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection), ';' ORDER BY receipt_kind) FROM outbox.receipt_kinds),
	        (SELECT string_agg(concat_ws(',', receipt_kind, member, json_type, required, minimum), ';' ORDER BY receipt_kind, member) FROM outbox.receipt_kind_members),
	        (SELECT string_agg(concat_ws(',', event_type, event_schema_version, required_field), ';' ORDER BY 1, 2, 3) FROM outbox.envelope_refinements),
	        (SELECT string_agg(concat_ws(',', destination, consumer_name, receipt_kind, projection_required, ordering), ';' ORDER BY destination) FROM outbox.delivery_destinations),
	        (SELECT string_agg(concat_ws(',', destination, max_attempts, policy_version), ';' ORDER BY destination) FROM outbox.outbox_retry_policies))`
	var before string
	if err := conn.QueryRow(ctx, registry).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, "core_operations,operations_projector") || !strings.Contains(before, "run.created@2.0") {
		t.Fatalf("040 registry: %s", before)
	}

	if err := migrate.Up(ctx, conn); err != nil {
		t.Fatalf("040 -> head: %v", err)
	}
	var after string
	if err := conn.QueryRow(ctx, registry).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("041 changed a used install's registry:\nbefore %s\nafter  %s", before, after)
	}
	var moved, gone int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM refmailbox.ref_effects WHERE identity = 'id-1')
	          + (SELECT count(*) FROM refmailbox.ref_key_sequences WHERE key = 'k'),
	        (SELECT count(*) FROM pg_class WHERE relnamespace = 'mailbox'::regnamespace AND relname IN ('ref_effects', 'ref_key_sequences'))
	          + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'mailbox'::regnamespace AND proname = 'apply_reference_effect')`).
		Scan(&moved, &gone); err != nil {
		t.Fatal(err)
	}
	if moved != 2 || gone != 0 {
		t.Fatalf("mailbox effect: %d rows in refmailbox (want 2), %d objects left in mailbox (want 0)", moved, gone)
	}
	// the reference installer on the upgraded database: no registry change, the effect function back
	if err := reference.InstallBase(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var again string
	if err := conn.QueryRow(ctx, registry).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again != before {
		t.Fatalf("reference install changed the upgraded registry:\n%s\n%s", before, again)
	}
	if n := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM pg_proc WHERE pronamespace = 'refmailbox'::regnamespace AND proname = 'apply_reference_effect'`); n != 1 {
		t.Fatalf("refmailbox.apply_reference_effect: %d", n)
	}
	// delivery goes on: the appended events are claimable and acknowledged at head
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	c := kernelfix.ClaimOne(t, disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	if got := kernelfix.Ack(t, disp, c); got != "complete" {
		t.Fatalf("ack after the upgrade: %s", got)
	}
}
