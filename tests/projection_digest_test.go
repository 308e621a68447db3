package tests

// Projection content digests (SPEC R-PV-4, §13; issue 24 item 3): the reference operations
// projector's rows (its projection_rows view leaves apply times out) built twice, in different
// arrival orders and at different times, have one digest; a changed row changes it and
// compare_projection_versions names the key; the registration's refusals.

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
)

// pdFill writes two operations, their timeline and one pending reservation into schema, in the
// given order of statements, each a second apart in projected_at.
func pdFill(t *testing.T, db *pgx.Conn, schema string, reverse bool, shift string) {
	t.Helper()
	ctx := context.Background()
	s := pgx.Identifier{schema}.Sanitize()
	stmts := []string{
		`INSERT INTO ` + s + `.operations (operation_id, run_id, correlation_id, tenant_id, workspace_id, created_event_id, occurred_at, projected_at)
		 VALUES ('op-1', 'run-1', 'c-1', 't-1', 'w-1', '00000000-0000-4000-8000-000000000001', '2026-12-01T10:00:00Z', now() + interval '` + shift + `')`,
		`INSERT INTO ` + s + `.operations (operation_id, run_id, correlation_id, tenant_id, workspace_id, created_event_id, occurred_at, projected_at)
		 VALUES ('op-2', 'run-2', 'c-2', 't-1', 'w-1', '00000000-0000-4000-8000-000000000002', '2026-12-01T10:00:01Z', now() + interval '` + shift + `')`,
		`INSERT INTO ` + s + `.operation_timeline (event_id, operation_id, entry_kind, event_type, event_schema_version, aggregate_id, aggregate_revision, occurred_at, projected_at)
		 VALUES ('00000000-0000-4000-8000-000000000001', 'op-1', 'run_created', 'run.created@2.0', '2.0', 'run-1', 1, '2026-12-01T10:00:00Z', now() + interval '` + shift + `')`,
		`INSERT INTO ` + s + `.pending_unlinked_reservations (event_id, operation_id, correlation_id, reservation_id, aggregate_revision, occurred_at, received_at)
		 VALUES ('00000000-0000-4000-8000-000000000003', 'op-3', 'c-3', 'res-3', 1, '2026-12-01T10:00:02Z', now() + interval '` + shift + `')`,
	}
	if reverse {
		for i, j := 0, len(stmts)-1; i < j; i, j = i+1, j-1 {
			stmts[i], stmts[j] = stmts[j], stmts[i]
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestProjectionDigestDeterministic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	aud := testdb.Conn(t, dsn, "outbox_auditor")
	spec, ok := reference.Lookup(reference.OperationsProjector)
	if !ok {
		t.Fatal("no operations projector")
	}
	for _, schema := range []string{"pd_ops_v1", "pd_ops_v2"} {
		spec.Schema = schema
		must(t, spec.Install(ctx, admin, ""))
		if _, err := admin.Exec(ctx, `GRANT USAGE ON SCHEMA `+schema+` TO outbox_owner; GRANT SELECT ON `+schema+`.projection_rows TO outbox_owner`); err != nil {
			t.Fatal(err)
		}
	}
	pdFill(t, admin, "pd_ops_v1", false, "0 seconds")
	pdFill(t, admin, "pd_ops_v2", true, "1 hour") // other order, other apply times

	const name = "pd_projection"
	if _, err := pgcall.RegisterProjectionRows(ctx, reg, name, 1, "pd_ops_v1.projection_rows"); pgcall.SQLState(err) != "OB802" {
		t.Fatalf("rows of an unregistered version: %v, want OB802", err)
	}
	for _, v := range []int{1, 2} {
		if _, err := pgcall.RegisterProjectionVersion(ctx, reg, name, v, "unknown"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pgcall.ProjectionDigest(ctx, aud, name, 1); pgcall.SQLState(err) != "OB802" {
		t.Fatalf("digest without a row source: %v, want OB802", err)
	}
	if _, err := pgcall.RegisterProjectionRows(ctx, reg, name, 1, "pd_ops_v1.operations"); pgcall.SQLState(err) != "22023" {
		t.Fatalf("a relation without row_key/row_document: %v, want 22023", err)
	}
	if _, err := admin.Exec(ctx, `CREATE VIEW pd_ops_v1.hidden_rows AS SELECT row_key, row_document FROM pd_ops_v1.projection_rows`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.RegisterProjectionRows(ctx, reg, name, 1, "pd_ops_v1.hidden_rows"); pgcall.SQLState(err) != "42501" {
		t.Fatalf("a relation outbox_owner may not read: %v, want 42501", err)
	}
	for v, rel := range map[int]string{1: "pd_ops_v1.projection_rows", 2: "pd_ops_v2.projection_rows"} {
		st, err := pgcall.RegisterProjectionRows(ctx, reg, name, v, rel)
		if err != nil || st != "registered" {
			t.Fatalf("register rows v%d: %s %v", v, st, err)
		}
		if st, err = pgcall.RegisterProjectionRows(ctx, reg, name, v, rel); err != nil || st != "existing" {
			t.Fatalf("register rows v%d again: %s %v", v, st, err)
		}
	}
	if _, err := pgcall.RegisterProjectionRows(ctx, reg, name, 1, "pd_ops_v2.projection_rows"); pgcall.SQLState(err) != "OB801" {
		t.Fatalf("another relation for a registered version: %v, want OB801", err)
	}

	d1, err := pgcall.ProjectionDigest(ctx, aud, name, 1)
	must(t, err)
	d2, err := pgcall.ProjectionDigest(ctx, aud, name, 2)
	must(t, err)
	if d1 != d2 || len(d1) != 64 {
		t.Fatalf("same rows, other order and apply times: digests %s vs %s", d1, d2)
	}
	// the session's time zone is not part of the content
	if _, err := aud.Exec(ctx, `SET TimeZone = 'Asia/Shanghai'`); err != nil {
		t.Fatal(err)
	}
	if again, err := pgcall.ProjectionDigest(ctx, aud, name, 1); err != nil || again != d1 {
		t.Fatalf("digest under another session time zone: %s %v", again, err)
	}
	c, err := pgcall.CompareProjectionVersions(ctx, aud, name, 1, 2)
	must(t, err)
	if !c.Same || c.RowsA != 4 || c.RowsB != 4 || len(c.SampleDifferences) != 0 || c.AntiJoin != 0 || c.OpenGaps != 0 || c.OpenQuarantine != 0 {
		t.Fatalf("comparison of equal builds: %+v", c)
	}

	if _, err := admin.Exec(ctx, `UPDATE pd_ops_v2.operations SET tenant_id = 't-2' WHERE operation_id = 'op-2'`); err != nil {
		t.Fatal(err)
	}
	c, err = pgcall.CompareProjectionVersions(ctx, aud, name, 1, 2)
	must(t, err)
	if c.Same || c.DigestA != d1 || c.DigestB == d1 || len(c.SampleDifferences) != 1 || c.SampleDifferences[0] != "operation:op-2" {
		t.Fatalf("comparison after one changed row: %+v", c)
	}

	if _, err := admin.Exec(ctx, `CREATE OR REPLACE VIEW pd_ops_v2.projection_rows AS
		SELECT 'k'::text AS row_key, '{}'::jsonb AS row_document UNION ALL SELECT 'k', '{}'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.ProjectionDigest(ctx, aud, name, 2); pgcall.SQLState(err) != "22023" {
		t.Fatalf("duplicate row keys: %v, want 22023", err)
	}
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	if _, err := pgcall.ProjectionDigest(ctx, disp, name, 1); pgcall.SQLState(err) != "42501" {
		t.Fatalf("the dispatcher reading a projection digest: %v, want 42501", err)
	}
}
