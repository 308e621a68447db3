package consumer

import (
	"context"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

var ckInboxTables = []string{"inbox.inbox_receipts", "inbox.inbox_revision_progress", "inbox.inbox_revision_gaps"}

// ckTry runs sql in a transaction that is always rolled back and returns its SQLSTATE ("" = ok).
func ckTry(t *testing.T, db pgcall.DBTX, sql string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = db.Exec(ctx, "ROLLBACK") }()
	_, err := db.Exec(ctx, sql)
	return consumerfix.SQLState(err)
}

// R-SEC-1, T-7: outbox_consumer executes the inbox functions and touches no inbox table
// (42501) nor private helper; the auditor reads the tables and calls only the audit sweep
// inbox.verify_receipt_digests, which the consumer may not call; PUBLIC has nothing. Every
// function is SECURITY DEFINER with a pinned search_path, owned by the owner.
func TestInboxGrants(t *testing.T) {
	t.Parallel()
	dsn := testdb.URL(t)
	consumer := testdb.Conn(t, dsn, "outbox_consumer")
	auditor := testdb.Conn(t, dsn, "outbox_auditor")
	admin := testdb.Conn(t, dsn, "")

	calls := map[string]string{
		"record_receipt":   `SELECT * FROM inbox.record_receipt('c', '', 0, NULL, NULL, NULL)`,
		"observe_revision": `SELECT inbox.observe_revision('c', '', 0, 'a', 1)`,
		"read_receipt":     `SELECT inbox.read_receipt('c', '', 0, gen_random_uuid(), repeat('0', 64))`,
		"accept_delivery":  `SELECT * FROM inbox.accept_delivery('c', '', 0, gen_random_uuid(), repeat('0', 64), NULL, NULL, NULL, NULL, NULL)`,
		"confirm_delivery": `SELECT inbox.confirm_delivery('c', '', 0, gen_random_uuid())`,
	}
	for name, sql := range calls {
		// The consumer passes the privilege check (record_receipt then rejects the NULLs: OB105).
		if st := ckTry(t, consumer, sql); st == "42501" {
			t.Errorf("outbox_consumer cannot execute %s", name)
		}
		if st := ckTry(t, auditor, sql); st != "42501" {
			t.Errorf("outbox_auditor executing %s: SQLSTATE %q, want 42501", name, st)
		}
	}
	const sweep = `SELECT * FROM inbox.verify_receipt_digests(10)`
	if st := ckTry(t, auditor, sweep); st != "" {
		t.Errorf("outbox_auditor executing verify_receipt_digests: SQLSTATE %q", st)
	}
	if st := ckTry(t, consumer, sweep); st != "42501" {
		t.Errorf("outbox_consumer executing verify_receipt_digests: SQLSTATE %q, want 42501", st)
	}
	for _, tbl := range ckInboxTables {
		for _, sql := range []string{
			"SELECT 1 FROM " + tbl + " LIMIT 0",
			"INSERT INTO " + tbl + " (consumer_name) SELECT consumer_name FROM " + tbl + " WHERE false",
			"UPDATE " + tbl + " SET consumer_name = consumer_name WHERE false",
			"DELETE FROM " + tbl + " WHERE false",
		} {
			if st := ckTry(t, consumer, sql); st != "42501" {
				t.Errorf("outbox_consumer: %s → SQLSTATE %q, want 42501", sql, st)
			}
		}
		if st := ckTry(t, auditor, "SELECT 1 FROM "+tbl+" LIMIT 0"); st != "" {
			t.Errorf("outbox_auditor cannot read %s: %s", tbl, st)
		}
		if st := ckTry(t, auditor, "DELETE FROM "+tbl+" WHERE false"); st != "42501" {
			t.Errorf("outbox_auditor deleting from %s: %q, want 42501", tbl, st)
		}
	}
	for _, helper := range []string{
		`SELECT inbox._inbox_check_key('c', '', 0)`,
		`SELECT inbox._inbox_default_ref('c', '', 0, gen_random_uuid())`,
		`SELECT inbox._inbox_receipt_kind('{}'::jsonb)`,
	} {
		if st := ckTry(t, consumer, helper); st != "42501" {
			t.Errorf("outbox_consumer: %s → %q, want 42501", helper, st)
		}
	}
	var loose, public, notOwner int
	if err := admin.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE p.prosecdef AND NOT EXISTS (SELECT 1 FROM unnest(coalesce(p.proconfig, '{}')) c WHERE c LIKE 'search_path=%')),
		       count(*) FILTER (WHERE has_function_privilege('public', p.oid, 'EXECUTE')),
		       count(*) FILTER (WHERE p.proowner <> 'outbox_owner'::regrole)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'inbox'`).Scan(&loose, &public, &notOwner); err != nil {
		t.Fatal(err)
	}
	if loose != 0 || public != 0 || notOwner != 0 {
		t.Fatalf("inbox functions: %d SECURITY DEFINER without search_path, %d executable by PUBLIC, %d not owned by outbox_owner", loose, public, notOwner)
	}
	var definer int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'inbox' AND p.prosecdef AND p.proname IN ('record_receipt', 'observe_revision', 'read_receipt', 'verify_receipt_digests', 'accept_delivery', 'confirm_delivery')`).Scan(&definer); err != nil {
		t.Fatal(err)
	}
	if definer != 6 {
		t.Fatalf("%d of the 6 inbox API functions are SECURITY DEFINER", definer)
	}
}

