package kernel

// The DBA upgrade path (issue 13 §4, issue 23 item 2, issue 34 item 5, docs/migrations.md):
// released migrations are frozen SQL, never edited (sql/001..011 are release r1, sql/012..040
// release r2, pinned by sql/released.sha256), and a database installed at r1 or r2 (tern to
// version 11 or 40) and holding live state migrates to head with tern without losing a delivery
// or rewriting history, and ends with the catalog of a fresh install - function bodies, columns,
// indexes, constraints, triggers, views - its grants (docs/audit.txt, SPEC R-SEC-4) and its
// migration history.
//
// The baseline phase talks to the release's API with r1's SQL signatures (frozen here, and
// still accepted by r2), never through internal/pgcall, whose calls follow head.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/oceanway/pgoutbox/internal/audit"
	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// upReleased pins the released migrations (docs/migrations.md).
const upReleased = "../../sql/released.sha256"

// upR1Version is release r1's last migration: an r1 database is tern version 11.
const upR1Version = 11

// upR2Version is release r2's last migration: an r2 database is tern version 40.
const upR2Version = 40

// Rule 1 of docs/migrations.md: a released migration is never edited, and every migration is
// literal SQL written once. Releases r1 (001..011) and r2 (012..040) are pinned by sha256 in
// sql/released.sha256, in order; no migration file, released or not, contains a tern template.
func TestUpgradeReleasedMigrationsUnchanged(t *testing.T) {
	t.Parallel()
	f, err := os.Open(upReleased)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := ternmigrate.FindMigrations(migrate.FS())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Fields(line)
		if len(parts) != 2 {
			t.Fatalf("bad manifest line %q", line)
		}
		if n >= len(names) || names[n] != parts[1] {
			t.Fatalf("manifest line %d names %s: released migrations are pinned in order and are never removed or renamed", n+1, parts[1])
		}
		b, err := fs.ReadFile(migrate.FS(), parts[1])
		if err != nil {
			t.Fatalf("released migration %s: %v", parts[1], err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != parts[0] {
			t.Errorf("released migration %s was edited: released migrations are never edited; put the change in a new numbered migration (make migration NAME=..., docs/migrations.md)", parts[1])
		}
		n++
	}
	if n < upR2Version {
		t.Fatalf("manifest lists %d migrations, want at least releases r1 and r2 (%d)", n, upR2Version)
	}
	for _, name := range names {
		b, err := fs.ReadFile(migrate.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("{{")) {
			t.Errorf("migration %s contains a tern template ({{): a migration is literal SQL written once; write it with make migration NAME=... (docs/migrations.md)", name)
		}
	}
}

// upClaim claims with r1's claim_deliveries signature.
// upInstallR1 applies release r1 (the frozen migrations 001..011 of sql/) with tern to conn's
// empty database.
func upInstallR1(t *testing.T, conn *pgx.Conn) { t.Helper(); upInstall(t, conn, upR1Version) }

// upInstall applies the released migrations up to version (a release's last) with tern to conn's
// empty database.
func upInstall(t *testing.T, conn *pgx.Conn, version int) {
	t.Helper()
	ctx := context.Background()
	m, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrate.FS()); err != nil {
		t.Fatal(err)
	}
	if len(m.Migrations) < version {
		t.Fatalf("sql/ has %d migrations, want at least %d", len(m.Migrations), version)
	}
	if err := m.MigrateTo(ctx, int32(version)); err != nil {
		t.Fatalf("install the release at version %d: %v", version, err)
	}
}

