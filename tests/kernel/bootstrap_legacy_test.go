package kernel

// Bootstrap of pre-existing events (SPEC §3.3 R-BS-1..4): a DBA-named legacy table imported
// against an explicit registered Bootstrap Delivery Set, as outbox_owner (a migration or a DBA).

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

type bsBundle struct {
	dsn   string
	admin *pgx.Conn
	owner *pgx.Conn // SET ROLE outbox_owner
	q     pgcall.Quartet
}

// bsSetup: the reference release registered (as the Bootstrap Delivery Set, R-BS-1) and active,
// and an empty legacy table legacy.outbox_events with the R-BS-4 columns (payload as text, so
// that corrupt legacy payloads can exist), readable by outbox_owner.
func bsSetup(t *testing.T) bsBundle {
	t.Helper()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	q := testfix.ActivateReference(t, admin)
	for _, s := range []string{
		`CREATE SCHEMA legacy`,
		`CREATE TABLE legacy.outbox_events (event_id text, event_type text, event_schema_version text, aggregate_id text,
			aggregate_revision bigint, tenant_kind text, tenant_id text, workspace_id text, project_id text, correlation_id text,
			causation_id text, operation_id text, payload text, occurred_at timestamptz, created_at timestamptz)`,
		`GRANT USAGE ON SCHEMA legacy TO outbox_owner`,
		`GRANT SELECT ON legacy.outbox_events TO outbox_owner`,
	} {
		if _, err := admin.Exec(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return bsBundle{dsn: dsn, admin: admin, owner: testdb.Conn(t, dsn, "outbox_owner"), q: q}
}

// bsRow inserts one legacy row from an envelope (as a producer library would have written it).
func (b bsBundle) bsRow(t *testing.T, env map[string]any, payload string) {
	t.Helper()
	tenant := env["tenant"].(map[string]any)
	str := func(m map[string]any, k string) any {
		if v, ok := m[k]; ok {
			return v
		}
		return nil
	}
	if payload == "" {
		p, _ := json.Marshal(env["payload"])
		payload = string(p)
	}
	if _, err := b.admin.Exec(context.Background(), `INSERT INTO legacy.outbox_events VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::timestamptz, $14::timestamptz - interval '1 day')`,
		env["eventId"], env["eventType"], env["eventSchemaVersion"], env["aggregateId"], env["aggregateRevision"],
		tenant["tenantKind"], tenant["tenantId"], tenant["workspaceId"], str(tenant, "projectId"),
		str(env, "correlationId"), str(env, "causationId"), str(env, "operationId"), payload, env["occurredAt"]); err != nil {
		t.Fatal(err)
	}
}

func (b bsBundle) bsRun(t *testing.T, maxRows int) pgcall.BootstrapRun {
	t.Helper()
	r, err := pgcall.BootstrapLegacyEvents(context.Background(), b.owner, "legacy.outbox_events", b.q, maxRows)
	if err != nil {
		t.Fatalf("bootstrap_legacy_events: %v", err)
	}
	return r
}

func bsDigest(t *testing.T, env map[string]any) string {
	t.Helper()
	d, err := canon.Digest(env)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// R-BS-1, R-BS-2, R-BS-3, R-BS-4: every legacy row is classified once — imported with the
// database-computed digest (equal to the Go canonicalizer's), the frozen quartet of the
// Bootstrap Delivery Set and exactly its mandatory pending deliveries; already present
// (insert-or-compare); or a visible bootstrap quarantine row with its reason (unsupported
// schema, corrupt envelope, corrupt payload, not canonicalizable, digest conflict) and never an
// event. Small runs resume where the last one stopped; a run over a fully handled source imports
// nothing and reproduces the evidence digest; one immutable evidence row per run.
func TestBootstrapClassifiesResumesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bsSetup(t)
	want := map[string]string{} // event id -> classification or quarantine reason
	digests := map[string]string{}
	for i := 0; i < 5; i++ {
		env := testfix.Envelope(kernelfix.Metering, "1", "legacy-agg", int64(i+1))
		b.bsRow(t, env, "")
		want[env["eventId"].(string)] = "imported"
		digests[env["eventId"].(string)] = bsDigest(t, env)
	}
	res := testfix.Envelope(kernelfix.Resolution, "1", "legacy-res", 1) // two mandatory members
	b.bsRow(t, res, "")
	want[res["eventId"].(string)] = "imported"
	digests[res["eventId"].(string)] = bsDigest(t, res)
	// already present: the same envelope appended by the kernel before the bootstrap
	present := testfix.Envelope(kernelfix.Metering, "1", "legacy-present", 1)
	testfix.Append(t, b.admin, present)
	b.bsRow(t, present, "")
	want[present["eventId"].(string)] = "already_present"
	digests[present["eventId"].(string)] = bsDigest(t, present)
	// digest conflict: the id is in the kernel with another envelope
	conflict := testfix.Envelope(kernelfix.Metering, "1", "legacy-conflict", 1)
	testfix.Append(t, b.admin, conflict)
	conflict["payload"] = map[string]any{"different": true}
	b.bsRow(t, conflict, "")
	want[conflict["eventId"].(string)] = "digest_conflict"
	// digest conflict inside the source: one id, two envelopes
	twice := testfix.Envelope(kernelfix.Metering, "1", "legacy-twice", 1)
	b.bsRow(t, twice, "")
	twice["payload"] = map[string]any{"other": 1}
	b.bsRow(t, twice, "")
	want[twice["eventId"].(string)] = "digest_conflict"
	// unsupported schema: the pair is not in the Bootstrap Delivery Set
	unsupported := testfix.Envelope("legacy.unknown-event@1", "1", "legacy-unknown", 1)
	b.bsRow(t, unsupported, "")
	want[unsupported["eventId"].(string)] = "unsupported_schema"
	// corrupt payload: not JSON, and not an object
	notJSON := testfix.Envelope(kernelfix.Metering, "1", "legacy-notjson", 1)
	b.bsRow(t, notJSON, "{not json")
	want[notJSON["eventId"].(string)] = "corrupt_payload"
	notObject := testfix.Envelope(kernelfix.Metering, "1", "legacy-array", 1)
	b.bsRow(t, notObject, "[1, 2]")
	want[notObject["eventId"].(string)] = "corrupt_payload"
	// not canonicalizable: a duplicate key, an unsafe number
	dup := testfix.Envelope(kernelfix.Metering, "1", "legacy-dup", 1)
	b.bsRow(t, dup, `{"a": 1, "a": 2}`)
	want[dup["eventId"].(string)] = "not_canonicalizable"
	unsafe := testfix.Envelope(kernelfix.Metering, "1", "legacy-unsafe", 1)
	b.bsRow(t, unsafe, `{"n": 9007199254740993}`)
	want[unsafe["eventId"].(string)] = "not_canonicalizable"
	// corrupt envelope: a refinement of R-AP-7 violated (run.created@2.0 requires operationId),
	// and a missing tenant id
	refinement := testfix.Envelope(kernelfix.RunCreated, "2.0", "legacy-run", 1)
	delete(refinement, "operationId")
	b.bsRow(t, refinement, "")
	want[refinement["eventId"].(string)] = "corrupt_envelope"
	noTenant := testfix.Envelope(kernelfix.Metering, "1", "legacy-notenant", 1)
	delete(noTenant["tenant"].(map[string]any), "tenantId")
	b.bsRow(t, noTenant, "")
	want[noTenant["eventId"].(string)] = "corrupt_envelope"
	// a row without a usable event id
	if _, err := b.admin.Exec(ctx, `INSERT INTO legacy.outbox_events (event_id, event_type, payload, occurred_at)
		VALUES ('not-a-uuid', 'x', '{}', now())`); err != nil {
		t.Fatal(err)
	}
	eventsBefore := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_events`)

	// Resumable: runs of 4 keys until nothing is left; each run commits on its own.
	var last pgcall.BootstrapRun
	runs := 0
	for {
		last = b.bsRun(t, 4)
		runs++
		left := kernelfix.QueryInt(t, b.admin, `SELECT rows_left FROM outbox.bootstrap_runs WHERE run_id = $1::uuid`, last.RunID)
		if left == 0 {
			break
		}
		if runs > 10 {
			t.Fatal("bootstrap does not converge")
		}
	}
	if runs != 5 { // 18 keys, 4 per run
		t.Fatalf("%d runs for 18 legacy keys in batches of 4", runs)
	}
	// classifications
	rows, err := b.admin.Query(ctx, `SELECT coalesce(event_id::text, item_key), classification, coalesce(reason, ''), coalesce(event_envelope_sha256, '')
		FROM outbox.bootstrap_items WHERE source = 'legacy.outbox_events'`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var id, class, reason, sha string
		if err := rows.Scan(&id, &class, &reason, &sha); err != nil {
			t.Fatal(err)
		}
		if class == "quarantined" {
			got[id] = reason
		} else {
			got[id] = class
			if sha != digests[id] {
				t.Errorf("%s: database digest %s, Go canonicalizer %s (R-BS-2)", id, sha, digests[id])
			}
		}
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("legacy event %s classified %q, want %q", id, got[id], w)
		}
	}
	if len(got) != len(want)+1 || !strings.HasPrefix(firstKeyWith(got, "corrupt_envelope", want), "row:") {
		t.Errorf("the row without an event id: %v", got)
	}
	// imported: the frozen quartet, exactly the mandatory deliveries, pending
	if n := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_events`) - eventsBefore; n != 6 {
		t.Fatalf("%d events imported, want 6", n)
	}
	if n := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_deliveries d JOIN outbox.bootstrap_items i ON i.event_id = d.event_id
		WHERE i.classification = 'imported' AND d.status = 'pending'`); n != 7 {
		t.Fatalf("%d pending deliveries for the imported events, want 7 (5 + 2)", n)
	}
	if n := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_events e JOIN outbox.bootstrap_items i ON i.event_id = e.event_id
		WHERE i.classification = 'imported' AND (e.delivery_set_version, e.delivery_set_definition_schema_version,
		      e.delivery_set_definition_digest_algorithm_version, e.delivery_set_definition_digest) = ($1, $2, $3, $4)
		  AND e.created_at = e.occurred_at - interval '1 day'`, b.q.DeliverySetVersion, b.q.DefinitionSchemaVersion,
		b.q.DigestAlgorithmVersion, b.q.DefinitionDigest); n != 6 {
		t.Fatalf("%d imported events carry the bootstrap quartet and the legacy created_at, want 6", n)
	}
	// quarantined rows are visible and never became events
	if n := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.bootstrap_quarantine q
		WHERE q.event_id IS NOT NULL AND EXISTS (SELECT 1 FROM outbox.outbox_events e WHERE e.event_id = q.event_id)`); n != 1 {
		t.Fatalf("%d quarantined ids are events; only the conflicting id appended by the kernel itself may be", n)
	}
	auditor := testdb.Conn(t, b.dsn, "outbox_auditor")
	if n := kernelfix.QueryInt(t, auditor, `SELECT count(*) FROM outbox.bootstrap_quarantine WHERE legacy_row IS NOT NULL`); n != 10 {
		t.Fatalf("bootstrap quarantine shows %d rows, want 10", n)
	}
	// evidence: the set digest of every present (event_id, digest) pair
	wantEvidence := rtSetDigest(digests)
	if last.EvidenceSHA256 != wantEvidence {
		t.Fatalf("evidence %s, want %s", last.EvidenceSHA256, wantEvidence)
	}
	var perReason json.RawMessage
	if err := b.admin.QueryRow(ctx, `SELECT jsonb_object_agg(k, v) FROM (SELECT r.k, sum(r.v::int) AS v
		FROM outbox.bootstrap_runs br, jsonb_each_text(br.quarantine_reasons) AS r(k, v) GROUP BY r.k) x`).Scan(&perReason); err != nil {
		t.Fatal(err)
	}
	var counts map[string]int
	_ = json.Unmarshal(perReason, &counts)
	if counts["digest_conflict"] != 2 || counts["corrupt_payload"] != 2 || counts["not_canonicalizable"] != 2 ||
		counts["corrupt_envelope"] != 3 || counts["unsupported_schema"] != 1 {
		t.Fatalf("evidence counts per reason: %v", counts)
	}
	// idempotent: nothing new, the same evidence
	again := b.bsRun(t, 10000)
	if again.Imported != 0 || again.Quarantined != 0 || again.AlreadyPresent != 7 || again.EvidenceSHA256 != wantEvidence {
		t.Fatalf("second run %+v, want nothing new, 7 present and evidence %s", again, wantEvidence)
	}
	if n := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.bootstrap_runs`); n != runs+1 {
		t.Fatalf("%d evidence rows for %d runs", n, runs+1)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE outbox.bootstrap_runs SET imported = 0`); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("evidence rewritable: %v", err)
	}
	// imported events are delivered like any other (consumers converge by receipts)
	disp := testdb.Conn(t, b.dsn, "outbox_dispatcher")
	cs := kernelfix.Claim(t, disp, kernelfix.WorkerA, 100, time.Minute, kernelfix.DestMetering, kernelfix.DestCoreOps, kernelfix.DestCoord)
	for _, c := range cs {
		kernelfix.Ack(t, disp, c)
	}
	if n := kernelfix.QueryInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_publications p JOIN outbox.bootstrap_items i ON i.event_id = p.event_id
		WHERE i.classification = 'imported'`); n != 6 {
		t.Fatalf("%d imported events published after delivery, want 6", n)
	}
}

