package kernel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/audit"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const auditGolden = "../../docs/audit.txt"

// R-SEC-4, T-7: `outboxctl audit` output (grant matrix + trigger list) is pinned by a committed
// golden file, so every change of who may do what is a reviewed diff. Regenerate with
// -update-goldens after a deliberate change.
func TestAuditGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.Conn(t, testdb.URL(t), "outbox_auditor")
	var buf bytes.Buffer
	if err := audit.Write(ctx, conn, &buf); err != nil {
		t.Fatal(err)
	}
	if *updateGoldens {
		testfix.Must(t, os.WriteFile(auditGolden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(auditGolden)
	if err != nil {
		t.Fatalf("%v (run with -update-goldens)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Fatalf("audit output differs from %s (run go test ./tests/kernel -run TestAuditGolden -update-goldens and review the diff):\n%s",
			auditGolden, lineDiff(string(want), buf.String()))
	}
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	in := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range l {
			m[x] = true
		}
		return m
	}
	am, bm := in(al), in(bl)
	var out []string
	for _, x := range al {
		if !bm[x] {
			out = append(out, "- "+x)
		}
	}
	for _, x := range bl {
		if !am[x] {
			out = append(out, "+ "+x)
		}
	}
	return strings.Join(out, "\n")
}

// R-SEC-1, R-SEC-4, T-7: every kernel role (and a role with nothing but PUBLIC's rights) is tried
// against every table and view (SELECT, INSERT, UPDATE, DELETE) and every function (EXECUTE);
// what actually happens must agree with the printed grant matrix, and the matrix must keep the
// invariants: no role but the owner writes any table; producers, dispatchers and consumers read
// no table; PUBLIC may do nothing.
// The intake schema is tried too (issue 38 item 6): every intake table and function against every role.
func TestGrantMatrixEnforced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	// A login-less role with only PUBLIC's privileges.
	if _, err := admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE outbox_test_nobody NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	matrix, err := pgcall.GrantMatrix(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{} // role|object|priv
	for _, g := range matrix {
		for _, p := range strings.Split(strings.SplitN(g.Privs, " ", 2)[0], ",") {
			allowed[g.Role+"|"+g.Object+"|"+p] = true
		}
		if g.Role == "PUBLIC" && g.Privs != "-" {
			t.Errorf("PUBLIC may %s on %s %s", g.Privs, g.Kind, g.Object)
		}
		if (g.Kind == "table" || g.Kind == "view") && g.Role != "outbox_owner" {
			for _, w := range []string{"INSERT", "UPDATE", "DELETE", "TRUNCATE"} {
				if strings.Contains(g.Privs, w) {
					t.Errorf("%s may %s on %s: only the owner writes tables", g.Role, w, g.Object)
				}
			}
			if g.Role == "outbox_producer" || g.Role == "outbox_dispatcher" || g.Role == "outbox_consumer" || g.Role == "outbox_mailbox" {
				if g.Privs != "-" {
					t.Errorf("%s has %s on %s: it acts only through functions", g.Role, g.Privs, g.Object)
				}
			}
		}
	}
	type object struct{ kind, name, callSQL string }
	var objects []object
	rows, err := admin.Query(ctx, `
		SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'table' END, n.nspname || '.' || c.relname, ''
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake') AND c.relkind IN ('r', 'v', 'p')
		UNION ALL
		SELECT 'function', p.oid::regprocedure::text,
		       format('SELECT %s(%s)', p.oid::regproc,
		              coalesce((SELECT string_agg('(SELECT NULL::' || format_type(a, NULL) || ')', ', ' ORDER BY i)
		                        FROM unnest(p.proargtypes) WITH ORDINALITY AS x(a, i)), ''))
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake') AND p.prorettype <> 'trigger'::regtype
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o object
		if err := rows.Scan(&o.kind, &o.name, &o.callSQL); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, o)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	roles := append(append([]string{}, pgcall.KernelRoles...), "outbox_test_nobody")
	tried := 0
	for _, role := range roles {
		conn := testdb.Conn(t, dsn, role)
		matrixRole := role
		if role == "outbox_test_nobody" {
			matrixRole = "PUBLIC"
		}
		for _, o := range objects {
			var attempts map[string]string
			if o.kind == "function" {
				attempts = map[string]string{"EXECUTE": o.callSQL}
			} else {
				col := firstColumn(t, admin, o.name)
				attempts = map[string]string{
					"SELECT": fmt.Sprintf("SELECT 1 FROM %s LIMIT 0", o.name),
					"INSERT": fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE false", o.name, col, col, o.name),
					"UPDATE": fmt.Sprintf("UPDATE %s SET %s = %s WHERE false", o.name, col, col),
					"DELETE": fmt.Sprintf("DELETE FROM %s WHERE false", o.name),
				}
				if o.kind == "view" {
					delete(attempts, "INSERT")
					delete(attempts, "UPDATE")
					delete(attempts, "DELETE")
				}
			}
			for priv, sql := range attempts {
				denied := tryInSavepoint(t, conn, sql)
				want := allowed[matrixRole+"|"+o.name+"|"+priv]
				if role == "outbox_test_nobody" {
					want = false // PUBLIC has nothing (asserted above), so nobody may do anything
				}
				if denied == want {
					t.Errorf("%s %s on %s: denied=%v but the grant matrix says allowed=%v", role, priv, o.name, denied, want)
				}
				tried++
			}
		}
	}
	if tried < 100 {
		t.Fatalf("only %d attempts: the object list looks wrong", tried)
	}
}

func firstColumn(t *testing.T, db *pgx.Conn, rel string) string {
	t.Helper()
	var col string
	if err := db.QueryRow(context.Background(), `SELECT quote_ident(attname) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attidentity = '' AND attgenerated = ''
		ORDER BY attnum LIMIT 1`, rel).Scan(&col); err != nil {
		t.Fatalf("columns of %s: %v", rel, err)
	}
	return col
}

// tryInSavepoint runs sql (function arguments are NULL sub-selects, so the planner cannot fold a
// STRICT call away before the privilege check) and reports whether it was refused for lack of privilege (42501).
// Any other outcome (success or another error, e.g. a NULL argument rejected by the function
// body) means the privilege check passed. The savepoint is always rolled back.
func tryInSavepoint(t *testing.T, conn *pgx.Conn, sql string) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, sql)
	return pgcall.SQLState(err) == "42501"
}

// R-SEC-1, T-7: the exact set of public (non-underscore, non-trigger) functions each role may
// execute. The JCS functions are for every kernel role; everything else belongs to one role.
func TestFunctionGrantsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Conn(t, testdb.URL(t), "")
	jcs := []string{"outbox.jcs_canonicalize", "outbox.jcs_sha256"}
	want := map[string][]string{
		"outbox_registrar": append([]string{"inbox.bind_consumer_role", "intake.register_normalization_policy", "intake.register_observation_projector",
			"intake.register_observation_schema", "intake.register_workload", "mailbox.register_source", "outbox.activate_delivery_set", "outbox.register_delivery_set", "outbox.register_destination",
			// SPEC D-1, §13: a release registers its receipt kinds and envelope refinements
			"outbox.register_envelope_refinement", "outbox.register_receipt_kind",
			"outbox.register_projection_rows", "outbox.register_projection_version", "outbox.set_retry_policy",
			// R-PV-3: retire and drop a projection version
			"outbox.drop_retired_projection", "outbox.retire_projection_version",
			// issue 34: the receipt kinds the Go kit reads
			"outbox.receipt_kind_catalog"}, jcs...),
		"outbox_producer": append([]string{"outbox.append_event", "outbox.append_events"}, jcs...),
		"outbox_dispatcher": append([]string{"outbox.ack_deliveries", "outbox.ack_delivery", "outbox.active_delivery_set", "outbox.claim_deliveries", "outbox.delivery_stats", "outbox.quarantine_deliveries", "outbox.quarantine_delivery", "outbox.recover_expired_leases", "outbox.redelivery_stats", "outbox.renew_lease", "outbox.retry_deliveries", "outbox.retry_delivery",
			// issue 34: the catalogs the dispatcher loads at preflight
			"outbox.error_code_catalog", "outbox.receipt_kind_catalog"}, jcs...),
		// R-OP-1: inbox.record_projection_ids (the projector's exact-id index, in its transaction)
		// R-OB-4: inbox.record_observation_receipt (the observation projector's consumer login)
		// issue 34: the catalogs the consumer kit loads at start
		"outbox_consumer": append([]string{"inbox.accept_delivery", "inbox.confirm_delivery", "inbox.observe_revision", "inbox.read_receipt", "inbox.record_observation_receipt", "inbox.record_projection_ids", "inbox.record_receipt",
			"outbox.error_code_catalog", "outbox.receipt_kind_catalog"}, jcs...),
		// R-OP-2, R-OP-3: the read model is the auditor's only (the dispatcher may not call it)
		"outbox_auditor": append([]string{"inbox.verify_receipt_digests", "intake.accepted_health_windows", "intake.console_observations", "intake.verify_purge_run", "mailbox.console_sources", "mailbox.pipeline_status", "outbox.active_delivery_set", "outbox.archive_integrity_problems", "outbox.check_completeness", "outbox.compare_projection_versions",
			// issue 25: the operator console's read functions
			"outbox.console_activity", "outbox.console_deliveries", "outbox.console_delivery_counts", "outbox.console_event", "outbox.console_event_attempts", "outbox.console_event_deliveries", "outbox.console_event_payload", "outbox.console_projection_versions", "outbox.console_readiness_proofs",
			// issue 41: the live overview and the console's search
			"outbox.console_destinations", "outbox.console_search",
			"outbox.delivery_stats", "outbox.preview_redelivery", "outbox.projection_digest", "outbox.publication_summary", "outbox.read_manifest", "outbox.record_two_part_proof", "outbox.redelivery_stats", "outbox.search_exact_id", "outbox.take_completeness_snapshot", "outbox.verify_ack_digests", "outbox.verify_archive_run", "outbox.verify_event_digests",
			// R-PV-2, R-PV-5: boundaries, readiness proofs, candidate progress
			"outbox.candidate_progress", "outbox.read_cutover_boundary", "outbox.read_readiness_proof",
			// issue 34: the catalogs
			"outbox.error_code_catalog", "outbox.receipt_kind_catalog"}, jcs...),
		// R-AK-10: the controlled-recovery functions only (no JCS functions, no table)
		"outbox_operator": {"outbox.preview_redelivery", "outbox.redeliver_quarantined",
			// R-PV-2: claim pauses (incident handling as well as the cutover runbook)
			"outbox.pause_destination_claims", "outbox.resume_destination_claims"},
		// R-OB-1, R-OB-4: the intake's two caller roles (EXECUTE only, no table)
		"outbox_intake":                {"intake.accept_observation", "intake.accept_observations", "intake.record_send_failures"},
		"outbox_observation_projector": {"intake.ack_observations", "intake.claim_observations"},
		// R-PV-1: shadow builds (the builder's receipts go through its bound consumer login)
		"outbox_projector": {"outbox.claim_rebuild_sources", "outbox.compare_projection_versions", "outbox.projection_digest", "outbox.start_shadow_build",
			// R-PV-2: freeze, cutover and the claim pauses around it
			"outbox.cutover_projection", "outbox.freeze_cutover_candidate", "outbox.pause_destination_claims", "outbox.resume_destination_claims"},
		// R-RT-1: the retention functions only (no JCS, no table)
		"outbox_retention": {"intake.purge_observation_payloads", "intake.verify_purge_run", "outbox.archive_events", "outbox.archive_integrity_problems", "outbox.release_legal_hold", "outbox.set_legal_hold", "outbox.verify_archive_run"},
	}
	// The mailbox pump's role: every mailbox function but register_source (SPEC §13), nothing else.
	want["outbox_mailbox"] = []string{"mailbox.acquire_pump", "mailbox.claim_backfill",
		"mailbox.claim_head", "mailbox.complete_head", "mailbox.fail_head", "mailbox.pipeline_status", "mailbox.record_backfill",
		"mailbox.record_discovery", "mailbox.released_holes", "mailbox.resolve_abandoned"}
	for role, fns := range want {
		var got []string
		rows, err := admin.Query(ctx, `SELECT DISTINCT n.nspname || '.' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake') AND p.proname !~ '^(_|tg_)' AND has_function_privilege($1, p.oid, 'EXECUTE')
			ORDER BY 1`, role)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var f string
			if err := rows.Scan(&f); err != nil {
				t.Fatal(err)
			}
			got = append(got, f)
		}
		sort.Strings(fns)
		if strings.Join(got, " ") != strings.Join(fns, " ") {
			t.Errorf("%s may execute\n  %v\nwant\n  %v", role, got, fns)
		}
	}
	// Private helpers and trigger functions are executable by the owner only.
	var leaked []string
	rows, err := admin.Query(ctx, `SELECT p.oid::regprocedure::text || ' by ' || r FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
		unnest($1::text[]) r
		WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake') AND p.proname ~ '^(_|tg_)' AND r <> 'outbox_owner' AND has_function_privilege(r, p.oid, 'EXECUTE')`,
		pgcall.KernelRoles)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		leaked = append(leaked, s)
	}
	if len(leaked) > 0 {
		t.Errorf("private functions executable by kernel roles: %v", leaked)
	}
}
