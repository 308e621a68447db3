package kernel

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-CL-1, R-CL-5, D-3: a claim returns the full row of SPEC §13 (frozen receipt expectations,
// projection target, the canonical envelope rebuilt from stored columns and its digest), leases
// the delivery and appends the attempt start in the same transaction.
func TestClaimReturnsFullRowAndAppendsStart(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	env := testfix.Envelope(kernelfix.RunCreated, "2.0", "run-1", 1)
	eventID := testfix.Append(t, b.Admin, env)

	before := kernelfix.DBNow(t, b.Admin)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, 30*time.Second, kernelfix.DestCoreOps)
	after := kernelfix.DBNow(t, b.Admin)

	if c.Destination != kernelfix.DestCoreOps || c.ConsumerName != "operations_projector" || c.EventID != eventID {
		t.Fatalf("claimed %s/%s/%s", c.Destination, c.ConsumerName, c.EventID)
	}
	if c.AttemptNumber != 1 || c.ExpectedReceiptType != "OperationsProjectionAppliedReceipt" || c.ExpectedReceiptSchemaVersion != 1 {
		t.Fatalf("attempt %d receipt %s@%d", c.AttemptNumber, c.ExpectedReceiptType, c.ExpectedReceiptSchemaVersion)
	}
	if c.RequiredProjectionName == nil || *c.RequiredProjectionName != "operations_timeline" ||
		c.RequiredProjectionVersion == nil || *c.RequiredProjectionVersion != 1 {
		t.Fatalf("projection target %v %v", c.RequiredProjectionName, c.RequiredProjectionVersion)
	}
	if c.EventType != kernelfix.RunCreated || c.EventSchemaVersion != "2.0" || c.EventEnvelopeDigestAlgorithmVersion != "jcs-sha256-v1" {
		t.Fatalf("event %s@%s alg %s", c.EventType, c.EventSchemaVersion, c.EventEnvelopeDigestAlgorithmVersion)
	}
	if c.AttemptID == "" || c.LeaseToken == "" || c.AttemptID == c.LeaseToken {
		t.Fatalf("attempt %q token %q", c.AttemptID, c.LeaseToken)
	}
	// lease_expires_at = claim time + 30 s
	if c.LeaseExpiresAt.Before(before.Add(30*time.Second)) || c.LeaseExpiresAt.After(after.Add(30*time.Second)) {
		t.Fatalf("lease expires %v, want within [%v, %v] + 30s", c.LeaseExpiresAt, before, after)
	}
	// The envelope is the appended one (D-3) and its Go digest is the stored digest.
	want, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	wantC, err := canon.Canonicalize(want)
	if err != nil {
		t.Fatal(err)
	}
	gotC, err := canon.Canonicalize(c.EventEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if string(gotC) != string(wantC) {
		t.Fatalf("envelope\n got %s\nwant %s", gotC, wantC)
	}
	sha, err := canon.SHA256Hex(c.EventEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if sha != c.EventEnvelopeSHA256 {
		t.Fatalf("envelope digest %s, claimed row says %s", sha, c.EventEnvelopeSHA256)
	}

	// The delivery row is leased to the worker with the returned token and attempt.
	var status, owner, token, attempt string
	var count int
	var expires time.Time
	if err := b.Admin.QueryRow(ctx, `SELECT status, lease_owner, lease_token::text, current_attempt_id::text, attempt_count, lease_expires_at
		FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`, c.Destination, c.EventID).
		Scan(&status, &owner, &token, &attempt, &count, &expires); err != nil {
		t.Fatal(err)
	}
	if status != "leased" || owner != kernelfix.WorkerA || token != c.LeaseToken || attempt != c.AttemptID || count != 1 || !expires.Equal(c.LeaseExpiresAt) {
		t.Fatalf("row %s %s %s %s %d %v", status, owner, token, attempt, count, expires)
	}
	// One attempt start with the same token, worker and number; no finish.
	var sToken, sWorker string
	var sNumber int
	if err := b.Admin.QueryRow(ctx, `SELECT lease_token::text, worker, attempt_number FROM outbox.outbox_delivery_attempt_starts
		WHERE attempt_id = $1::uuid AND destination = $2 AND event_id = $3::uuid`, c.AttemptID, c.Destination, c.EventID).
		Scan(&sToken, &sWorker, &sNumber); err != nil {
		t.Fatalf("attempt start: %v", err)
	}
	if sToken != c.LeaseToken || sWorker != kernelfix.WorkerA || sNumber != 1 {
		t.Fatalf("start %s %s %d", sToken, sWorker, sNumber)
	}
	if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 0 {
		t.Fatalf("%d finishes for a fresh attempt", n)
	}
	// A leased delivery is not claimable again.
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerB, 10, time.Minute, kernelfix.DestCoreOps); len(cs) != 0 {
		t.Fatalf("leased delivery claimed again: %+v", cs)
	}
}

// R-CL-1, D-5: argument bounds are enforced with 22023 and nothing is claimed.
func TestClaimArgumentValidation(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	good := pgcall.ClaimParams{Worker: kernelfix.WorkerA, Destinations: []string{kernelfix.DestMetering}, BatchSize: 10, Lease: time.Minute}
	cases := map[string]func(p *pgcall.ClaimParams){
		"batch zero":          func(p *pgcall.ClaimParams) { p.BatchSize = 0 },
		"batch too large":     func(p *pgcall.ClaimParams) { p.BatchSize = 1001 },
		"lease too short":     func(p *pgcall.ClaimParams) { p.Lease = 999 * time.Millisecond },
		"lease too long":      func(p *pgcall.ClaimParams) { p.Lease = time.Hour + time.Second },
		"no destinations":     func(p *pgcall.ClaimParams) { p.Destinations = nil },
		"empty destinations":  func(p *pgcall.ClaimParams) { p.Destinations = []string{} },
		"unknown destination": func(p *pgcall.ClaimParams) { p.Destinations = []string{kernelfix.DestMetering, "no_such_destination"} },
		"worker not literal":  func(p *pgcall.ClaimParams) { p.Worker = "Worker A" },
		"worker empty":        func(p *pgcall.ClaimParams) { p.Worker = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			p := good
			mutate(&p)
			_, err := pgcall.ClaimDeliveries(ctx, b.Disp, p)
			kernelfix.WantState(t, err, kernelfix.SQLStateParam)
		})
	}
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID); s != "pending" {
		t.Fatalf("status %s after rejected claims", s)
	}
	// Bounds themselves are accepted.
	p := good
	p.Lease, p.BatchSize = time.Second, 1000
	if cs, err := pgcall.ClaimDeliveries(ctx, b.Disp, p); err != nil || len(cs) != 1 {
		t.Fatalf("claim at the bounds: %v %v", cs, err)
	}
}

