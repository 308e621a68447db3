package tests

// Shared helpers of the dispatch tests (claim_deliveries, fencing, ack, publication, retry,
// quarantine, ordering, concurrency). Prefixed dx to stay clear of other test files.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// Reference event types (SPEC §3.4) and the destinations they go to.
const (
	dxMetering      = "execution.attempt-eligibility.finalized@1"                // metering_input_processor
	dxClosed        = "execution.run-finalization.closed@1"                      // billing_finalization_coordinator
	dxSettlement    = "metering.settlement-input.current-changed@1"              // billing_settlement_catch_up
	dxRunCreated    = "run.created@2.0"                                          // core_operations (schema 2.0)
	dxResolution    = "billing.finalization-reconciliation-resolution.applied@1" // core_operations + billing_finalization_coordinator
	dxDestMetering  = "metering_input_processor"
	dxDestCoord     = "billing_finalization_coordinator"
	dxDestCatchUp   = "billing_settlement_catch_up"
	dxDestCoreOps   = "core_operations"
	dxLongLease     = 5 * time.Minute
	dxWorkerA       = "worker-a"
	dxWorkerB       = "worker-b"
	dxSQLStateParam = "22023"
)

type dxBundle struct {
	dsn   string
	admin *pgx.Conn // superuser: fixtures and assertions only
	disp  *pgx.Conn // SET ROLE outbox_dispatcher: every dispatch call
}

// dxSetup gives a fresh database with the reference release active.
func dxSetup(t *testing.T) dxBundle {
	t.Helper()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	return dxBundle{dsn: dsn, admin: admin, disp: testdb.Conn(t, dsn, "outbox_dispatcher")}
}

// dxAppend appends one reference event (as outbox_producer) and returns its id.
func dxAppend(t *testing.T, db pgcall.DBTX, eventType, aggregateID string, revision int64) string {
	t.Helper()
	sv := "1"
	if eventType == dxRunCreated || eventType == "wallet.reserved@2.0" {
		sv = "2.0"
	}
	return testfix.Append(t, db, testfix.Envelope(eventType, sv, aggregateID, revision))
}

func dxClaim(t *testing.T, db pgcall.DBTX, worker string, batch int, lease time.Duration, dests ...string) []pgcall.ClaimedDelivery {
	t.Helper()
	cs, err := pgcall.ClaimDeliveries(context.Background(), db, pgcall.ClaimParams{
		Worker: worker, Destinations: dests, BatchSize: batch, Lease: lease})
	if err != nil {
		t.Fatalf("claim %v: %v", dests, err)
	}
	return cs
}

func dxClaimOne(t *testing.T, db pgcall.DBTX, worker string, lease time.Duration, dest string) pgcall.ClaimedDelivery {
	t.Helper()
	cs := dxClaim(t, db, worker, 1, lease, dest)
	if len(cs) != 1 {
		t.Fatalf("claim %s: got %d deliveries, want 1", dest, len(cs))
	}
	return cs[0]
}

// dxRow is the complete delivery row as JSON text, to compare before/after a rejected call.
func dxRow(t *testing.T, db pgcall.DBTX, dest, eventID string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(),
		`SELECT to_jsonb(d)::text FROM outbox.outbox_deliveries d WHERE destination = $1 AND event_id = $2::uuid`,
		dest, eventID).Scan(&s); err != nil {
		t.Fatalf("delivery row %s/%s: %v", dest, eventID, err)
	}
	return s
}

func dxStatus(t *testing.T, db pgcall.DBTX, dest, eventID string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(),
		`SELECT status FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`,
		dest, eventID).Scan(&s); err != nil {
		t.Fatalf("delivery status %s/%s: %v", dest, eventID, err)
	}
	return s
}

func dxInt(t *testing.T, db pgcall.DBTX, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// dxFinishes counts the finishes of an attempt.
func dxFinishes(t *testing.T, db pgcall.DBTX, attemptID string) int {
	t.Helper()
	return dxInt(t, db, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid`, attemptID)
}

// dxFinish returns outcome and retry_disposition of an attempt's finish.
func dxFinish(t *testing.T, db pgcall.DBTX, attemptID string) (outcome, disposition string) {
	t.Helper()
	if err := db.QueryRow(context.Background(),
		`SELECT outcome, retry_disposition FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid`,
		attemptID).Scan(&outcome, &disposition); err != nil {
		t.Fatalf("finish of attempt %s: %v", attemptID, err)
	}
	return outcome, disposition
}

// dxWantState fails unless err carries SQLSTATE code.
func dxWantState(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want SQLSTATE %s, got success", code)
	}
	if got := pgcall.SQLState(err); got != code {
		t.Fatalf("want SQLSTATE %s, got %q: %v", code, got, err)
	}
}

// dxWantFencing fails unless err is a fencing rejection (OB001, ErrFencingRejected).
func dxWantFencing(t *testing.T, err error) {
	t.Helper()
	dxWantState(t, err, "OB001")
	if !errors.Is(err, pgcall.ErrFencingRejected) {
		t.Fatalf("want errors.Is(err, ErrFencingRejected): %v", err)
	}
}

// dxAck acks c with a valid ack and receipt and returns the publication result.
func dxAck(t *testing.T, db pgcall.DBTX, c pgcall.ClaimedDelivery) string {
	t.Helper()
	ack, rc := validAck(t, c)
	res, err := pgcall.AckDelivery(context.Background(), db, fenceOf(c), ack, rc)
	if err != nil {
		t.Fatalf("ack %s/%s: %v", c.Destination, c.EventID, err)
	}
	return res
}

// dxDBNow is the database's clock_timestamp().
func dxDBNow(t *testing.T, db pgcall.DBTX) time.Time {
	t.Helper()
	var ts time.Time
	if err := db.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&ts); err != nil {
		t.Fatal(err)
	}
	return ts
}