// R-SEC-3, R-RT-2: receipts are append-only even for the owner (OB202 on UPDATE, DELETE,
// TRUNCATE); progress never goes back nor disappears; a closed gap never changes.
func TestInboxImmutability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	consumer := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "operations_timeline", 1) // R-PV-1
	owner := testdb.Conn(t, dsn, "outbox_owner")
	env, _, doc := consumerfix.EnvelopeAndReceipt(t, nil)
	if _, err := consumerfix.Record(ctx, consumer, consumerfix.Metering, "", 0, env, doc.Receipt); err != nil {
		t.Fatal(err)
	}
	ckObserve(t, consumer, "operations_projector", "agg", 2) // gap expected 1
	ckObserve(t, consumer, "operations_projector", "agg", 1) // apply, closes it
	ckObserve(t, consumer, "operations_projector", "agg", 3) // apply

	for _, sql := range []string{
		`UPDATE inbox.inbox_receipts SET receipt_ref = 'other'`,
		`UPDATE inbox.inbox_receipts SET recorded_at = now()`,
		`DELETE FROM inbox.inbox_receipts`,
		`TRUNCATE inbox.inbox_receipts`,
		`UPDATE inbox.inbox_revision_progress SET last_revision = 1`,
		`UPDATE inbox.inbox_revision_progress SET aggregate_id = 'x', last_revision = 10`,
		`DELETE FROM inbox.inbox_revision_progress`,
		`TRUNCATE inbox.inbox_revision_progress`,
		`UPDATE inbox.inbox_revision_gaps SET seen_revision = seen_revision + 1`,
		`UPDATE inbox.inbox_revision_gaps SET closed_at = NULL, closed_by_revision = NULL`,
		`DELETE FROM inbox.inbox_revision_gaps`,
		`TRUNCATE inbox.inbox_revision_gaps`,
	} {
		if st := ckTry(t, owner, sql); st != "OB202" {
			t.Errorf("owner: %s → SQLSTATE %q, want OB202", sql, st)
		}
	}
	// Progress may move forward (that is what observe_revision does, as the owner).
	if st := ckTry(t, owner, `UPDATE inbox.inbox_revision_progress SET last_revision = last_revision + 1`); st != "" {
		t.Errorf("forward progress refused: %s", st)
	}
}