// R-CL-1: claim order is available_at, created_at, event_id - across batches and within one.
func TestClaimOrdering(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	// e1, e2: separate transactions (created_at e1 < e2); e3, e4: one transaction (same created_at).
	e1 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	e2 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-2", 1)
	tx, err := b.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e3 := kernelfix.Append(t, tx, kernelfix.Metering, "agg-3", 1)
	e4 := kernelfix.Append(t, tx, kernelfix.Metering, "agg-4", 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e5 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-5", 1)
	// available_at: e5 oldest; e1..e4 share one; so the order is e5, then by created_at (e1, e2),
	// then e3/e4 by event_id.
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() - interval '1 hour'
		WHERE event_id = ANY($1::uuid[])`, []string{e1, e2, e3, e4}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() - interval '2 hours'
		WHERE event_id = $1::uuid`, e5); err != nil {
		t.Fatal(err)
	}
	lo, hi := e3, e4
	if hi < lo {
		lo, hi = hi, lo
	}
	want := []string{e5, e1, e2, lo, hi}

	// Within one batch (read the order without claiming: roll back).
	tx, err = b.Disp.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs := kernelfix.Claim(t, tx, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestMetering)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(want) {
		t.Fatalf("claimed %d, want %d", len(cs), len(want))
	}
	for i, c := range cs {
		if c.EventID != want[i] {
			t.Fatalf("batch position %d: %s, want %s (order %v)", i, c.EventID, want[i], want)
		}
	}
	// One at a time.
	for i, w := range want {
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
		if c.EventID != w {
			t.Fatalf("claim %d: %s, want %s", i, c.EventID, w)
		}
	}
}