func firstKeyWith(got map[string]string, v string, known map[string]string) string {
	for k, x := range got {
		if _, ok := known[k]; !ok && x == v {
			return k
		}
	}
	return ""
}

// R-BS-4: the bootstrap holds the append lock until its transaction ends: no append can commit
// meanwhile; afterwards appends proceed. Only the owner may run it (42501 otherwise); an
// unregistered quartet (OB103) or a source without the R-BS-4 columns (42703) is refused.
func TestBootstrapAppendLockAndRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bsSetup(t)
	b.bsRow(t, testfix.Envelope(kernelfix.Metering, "1", "legacy-lock", 1), "")
	tx, err := b.owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.BootstrapLegacyEvents(ctx, tx, "legacy.outbox_events", b.q, 100); err != nil {
		t.Fatal(err)
	}
	prod := testdb.Conn(t, b.dsn, "outbox_producer")
	if _, err := prod.Exec(ctx, `SET lock_timeout = '300ms'`); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(testfix.Envelope(kernelfix.Metering, "1", "concurrent", 1))
	_, err = pgcall.AppendEvent(ctx, prod, pgcall.AppendParams{Event: raw})
	kernelfix.WantState(t, err, "55P03") // lock_not_available: the append waits for the bootstrap
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.AppendEvent(ctx, prod, pgcall.AppendParams{Event: raw}); err != nil {
		t.Fatalf("append after the bootstrap: %v", err)
	}

	for _, role := range []string{"outbox_registrar", "outbox_producer", "outbox_dispatcher", "outbox_consumer", "outbox_auditor", "outbox_retention"} {
		_, err := pgcall.BootstrapLegacyEvents(ctx, testdb.Conn(t, b.dsn, role), "legacy.outbox_events", b.q, 10)
		kernelfix.WantState(t, err, "42501")
	}
	bad := b.q
	bad.DefinitionDigest = strings.Repeat("0", 64)
	_, err = pgcall.BootstrapLegacyEvents(ctx, b.owner, "legacy.outbox_events", bad, 10)
	kernelfix.WantState(t, err, "OB103")
	if _, err := b.admin.Exec(ctx, `CREATE VIEW legacy.partial AS SELECT event_id, payload FROM legacy.outbox_events;
		GRANT SELECT ON legacy.partial TO outbox_owner`); err != nil {
		t.Fatal(err)
	}
	_, err = pgcall.BootstrapLegacyEvents(ctx, b.owner, "legacy.partial", b.q, 10)
	kernelfix.WantState(t, err, "42703")
}