func upClaim(t *testing.T, db *pgx.Conn, dest string, n int, lease string) []pgcall.ClaimedDelivery {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT destination, consumer_name, event_id::text, attempt_id::text, lease_token::text,
	       expected_receipt_type, expected_receipt_schema_version, required_projection_name, required_projection_version,
	       event_envelope::text, event_envelope_digest_algorithm_version, event_envelope_sha256, event_type, event_schema_version
	  FROM outbox.claim_deliveries($1::text, $2::text[], $3::int, $4::interval)`, "r1-worker", []string{dest}, n, lease)
	if err != nil {
		t.Fatalf("r1 claim: %v", err)
	}
	defer rows.Close()
	var out []pgcall.ClaimedDelivery
	for rows.Next() {
		var c pgcall.ClaimedDelivery
		var env string
		var pv *int32
		var sv int32
		if err := rows.Scan(&c.Destination, &c.ConsumerName, &c.EventID, &c.AttemptID, &c.LeaseToken,
			&c.ExpectedReceiptType, &sv, &c.RequiredProjectionName, &pv, &env,
			&c.EventEnvelopeDigestAlgorithmVersion, &c.EventEnvelopeSHA256, &c.EventType, &c.EventSchemaVersion); err != nil {
			t.Fatal(err)
		}
		c.ExpectedReceiptSchemaVersion = int(sv)
		if pv != nil {
			v := int(*pv)
			c.RequiredProjectionVersion = &v
		}
		c.EventEnvelope = json.RawMessage(env)
		out = append(out, c)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

func upExec(t *testing.T, db *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// upRows returns the rows of a query, each as its jsonb text, keyed by the first column.
func upRows(t *testing.T, db *pgx.Conn, sql string) map[string]string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

// upState is every row of the tables an upgrade must never lose or rewrite.
func upState(t *testing.T, db *pgx.Conn) map[string]map[string]string {
	return map[string]map[string]string{
		"events":       upRows(t, db, `SELECT event_id::text, to_jsonb(e)::text FROM outbox.outbox_events e`),
		"deliveries":   upRows(t, db, `SELECT destination || '/' || event_id, to_jsonb(d)::text FROM outbox.outbox_deliveries d`),
		"starts":       upRows(t, db, `SELECT attempt_id::text, to_jsonb(s)::text FROM outbox.outbox_delivery_attempt_starts s`),
		"finishes":     upRows(t, db, `SELECT attempt_id::text, to_jsonb(f)::text FROM outbox.outbox_delivery_attempt_finishes f`),
		"quarantine":   upRows(t, db, `SELECT md5(to_jsonb(q)::text), to_jsonb(q)::text FROM outbox.outbox_quarantine q`),
		"publications": upRows(t, db, `SELECT event_id::text, to_jsonb(p)::text FROM outbox.outbox_publications p`),
		"receipts":     upRows(t, db, `SELECT consumer_name || '/' || event_id, to_jsonb(r)::text FROM inbox.inbox_receipts r`),
	}
}

// upContained fails unless every row of before is still in after, with every column it had
// unchanged (columns added by later migrations are allowed). Quarantine rows have no stable key
// across releases: each must be contained in some row of after.
func upContained(t *testing.T, db *pgx.Conn, what string, before, after map[string]string, keyed bool) {
	t.Helper()
	ctx := context.Background()
	for k, b := range before {
		candidates := []string{after[k]}
		if !keyed {
			candidates = candidates[:0]
			for _, a := range after {
				candidates = append(candidates, a)
			}
		}
		ok := false
		for _, a := range candidates {
			if a == "" {
				continue
			}
			var contained bool
			if err := db.QueryRow(ctx, `SELECT $1::jsonb @> $2::jsonb`, a, b).Scan(&contained); err != nil {
				t.Fatal(err)
			}
			if contained {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("%s %s lost or rewritten by the upgrade:\n before %s\n after  %s", what, k, b, after[k])
		}
	}
}

// upSchema is a fingerprint of the kernel's schemas: functions (signature, body digest, config,
// security, volatility, owner, ACL, comment), columns, constraints, indexes, triggers, views,
// relation ACLs and comments, one sorted line each.
func upSchema(t *testing.T, db *pgx.Conn) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `
WITH ns AS (SELECT oid, nspname FROM pg_namespace WHERE nspname IN ('outbox', 'inbox', 'mailbox'))
SELECT 'function ' || p.oid::regprocedure::text || ' src=' || md5(p.prosrc) || ' cfg=' || coalesce(array_to_string(p.proconfig, ','), '')
       || ' secdef=' || p.prosecdef || ' vol=' || p.provolatile::text || ' owner=' || p.proowner::regrole::text
       || ' acl=' || coalesce(p.proacl::text, '') || ' ret=' || pg_get_function_result(p.oid)
       || ' args=' || pg_get_function_arguments(p.oid) || ' comment=' || md5(coalesce(obj_description(p.oid, 'pg_proc'), ''))
  FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
UNION ALL
SELECT 'relation ' || ns.nspname || '.' || c.relname || ' kind=' || c.relkind::text || ' owner=' || c.relowner::regrole::text
       || ' acl=' || coalesce(c.relacl::text, '') || ' comment=' || md5(coalesce(obj_description(c.oid, 'pg_class'), ''))
       || CASE WHEN c.relkind = 'v' THEN ' view=' || md5(pg_get_viewdef(c.oid)) ELSE '' END
  FROM pg_class c JOIN ns ON ns.oid = c.relnamespace WHERE c.relkind IN ('r', 'v', 'm', 'p', 'S')
UNION ALL
SELECT 'column ' || ns.nspname || '.' || c.relname || '#' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' identity=' || a.attidentity::text
       || ' acl=' || coalesce(a.attacl::text, '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN ns ON ns.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')
UNION ALL
SELECT 'constraint ' || ns.nspname || '.' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN ns ON ns.oid = c.relnamespace
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN ns ON ns.oid = c.relnamespace
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(g.oid)
  FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN ns ON ns.oid = c.relnamespace WHERE NOT g.tgisinternal
UNION ALL
SELECT 'schema ' || ns.nspname || ' owner=' || n.nspowner::regrole::text || ' acl=' || coalesce(n.nspacl::text, '')
  FROM pg_namespace n JOIN ns ON ns.oid = n.oid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	sort.Strings(out)
	return out
}