// R-CL-2: only pending rows with available_at <= now are claimable; terminal rows never are;
// several destinations are claimed in one call, merged in claim order.
func TestClaimEligibility(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	future := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-f", 1)
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() + interval '1 hour' WHERE event_id = $1::uuid`, future); err != nil {
		t.Fatal(err)
	}
	done := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-d", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if c.EventID != done {
		t.Fatalf("claimed %s, want %s (the future one is not available)", c.EventID, done)
	}
	if res := kernelfix.Ack(t, b.Disp, c); res != "complete" {
		t.Fatalf("ack: %s", res)
	}
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestMetering); len(cs) != 0 {
		t.Fatalf("claimed %d rows; future and acknowledged rows must not be claimable", len(cs))
	}

	closed := kernelfix.Append(t, b.Admin, kernelfix.Closed, "agg-c", 1)
	settle := kernelfix.Append(t, b.Admin, kernelfix.Settlement, "agg-s", 1)
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestCoord, kernelfix.DestCatchUp, kernelfix.DestMetering, kernelfix.DestCoord)
	if len(cs) != 2 || cs[0].EventID != closed || cs[0].Destination != kernelfix.DestCoord || cs[1].EventID != settle || cs[1].Destination != kernelfix.DestCatchUp {
		t.Fatalf("multi-destination claim: %+v", cs)
	}
	// Batch size limits the merged result across destinations.
	kernelfix.Append(t, b.Admin, kernelfix.Closed, "agg-c2", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Settlement, "agg-s2", 1)
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 1, time.Minute, kernelfix.DestCoord, kernelfix.DestCatchUp); len(cs) != 1 {
		t.Fatalf("batch 1 over two destinations returned %d rows", len(cs))
	}
}

// R-CL-1: FOR UPDATE SKIP LOCKED - a claim running concurrently with an uncommitted claim of
// another worker skips that worker's rows instead of waiting or taking them.
func TestClaimSkipsLockedRows(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-2", 1)
	other := testdb.Conn(t, b.Dsn, "outbox_dispatcher")

	tx, err := b.Disp.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	first := kernelfix.ClaimOne(t, tx, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)

	// The second connection must not block on the first one's row lock.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cs, err := pgcall.ClaimDeliveries(cctx, other, pgcall.ClaimParams{Worker: kernelfix.WorkerB, Destinations: []string{kernelfix.DestMetering}, BatchSize: 10, Lease: time.Minute})
	if err != nil {
		t.Fatalf("concurrent claim: %v", err)
	}
	if len(cs) != 1 || cs[0].EventID == first.EventID {
		t.Fatalf("concurrent claim got %+v; want exactly the other delivery", cs)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts`); n != 2 {
		t.Fatalf("%d attempt starts, want 2", n)
	}
}

// R-SEC-1: the dispatcher has no table privileges; it acts only through the functions, and
// the dispatch functions are not executable by other kernel roles.
func TestDispatchGrants(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	var n int
	if err := b.Admin.QueryRow(ctx, `SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = 'outbox_dispatcher'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("outbox_dispatcher holds %d table privileges, want none", n)
	}
	if _, err := b.Disp.Exec(ctx, `SELECT 1 FROM outbox.outbox_deliveries LIMIT 1`); pgcall.SQLState(err) != "42501" {
		t.Fatalf("dispatcher SELECT on deliveries: %v, want 42501", err)
	}
	for _, role := range []string{"outbox_producer", "outbox_registrar", "outbox_consumer", "outbox_auditor"} {
		conn := testdb.Conn(t, b.Dsn, role)
		_, err := pgcall.RecoverExpiredLeases(ctx, conn, 10)
		kernelfix.WantState(t, err, "42501")
		_, err = pgcall.ClaimDeliveries(ctx, conn, pgcall.ClaimParams{Worker: "w", Destinations: []string{kernelfix.DestMetering}, BatchSize: 1, Lease: time.Minute})
		kernelfix.WantState(t, err, "42501")
	}
	// The auditor reads attempts, quarantine and policies, and cannot write them.
	aud := testdb.Conn(t, b.Dsn, "outbox_auditor")
	for _, tbl := range []string{"outbox_delivery_attempt_starts", "outbox_delivery_attempt_finishes", "outbox_quarantine",
		"outbox_retry_policies", "outbox_retry_policy_history"} {
		if _, err := aud.Exec(ctx, `SELECT count(*) FROM outbox.`+tbl); err != nil {
			t.Fatalf("auditor SELECT %s: %v", tbl, err)
		}
	}
	_, err := aud.Exec(ctx, `UPDATE outbox.outbox_retry_policies SET max_attempts = 1`)
	kernelfix.WantState(t, err, "42501")
}
