package tests

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/testdb"
	"github.com/oceanway/pgoutbox/internal/testfix"
)

// R-AK-10, docs/migrations.md: the recovery migration applied to a database that already holds
// a quarantined delivery (quarantined before the migration, so with the old one-row-per-delivery
// quarantine table). After the upgrade the old quarantine row has its id, the delivery its
// budget base 0, and the operator can re-deliver it: attempt 2, same digest, acknowledged,
// published. The migration is found by its name (…_recovery.sql), never by number.
func TestRecoveryMigrationUpgradesExistingQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		t.Fatal("DATABASE_URL is not set: run the tests with `make test` (it starts the local cluster)")
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	name := "pgoutbox_rc_upgrade_" + strings.ReplaceAll(testfix.NewUUID()[:8], "-", "")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = migrate.DropDatabase(context.Background(), server, name) })
	dsn := migrate.WithDatabase(server, name)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	m, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrate.FS()); err != nil {
		t.Fatal(err)
	}
	var recovery int32
	for _, mg := range m.Migrations {
		if strings.HasSuffix(mg.Name, "_recovery.sql") {
			recovery = mg.Sequence
		}
	}
	if recovery == 0 {
		t.Fatal("no *_recovery.sql migration")
	}
	if err := m.MigrateTo(ctx, recovery-1); err != nil {
		t.Fatalf("migrate to the version before the recovery migration: %v", err)
	}

	// The state before: an event whose delivery was quarantined (consumer_rejected) on its first
	// attempt, written as the old functions wrote it (triggers off: the functions of this
	// checkout already expect the recovery migration's objects).
	testfix.ActivateReference(t, conn)
	ev := testfix.Append(t, conn, testfix.Envelope(dxMetering, "1", "agg-upgrade", 1))
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`SET LOCAL session_replication_role = replica`,
		`WITH s AS (INSERT INTO outbox.outbox_delivery_attempt_starts (attempt_id, destination, event_id, attempt_number, lease_token, worker)
		            VALUES (gen_random_uuid(), $1, $2::uuid, 1, gen_random_uuid(), 'old-worker') RETURNING attempt_id),
		      f AS (INSERT INTO outbox.outbox_delivery_attempt_finishes (attempt_id, outcome, retry_disposition, normalized_error_code)
		            SELECT attempt_id, 'non_retryable', 'quarantined', 'consumer_rejected' FROM s RETURNING attempt_id),
		      d AS (UPDATE outbox.outbox_deliveries SET status = 'quarantined', attempt_count = 1, current_attempt_id = (SELECT attempt_id FROM s),
		                   last_attempt_at = now(), last_error_code = 'consumer_rejected'
		             WHERE destination = $1 AND event_id = $2::uuid RETURNING event_id)
		 INSERT INTO outbox.outbox_quarantine (destination, event_id, attempt_id, reason, event_envelope_digest_algorithm_version, event_envelope_sha256)
		 SELECT $1, e.event_id, (SELECT attempt_id FROM f), 'consumer_rejected', e.event_envelope_digest_algorithm_version, e.event_envelope_sha256
		   FROM outbox.outbox_events e WHERE e.event_id = (SELECT event_id FROM d)`,
	} {
		args := []any{}
		if strings.Contains(s, "$1") {
			args = []any{dxDestMetering, ev}
		}
		if _, err := tx.Exec(ctx, s, args...); err != nil {
			t.Fatalf("old state: %v", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	if err := m.Migrate(ctx); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	var qid *int64
	var base int
	if err := conn.QueryRow(ctx, `SELECT q.quarantine_id, d.recovery_attempt_base FROM outbox.outbox_quarantine q
		JOIN outbox.outbox_deliveries d USING (destination, event_id) WHERE q.event_id = $1::uuid`, ev).Scan(&qid, &base); err != nil || qid == nil || base != 0 {
		t.Fatalf("after upgrade: quarantine_id %v base %d %v", qid, base, err)
	}
	op := testdb.Conn(t, dsn, "outbox_operator")
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	if _, err := pgcall.RedeliverQuarantined(ctx, op, pgcall.RedeliverParams{Destination: dxDestMetering, EventID: ev,
		CaseID: "UPG-1", Reason: "quarantined before the upgrade", IdempotencyKey: "upg-1"}); err != nil {
		t.Fatalf("redeliver after upgrade: %v", err)
	}
	c := dxClaimOne(t, disp, dxWorkerA, time.Minute, dxDestMetering)
	if c.EventID != ev || c.AttemptNumber != 2 {
		t.Fatalf("claim after upgrade %+v", c)
	}
	if res := dxAck(t, disp, c); res != "complete" {
		t.Fatalf("ack: %s", res)
	}
	if p := dxPublishedAt(t, conn, ev); p == nil {
		t.Fatal("not published")
	}
}
