package kernel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-AK-10, docs/migrations.md: the recovery migration applied to a database that already holds
// a quarantined delivery (quarantined by release r1, so with the old one-row-per-delivery
// quarantine table). After the upgrade the old quarantine row has its id, the delivery its
// budget base 0, and the operator can re-deliver it: attempt 2, same digest, acknowledged,
// published. The migration is found by its name (…_recovery.sql), never by number.
func TestRecoveryMigrationUpgradesExistingQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := kernelfix.FreshDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	// The state before: release r1 (the frozen migrations sql/001..011), whose quarantine table
	// has one row per delivery, with a delivery quarantined (consumer_rejected) on its first
	// attempt through r1's own API. (Installing "the version before the recovery migration" from
	// this checkout's files would run today's function files against yesterday's tables.)
	upInstallR1(t, conn)
	testfix.ActivateReference(t, conn)
	upExec(t, conn, `SET ROLE outbox_producer`)
	env := testfix.Envelope(kernelfix.Metering, "1", "agg-upgrade", 1)
	ev := env["eventId"].(string)
	envJSON, _ := json.Marshal(env)
	upExec(t, conn, `SELECT outbox.append_event($1::json)`, string(envJSON))
	upExec(t, conn, `RESET ROLE`)
	upExec(t, conn, `SET ROLE outbox_dispatcher`)
	var old pgcall.ClaimedDelivery
	for _, c := range upClaim(t, conn, kernelfix.DestMetering, 10, "1 minute") {
		if c.EventID == ev {
			old = c
		}
	}
	if old.EventID == "" {
		t.Fatal("r1 claim did not return the event")
	}
	upExec(t, conn, `SELECT outbox.quarantine_delivery($1, $2::uuid, $3::uuid, $4::uuid, 'consumer_rejected', 'consumer_rejected')`,
		old.Destination, old.EventID, old.AttemptID, old.LeaseToken)
	upExec(t, conn, `RESET ROLE`)

	m, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrate.FS()); err != nil {
		t.Fatal(err)
	}
	recovery := false
	for _, mg := range m.Migrations {
		recovery = recovery || strings.HasSuffix(mg.Name, "_recovery.sql")
	}
	if !recovery {
		t.Fatal("no *_recovery.sql migration")
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
	if _, err := pgcall.RedeliverQuarantined(ctx, op, pgcall.RedeliverParams{Destination: kernelfix.DestMetering, EventID: ev,
		CaseID: "UPG-1", Reason: "quarantined before the upgrade", IdempotencyKey: "upg-1"}); err != nil {
		t.Fatalf("redeliver after upgrade: %v", err)
	}
	c := kernelfix.ClaimOne(t, disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if c.EventID != ev || c.AttemptNumber != 2 {
		t.Fatalf("claim after upgrade %+v", c)
	}
	if res := kernelfix.Ack(t, disp, c); res != "complete" {
		t.Fatalf("ack: %s", res)
	}
	if p := dxPublishedAt(t, conn, ev); p == nil {
		t.Fatal("not published")
	}
}
