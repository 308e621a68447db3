// Package kernelfix holds fixtures over the kernel's SQL API that several test rooms under tests/
// share (tests/kernel and the readmodel, projection, consumer, mailbox and dispatcher tests): a
// database with the reference release active, append, claim, ack with valid receipts, delivery
// state, retention and release fixtures. Shared helpers of the dispatch tests (claim_deliveries,
// fencing, ack, publication, retry, quarantine, ordering, concurrency).
package kernelfix

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

// Reference event types (SPEC §3.4) and the destinations they go to (Dest*), the lease and
// worker names of the dispatch tests, and SQLSTATE 22023 (invalid parameter value).
const (
	Metering      = "execution.attempt-eligibility.finalized@1"                // metering_input_processor
	Closed        = "execution.run-finalization.closed@1"                      // billing_finalization_coordinator
	Settlement    = "metering.settlement-input.current-changed@1"              // billing_settlement_catch_up
	RunCreated    = "run.created@2.0"                                          // core_operations (schema 2.0)
	Resolution    = "billing.finalization-reconciliation-resolution.applied@1" // core_operations + billing_finalization_coordinator
	DestMetering  = "metering_input_processor"
	DestCoord     = "billing_finalization_coordinator"
	DestCatchUp   = "billing_settlement_catch_up"
	DestCoreOps   = "core_operations"
	LongLease     = 5 * time.Minute
	WorkerA       = "worker-a"
	WorkerB       = "worker-b"
	SQLStateParam = "22023"
)

// Bundle is one test database with the reference release active and a dispatcher connection.
type Bundle struct {
	Dsn   string
	Admin *pgx.Conn // superuser: fixtures and assertions only
	Disp  *pgx.Conn // SET ROLE outbox_dispatcher: every dispatch call
}

// Setup gives a fresh database with the reference release active.
func Setup(t *testing.T) Bundle {
	t.Helper()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	return Bundle{Dsn: dsn, Admin: admin, Disp: testdb.Conn(t, dsn, "outbox_dispatcher")}
}

// Append appends one reference event (as outbox_producer) and returns its id.
func Append(t *testing.T, db pgcall.DBTX, eventType, aggregateID string, revision int64) string {
	t.Helper()
	sv := "1"
	if eventType == RunCreated || eventType == "wallet.reserved@2.0" {
		sv = "2.0"
	}
	return testfix.Append(t, db, testfix.Envelope(eventType, sv, aggregateID, revision))
}

// Claim claims up to batch deliveries of dests for worker (outbox.claim_deliveries).
func Claim(t *testing.T, db pgcall.DBTX, worker string, batch int, lease time.Duration, dests ...string) []pgcall.ClaimedDelivery {
	t.Helper()
	cs, err := pgcall.ClaimDeliveries(context.Background(), db, pgcall.ClaimParams{
		Worker: worker, Destinations: dests, BatchSize: batch, Lease: lease})
	if err != nil {
		t.Fatalf("claim %v: %v", dests, err)
	}
	return cs
}

// ClaimOne claims exactly one delivery of dest; the test fails otherwise.
func ClaimOne(t *testing.T, db pgcall.DBTX, worker string, lease time.Duration, dest string) pgcall.ClaimedDelivery {
	t.Helper()
	cs := Claim(t, db, worker, 1, lease, dest)
	if len(cs) != 1 {
		t.Fatalf("claim %s: got %d deliveries, want 1", dest, len(cs))
	}
	return cs[0]
}

// Row is the complete delivery row as JSON text, to compare before/after a rejected call.
func Row(t *testing.T, db pgcall.DBTX, dest, eventID string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(),
		`SELECT to_jsonb(d)::text FROM outbox.outbox_deliveries d WHERE destination = $1 AND event_id = $2::uuid`,
		dest, eventID).Scan(&s); err != nil {
		t.Fatalf("delivery row %s/%s: %v", dest, eventID, err)
	}
	return s
}

// Status is the state of the delivery of eventID to dest.
func Status(t *testing.T, db pgcall.DBTX, dest, eventID string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(),
		`SELECT status FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`,
		dest, eventID).Scan(&s); err != nil {
		t.Fatalf("delivery status %s/%s: %v", dest, eventID, err)
	}
	return s
}

// QueryInt runs a query returning one integer on db.
func QueryInt(t *testing.T, db pgcall.DBTX, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Finishes counts the finishes of an attempt.
func Finishes(t *testing.T, db pgcall.DBTX, attemptID string) int {
	t.Helper()
	return QueryInt(t, db, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid`, attemptID)
}

// Finish returns outcome and retry_disposition of an attempt's finish.
func Finish(t *testing.T, db pgcall.DBTX, attemptID string) (outcome, disposition string) {
	t.Helper()
	if err := db.QueryRow(context.Background(),
		`SELECT outcome, retry_disposition FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid`,
		attemptID).Scan(&outcome, &disposition); err != nil {
		t.Fatalf("finish of attempt %s: %v", attemptID, err)
	}
	return outcome, disposition
}

// WantState fails unless err carries SQLSTATE code.
func WantState(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want SQLSTATE %s, got success", code)
	}
	if got := pgcall.SQLState(err); got != code {
		t.Fatalf("want SQLSTATE %s, got %q: %v", code, got, err)
	}
}

// WantFencing fails unless err is a fencing rejection (OB001, ErrFencingRejected).
func WantFencing(t *testing.T, err error) {
	t.Helper()
	WantState(t, err, "OB001")
	if !errors.Is(err, pgcall.ErrFencingRejected) {
		t.Fatalf("want errors.Is(err, ErrFencingRejected): %v", err)
	}
}

// Ack acks c with a valid ack and receipt and returns the publication result.
func Ack(t *testing.T, db pgcall.DBTX, c pgcall.ClaimedDelivery) string {
	t.Helper()
	ack, rc := ValidAck(t, c)
	res, err := pgcall.AckDelivery(context.Background(), db, FenceOf(c), ack, rc)
	if err != nil {
		t.Fatalf("ack %s/%s: %v", c.Destination, c.EventID, err)
	}
	return res
}

// DBNow is the database's clock_timestamp().
func DBNow(t *testing.T, db pgcall.DBTX) time.Time {
	t.Helper()
	var ts time.Time
	if err := db.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&ts); err != nil {
		t.Fatal(err)
	}
	return ts
}