// Issue 13 §4, R-SEC-4: install r1, fill it with live state (pending, leased, acknowledged,
// retried, quarantined deliveries; published and unpublished events; receipts at a consumer),
// migrate to head with tern (same version table: 001..011 count as applied), drive every
// delivery to completion with head's API, and compare: nothing lost, no attempt history
// rewritten, schema/grants/triggers equal to a fresh install and to docs/audit.txt.
func TestUpgradeFromBaselineR1(t *testing.T) {
	t.Parallel()
	upgradeFromRelease(t, upR1Version)
}

// Issue 34 item 5: the same from release r2 (tern version 40, the first release whose migrations
// were rendered once from templates): its live state survives, and head equals a fresh install.
// Its API calls are the r1 signatures above, which r2 still accepts.
func TestUpgradeFromBaselineR2(t *testing.T) {
	t.Parallel()
	upgradeFromRelease(t, upR2Version)
}

// upgradeFromRelease installs the release ending at version, fills it, migrates it to head and
// compares it with a fresh install (the steps of TestUpgradeFromBaselineR1).
func upgradeFromRelease(t *testing.T, version int) {
	ctx := context.Background()
	dsn := kernelfix.FreshDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// 1. The baseline, applied with tern from the frozen files.
	upInstall(t, conn, version)

	// 2. Live state through r1's API, as the roles a real caller uses.
	testfix.ActivateReference(t, conn)
	upExec(t, conn, `SET ROLE outbox_registrar`)
	for _, d := range []string{kernelfix.DestMetering, kernelfix.DestCoord, kernelfix.DestCoreOps} {
		upExec(t, conn, `SELECT outbox.set_retry_policy($1, '10 milliseconds', 1, '10 milliseconds', 0, 3)`, d)
	}
	upExec(t, conn, `RESET ROLE`)
	upExec(t, conn, `SET ROLE outbox_producer`)
	for i := 0; i < 12; i++ {
		env := testfix.Envelope(kernelfix.Metering, "1", fmt.Sprintf("agg-up-%d", i), 1)
		b, _ := json.Marshal(env)
		upExec(t, conn, `SELECT outbox.append_event($1::json)`, string(b))
	}
	for i := 0; i < 4; i++ {
		env := testfix.Envelope(kernelfix.Resolution, "1", fmt.Sprintf("agg-res-%d", i), 1)
		b, _ := json.Marshal(env)
		upExec(t, conn, `SELECT outbox.append_event($1::json)`, string(b))
	}
	upExec(t, conn, `RESET ROLE`)
	upExec(t, conn, `SET ROLE outbox_dispatcher`)
	cs := upClaim(t, conn, kernelfix.DestMetering, 10, "1 minute")
	if len(cs) != 10 {
		t.Fatalf("r1 claim: %d, want 10", len(cs))
	}
	for i, c := range cs {
		switch {
		case i < 5: // acknowledged, with the receipt recorded at the consumer first
			ack, rc := kernelfix.ValidAck(t, c)
			upExec(t, conn, `RESET ROLE`)
			upExec(t, conn, `SET ROLE outbox_consumer`)
			upExec(t, conn, `SELECT outcome FROM inbox.record_receipt($1, '', 0, $2::json, $3::json)`, c.ConsumerName, string(c.EventEnvelope), string(rc))
			upExec(t, conn, `RESET ROLE`)
			upExec(t, conn, `SET ROLE outbox_dispatcher`)
			upExec(t, conn, `SELECT outbox.ack_delivery($1, $2::uuid, $3::uuid, $4::uuid, $5::json, $6::json)`,
				c.Destination, c.EventID, c.AttemptID, c.LeaseToken, string(ack), string(rc))
		case i < 7: // retried once, pending again
			upExec(t, conn, `SELECT outbox.retry_delivery($1, $2::uuid, $3::uuid, $4::uuid, 'consumer_timeout', NULL)`,
				c.Destination, c.EventID, c.AttemptID, c.LeaseToken)
		case i < 8: // quarantined
			upExec(t, conn, `SELECT outbox.quarantine_delivery($1, $2::uuid, $3::uuid, $4::uuid, 'unsupported_schema', 'unsupported_schema')`,
				c.Destination, c.EventID, c.AttemptID, c.LeaseToken)
		default: // left leased across the upgrade
		}
	}
	// Leases that expire during the upgrade: the other destinations, claimed for one second.
	short := upClaim(t, conn, kernelfix.DestCoreOps, 2, "1 second")
	short = append(short, upClaim(t, conn, kernelfix.DestCoord, 1, "1 second")...)
	if len(short) != 3 {
		t.Fatalf("r1 short claims: %d", len(short))
	}
	upExec(t, conn, `RESET ROLE`)
	before := upState(t, conn)
	upFrozenBefore := upRows(t, conn, `SELECT destination || '/' || event_id, jsonb_build_object('d', destination, 'e', event_id, 'v', delivery_set_version,
		'c', consumer_name, 't', expected_receipt_type, 's', expected_receipt_schema_version, 'pn', required_projection_name,
		'pv', required_projection_version, 'm', mandatory, 'a', aggregate_id, 'r', aggregate_revision, 'at', created_at)::text
		FROM outbox.outbox_deliveries`)
	if len(before["publications"]) != 5 || len(before["receipts"]) != 5 || len(before["quarantine"]) != 1 {
		t.Fatalf("baseline state: %d publications, %d receipts, %d quarantine rows", len(before["publications"]),
			len(before["receipts"]), len(before["quarantine"]))
	}

	// 3. Migrate to head with the real sql/ folder (what `make migrate` runs).
	if err := migrate.Up(ctx, conn); err != nil {
		t.Fatalf("upgrade r1 -> head: %v", err)
	}
	head, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := head.LoadMigrations(migrate.FS()); err != nil {
		t.Fatal(err)
	}
	if v, err := head.GetCurrentVersion(ctx); err != nil || int(v) != len(head.Migrations) || int(v) < version {
		t.Fatalf("version after upgrade %d (%v), want %d", v, err, len(head.Migrations))
	}
	// R-PV-1: the upgrade registered the projection version the active set targets, as active.
	if got := projectionfix.Versions(t, conn); got != "operations_timeline@1:active:unknown" {
		t.Fatalf("projection versions after the upgrade: %q, want operations_timeline@1:active:unknown", got)
	}
	upgraded := upState(t, conn)
	for what, rows := range before {
		upContained(t, conn, what, rows, upgraded[what], what != "quarantine")
	}

	// 4. Drive every delivery to completion with head's API (as the dispatcher).
	time.Sleep(1200 * time.Millisecond) // the one-second leases expire
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	cons := testdb.Conn(t, dsn, "outbox_consumer")
	if _, err := pgcall.RecoverExpiredLeases(ctx, disp, 1000); err != nil {
		t.Fatalf("recover expired leases after the upgrade: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		open := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status IN ('pending', 'leased')`)
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still open after the upgrade", open)
		}
		// the deliveries left leased (one-minute lease) across the upgrade: the r1 worker's fence
		// is still valid on head, and it acks them.
		for _, c := range cs[8:] {
			if kernelfix.Status(t, conn, c.Destination, c.EventID) == "leased" {
				ack, rc := kernelfix.ValidAck(t, c)
				if _, err := pgcall.RecordReceipt(ctx, cons, pgcall.RecordReceiptParams{ConsumerName: c.ConsumerName,
					EventEnvelope: c.EventEnvelope, Receipt: rc}); err != nil {
					t.Fatalf("record receipt after the upgrade: %v", err)
				}
				if _, err := pgcall.AckDelivery(ctx, disp, kernelfix.FenceOf(c), ack, rc); err != nil {
					t.Fatalf("ack of an r1 lease after the upgrade: %v", err)
				}
			}
		}
		got := kernelfix.Claim(t, disp, "head-worker", 100, time.Minute, kernelfix.DestMetering, kernelfix.DestCoord, kernelfix.DestCoreOps)
		for _, c := range got {
			ack, rc := kernelfix.ValidAck(t, c)
			if c.Destination == kernelfix.DestMetering {
				if _, err := pgcall.RecordReceipt(ctx, cons, pgcall.RecordReceiptParams{ConsumerName: c.ConsumerName,
					EventEnvelope: c.EventEnvelope, Receipt: rc}); err != nil {
					t.Fatalf("record receipt after the upgrade: %v", err)
				}
			}
			if _, err := pgcall.AckDelivery(ctx, disp, kernelfix.FenceOf(c), ack, rc); err != nil {
				t.Fatalf("ack after the upgrade: %v", err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}

	// 5. Nothing lost, no history rewritten, everything converged.
	final := upState(t, conn)
	for what, rows := range before {
		if what == "deliveries" {
			continue // a delivery's state moves on; its frozen columns must not
		}
		upContained(t, conn, what, rows, final[what], what != "quarantine")
	}
	frozen := `SELECT destination || '/' || event_id, jsonb_build_object('d', destination, 'e', event_id, 'v', delivery_set_version,
		'c', consumer_name, 't', expected_receipt_type, 's', expected_receipt_schema_version, 'pn', required_projection_name,
		'pv', required_projection_version, 'm', mandatory, 'a', aggregate_id, 'r', aggregate_revision, 'at', created_at)::text
		FROM outbox.outbox_deliveries`
	upContained(t, conn, "delivery (frozen columns)", upFrozenBefore, upRows(t, conn, frozen), true)
	if n := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status NOT IN ('acknowledged', 'quarantined')`); n != 0 {
		t.Fatalf("%d deliveries not terminal", n)
	}
	if n := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)
		AND NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries d WHERE d.event_id = e.event_id AND d.status <> 'acknowledged')`); n != 0 {
		t.Fatalf("%d fully acknowledged events without publication", n)
	}
	if n := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM outbox.outbox_events`); n != 16 {
		t.Fatalf("%d events after the upgrade, want 16", n)
	}
	if n := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts s
		WHERE (SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes f WHERE f.attempt_id = s.attempt_id) > 1`); n != 0 {
		t.Fatalf("%d attempts with more than one finish", n)
	}
	if n := kernelfix.QueryInt(t, conn, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'quarantined'`); n != 1 {
		t.Fatalf("%d quarantined deliveries, want the one of the baseline", n)
	}
	if got := len(final["receipts"]); got != 11 {
		t.Fatalf("%d receipts at the consumer, want 11 (5 before the upgrade, 6 after)", got)
	}

	// 6. Schema, grants and triggers: as a fresh install, and as docs/audit.txt says.
	fresh := testdb.Conn(t, testdb.URL(t), "")
	// the migration history: tern's version table says head, as on a fresh install
	if fv, uv := kernelfix.QueryInt(t, fresh, `SELECT version FROM `+migrate.VersionTable),
		kernelfix.QueryInt(t, conn, `SELECT version FROM `+migrate.VersionTable); fv != uv {
		t.Errorf("migration history after the upgrade: version %d, a fresh install has %d", uv, fv)
	}
	want, got := upSchema(t, fresh), upSchema(t, conn)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Errorf("schema after the upgrade differs from a fresh install (a migration that only works on a fresh database? docs/migrations.md):\n%s",
			lineDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	auditor := testdb.Conn(t, dsn, "outbox_auditor")
	var buf bytes.Buffer
	if err := audit.Write(ctx, auditor, &buf); err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(auditGolden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(golden, buf.Bytes()) {
		t.Errorf("grants/triggers after the upgrade differ from %s:\n%s", auditGolden, lineDiff(string(golden), buf.String()))
	}
}
