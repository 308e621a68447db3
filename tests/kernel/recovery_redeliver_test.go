package kernel

// Controlled recovery of quarantined deliveries at the SQL API (SPEC R-AK-10, §13, R-SEC-1,
// R-SEC-3; seed 000: only the original event is re-delivered, bound to a case, an impact
// preview, an idempotency key and an audit row). The end-to-end runs through the dispatcher are
// in recovery_dispatcher_test.go. Prefixed rc.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

type rcBundle struct {
	kernelfix.Bundle
	op  *pgx.Conn // SET ROLE outbox_operator
	aud *pgx.Conn // SET ROLE outbox_auditor
}

func rcSetup(t *testing.T) rcBundle {
	t.Helper()
	b := kernelfix.Setup(t)
	return rcBundle{Bundle: b, op: testdb.Conn(t, b.Dsn, "outbox_operator"), aud: testdb.Conn(t, b.Dsn, "outbox_auditor")}
}

// rcQuarantined appends a metering event, claims it and quarantines it as consumer_rejected
// (as the dispatcher does for a permanent rejection); returns the event id and the claim.
func rcQuarantined(t *testing.T, b rcBundle) (string, pgcall.ClaimedDelivery) {
	t.Helper()
	ev := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-"+strings.ReplaceAll(t.Name(), "/", "-"), 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if c.EventID != ev {
		t.Fatalf("fixture: claimed %s, not the new event %s (another metering delivery is pending)", c.EventID, ev)
	}
	if err := pgcall.QuarantineDelivery(context.Background(), b.Disp, kernelfix.FenceOf(c), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	return ev, c
}

func rcRedeliver(b rcBundle, db pgcall.DBTX, dest, ev, caseID, reason, key string) (pgcall.Redelivery, error) {
	return pgcall.RedeliverQuarantined(context.Background(), db, pgcall.RedeliverParams{
		Destination: dest, EventID: ev, CaseID: caseID, Reason: reason, IdempotencyKey: key})
}

// rcAudit is the recovery audit as text rows (everything but the generated times), for
// before/after comparisons.
func rcAudit(t *testing.T, db pgcall.DBTX) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT coalesce(string_agg(to_jsonb(r)::text, E'\n' ORDER BY recovered_at), '')
		FROM outbox.outbox_recoveries r`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// R-AK-10: a quarantined delivery goes back to pending, due at once, with nothing else of it
// changed (same event, digest, frozen member, attempt count); the quarantine row stays and gets
// acknowledged_at and the case; exactly one audit row records who, what, why, the key, the
// state before and after. The next claim is attempt 2 of the same delivery with the same digest.
func TestRecoveryRedeliverMovesOneQuarantinedDeliveryToPending(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	ev, c := rcQuarantined(t, b)
	before := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)

	t0 := kernelfix.DBNow(t, b.Admin)
	r, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "INC-4711", "consumer fixed:\n\tschema 1 accepted again  ", "inc-4711-retry-1")
	if err != nil {
		t.Fatalf("redeliver: %v", err)
	}
	t1 := kernelfix.DBNow(t, b.Admin)
	if r.Status != "pending" || r.RecoveryID == "" {
		t.Fatalf("result %+v", r)
	}
	// Only status, available_at (now) and the budget base changed.
	var changed []string
	if err := b.Admin.QueryRow(ctx, `SELECT array_agg(k ORDER BY k) FROM jsonb_each($1::jsonb) a(k, v)
		WHERE v IS DISTINCT FROM ($2::jsonb)->k`, before, kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if strings.Join(changed, ",") != "available_at,recovery_attempt_base,status" {
		t.Fatalf("changed columns %v", changed)
	}
	var status string
	var avail time.Time
	var base, count int
	if err := b.Admin.QueryRow(ctx, `SELECT status, available_at, recovery_attempt_base, attempt_count FROM outbox.outbox_deliveries
		WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, ev).Scan(&status, &avail, &base, &count); err != nil {
		t.Fatal(err)
	}
	if status != "pending" || avail.Before(t0) || avail.After(t1) || base != 1 || count != 1 {
		t.Fatalf("delivery %s available_at %v (call between %v and %v) base %d count %d", status, avail, t0, t1, base, count)
	}
	// The quarantine row stays, acknowledged with the case.
	var qn int
	var ackAt *time.Time
	var caseID *string
	if err := b.Admin.QueryRow(ctx, `SELECT count(*) OVER (), acknowledged_at, case_id FROM outbox.outbox_quarantine
		WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, ev).Scan(&qn, &ackAt, &caseID); err != nil {
		t.Fatal(err)
	}
	if qn != 1 || ackAt == nil || !ackAt.Equal(avail) || caseID == nil || *caseID != "INC-4711" {
		t.Fatalf("quarantine rows %d acknowledged_at %v case %v", qn, ackAt, caseID)
	}
	// One audit row with the sanitized reason, the session user and before/after.
	var a struct {
		id, key, dest, evID, caseID, reason, by, qReason, bStatus, aStatus string
		bCount                                                             int
		bAttempt                                                           string
		aAvail, at                                                         time.Time
	}
	if err := b.Admin.QueryRow(ctx, `SELECT recovery_id::text, idempotency_key, destination, event_id::text, case_id, reason,
		requested_by, quarantine_reason, before_status, after_status, before_attempt_count, before_attempt_id::text,
		after_available_at, recovered_at FROM outbox.outbox_recoveries`).Scan(&a.id, &a.key, &a.dest, &a.evID, &a.caseID,
		&a.reason, &a.by, &a.qReason, &a.bStatus, &a.aStatus, &a.bCount, &a.bAttempt, &a.aAvail, &a.at); err != nil {
		t.Fatal(err)
	}
	var sessionUser string
	_ = b.op.QueryRow(ctx, `SELECT session_user`).Scan(&sessionUser)
	if a.id != r.RecoveryID || a.key != "inc-4711-retry-1" || a.dest != kernelfix.DestMetering || a.evID != ev || a.caseID != "INC-4711" ||
		a.reason != "consumer fixed: schema 1 accepted again" || a.by != sessionUser || a.qReason != "consumer_rejected" ||
		a.bStatus != "quarantined" || a.aStatus != "pending" || a.bCount != 1 || a.bAttempt != c.AttemptID ||
		!a.aAvail.Equal(avail) || !a.at.Equal(avail) {
		t.Fatalf("audit row %+v", a)
	}
	// The next claim continues the attempt history of the same delivery, same digest.
	c2 := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerB, time.Minute, kernelfix.DestMetering)
	if c2.EventID != ev || c2.AttemptNumber != 2 || c2.EventEnvelopeSHA256 != c.EventEnvelopeSHA256 ||
		c2.ConsumerName != c.ConsumerName || c2.ExpectedReceiptType != c.ExpectedReceiptType {
		t.Fatalf("claim after recovery %+v (first %+v)", c2, c)
	}
	if res := kernelfix.Ack(t, b.Disp, c2); res != "complete" {
		t.Fatalf("ack after recovery: %s", res)
	}
	if p := dxPublishedAt(t, b.Admin, ev); p == nil {
		t.Fatal("not published after the re-delivered delivery was acknowledged")
	}
}

// R-AK-10: idempotent per key, checked before the state. The same key with the same request
// returns the first result - also after the delivery moved on (leased, acknowledged) - and
// makes no second recovery; the same key with another request (case, reason, delivery) is
// OB601 and changes nothing.
func TestRecoveryIdempotentPerKey(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	ev, _ := rcQuarantined(t, b)
	first, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "fixed the consumer", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	row := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)
	// The reason is compared after sanitizing: the same text with other blanks is the same request.
	again, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "  fixed   the\nconsumer", "key-1")
	if err != nil || again != first {
		t.Fatalf("repeat: %+v %v, want %+v", again, err, first)
	}
	if kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev) != row {
		t.Fatal("a repeated request changed the delivery")
	}
	// After the delivery moved on, the same request still answers the first result.
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if again, err = rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "fixed the consumer", "key-1"); err != nil || again != first {
		t.Fatalf("repeat while leased: %+v %v", again, err)
	}
	kernelfix.Ack(t, b.Disp, c)
	if again, err = rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "fixed the consumer", "key-1"); err != nil || again != first {
		t.Fatalf("repeat when acknowledged: %+v %v", again, err)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_recoveries`); n != 1 {
		t.Fatalf("%d recoveries, want 1", n)
	}
	// Another request under the used key: OB601, nothing changes.
	other, _ := rcQuarantined(t, b)
	audit, rowAck, rowOther := rcAudit(t, b.Admin), kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev), kernelfix.Row(t, b.Admin, kernelfix.DestMetering, other)
	for name, req := range map[string][4]string{
		"other case":     {kernelfix.DestMetering, ev, "CASE-2", "fixed the consumer"},
		"other reason":   {kernelfix.DestMetering, ev, "CASE-1", "something else"},
		"other delivery": {kernelfix.DestMetering, other, "CASE-1", "fixed the consumer"},
	} {
		_, err := rcRedeliver(b, b.op, req[0], req[1], req[2], req[3], "key-1")
		kernelfix.WantState(t, err, "OB601")
		if !errors.Is(err, pgcall.ErrRecoveryKeyConflict) {
			t.Fatalf("%s: %v is not ErrRecoveryKeyConflict", name, err)
		}
	}
	if rcAudit(t, b.Admin) != audit || kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev) != rowAck || kernelfix.Row(t, b.Admin, kernelfix.DestMetering, other) != rowOther {
		t.Fatal("a refused request changed something")
	}
	// The other delivery recovers under its own key.
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, other, "CASE-1", "fixed the consumer", "key-2"); err != nil {
		t.Fatal(err)
	}
	_ = ctx
}

// R-AK-10: only a quarantined delivery can be re-delivered: pending, leased and acknowledged
// deliveries (and a delivery that does not exist) are refused with OB602 and a detail naming
// the status; nothing changes and no audit row is written.
func TestRecoveryRefusedUnlessQuarantined(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	acked := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-acked", 1)
	kernelfix.Ack(t, b.Disp, kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering))
	leased := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-leased", 1)
	kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	pending := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-pending", 1)
	for ev, status := range map[string]string{pending: "pending", leased: "leased", acked: "acknowledged"} {
		if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, ev); s != status {
			t.Fatalf("fixture: %s is %s", status, s)
		}
		row := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)
		pub := dxPublishedAt(t, b.Admin, ev)
		_, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "try it", "key-"+status)
		kernelfix.WantState(t, err, "OB602")
		if !errors.Is(err, pgcall.ErrNotQuarantined) || !strings.Contains(err.Error(), "is "+status) {
			t.Fatalf("%s: %v", status, err)
		}
		if kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev) != row {
			t.Fatalf("%s: refused recovery changed the delivery", status)
		}
		if p := dxPublishedAt(t, b.Admin, ev); (p == nil) != (pub == nil) || (p != nil && !p.Equal(*pub)) {
			t.Fatalf("%s: publication changed", status)
		}
	}
	_, err := rcRedeliver(b, b.op, kernelfix.DestMetering, "00000000-0000-4000-8000-000000000000", "CASE-1", "try it", "key-none")
	kernelfix.WantState(t, err, "OB602")
	_, err = rcRedeliver(b, b.op, kernelfix.DestCoreOps, acked, "CASE-1", "try it", "key-other-dest")
	kernelfix.WantState(t, err, "OB602")
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_recoveries`); n != 0 {
		t.Fatalf("%d audit rows after refusals", n)
	}
}

// R-AK-10, D-4, R-SEC-5: case id and key are bounded literals, the reason bounded non-empty
// text; anything else is 22023 and changes nothing. Control characters in the reason are
// stored as blanks (sanitized), never as given.
func TestRecoveryArgumentsValidated(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ev, _ := rcQuarantined(t, b)
	row := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)
	long := strings.Repeat("a", 129)
	for name, a := range map[string][3]string{ // case, reason, key
		"empty case":       {"", "r", "k"},
		"case with blank":  {"CASE 1", "r", "k"},
		"case too long":    {long, "r", "k"},
		"case starts dash": {"-CASE", "r", "k"},
		"empty key":        {"C", "r", ""},
		"key with slash":   {"C", "r", "a/b"},
		"key too long":     {"C", "r", long},
		"key with quote":   {"C", "r", "k'1"},
		"empty reason":     {"C", "", "k"},
		"blank reason":     {"C", " \n\t ", "k"},
		"reason too long":  {"C", strings.Repeat("x", 501), "k"},
	} {
		_, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, a[0], a[1], a[2])
		if pgcall.SQLState(err) != "22023" {
			t.Errorf("%s: %v, want 22023", name, err)
		}
	}
	if kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev) != row || kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_recoveries`) != 0 {
		t.Fatal("an invalid request changed something")
	}
	// A quarantine an operator already took up under a case is recovered under that case only.
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	if _, err := owner.Exec(context.Background(), `UPDATE outbox.outbox_quarantine SET case_id = 'ops/2026:INC-1.a_b'
		WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, ev); err != nil {
		t.Fatal(err)
	}
	_, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "OTHER-CASE", "fixed", "k-other-case")
	var pgErr *pgconn.PgError
	if pgcall.SQLState(err) != "22023" || !errors.As(err, &pgErr) || !strings.Contains(pgErr.Detail, "belongs to case ops/2026:INC-1.a_b") {
		t.Fatalf("recovery under another case: %v", err)
	}
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "ops/2026:INC-1.a_b", "line 1\r\nline 2\x00\x7f end", "k:1.a_b-c"); err == nil {
		t.Fatal("a NUL byte in the reason was accepted by the driver")
	}
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "ops/2026:INC-1.a_b", "line 1\r\nline 2\x7f end", "k:1.a_b-c"); err != nil {
		t.Fatalf("valid literals: %v", err)
	}
	var reason string
	if err := b.Admin.QueryRow(context.Background(), `SELECT reason FROM outbox.outbox_recoveries`).Scan(&reason); err != nil || reason != "line 1 line 2 end" {
		t.Fatalf("stored reason %q %v", reason, err)
	}
}

// R-AK-10, R-SEC-1, §13: redeliver_quarantined is the operator's alone; preview_redelivery is
// the operator's and the auditor's. Every other kernel role, and a role with PUBLIC's rights
// only, gets 42501 and changes nothing. (outbox_owner owns the functions.) The operator has
// nothing else: no table, no other kernel function.
func TestRecoveryOnlyOperator(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	ev, _ := rcQuarantined(t, b)
	row := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)
	if _, err := b.Admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE outbox_test_nobody NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"outbox_registrar", "outbox_producer", "outbox_dispatcher", "outbox_consumer", "outbox_auditor", "outbox_test_nobody"} {
		conn := testdb.Conn(t, b.Dsn, role)
		_, err := rcRedeliver(b, conn, kernelfix.DestMetering, ev, "CASE-1", "fixed", "key-"+role)
		if !errors.Is(err, pgcall.ErrPermissionDenied) {
			t.Errorf("%s redeliver: %v, want 42501", role, err)
		}
		_, err = pgcall.PreviewRedelivery(ctx, conn, kernelfix.DestMetering, ev)
		if allowed := role == "outbox_auditor"; allowed != (err == nil) {
			t.Errorf("%s preview: %v (allowed %v)", role, err, allowed)
		}
		if !(role == "outbox_auditor") && !errors.Is(err, pgcall.ErrPermissionDenied) {
			t.Errorf("%s preview: %v, want 42501", role, err)
		}
	}
	if kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev) != row || kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_recoveries`) != 0 {
		t.Fatal("a refused role changed something")
	}
	// The operator reads no table and calls nothing of the dispatch path.
	for _, sql := range []string{
		`SELECT 1 FROM outbox.outbox_deliveries LIMIT 0`,
		`SELECT 1 FROM outbox.outbox_recoveries LIMIT 0`,
		`UPDATE outbox.outbox_deliveries SET status = 'pending' WHERE false`,
		`SELECT outbox.claim_deliveries('w', ARRAY['metering_input_processor'], 1, interval '1 minute')`,
		`SELECT outbox.jcs_sha256('{}')`,
	} {
		_, err := b.op.Exec(ctx, sql)
		kernelfix.WantState(t, err, "42501")
	}
	if _, err := pgcall.PreviewRedelivery(ctx, b.op, kernelfix.DestMetering, ev); err != nil {
		t.Fatalf("operator preview: %v", err)
	}
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "fixed", "key-op"); err != nil {
		t.Fatalf("operator redeliver: %v", err)
	}
}

// R-AK-10, R-SEC-3: nothing but redeliver_quarantined takes a delivery out of quarantined. A
// direct UPDATE by the owner is OB202 - also with any setting a caller could forge, and also
// when an audit row for the delivery exists from an earlier transaction; the dispatcher has no
// UPDATE privilege at all. The recovery audit and the quarantine rows cannot be rewritten.
func TestRecoveryTransitionOnlyThroughRedeliver(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	ev, _ := rcQuarantined(t, b)
	tryOwner := func(stmts ...string) error {
		tx, err := owner.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s, kernelfix.DestMetering, ev); err != nil {
				return err
			}
		}
		return nil
	}
	const toPending = `UPDATE outbox.outbox_deliveries SET status = 'pending', available_at = now(), recovery_attempt_base = attempt_count
		WHERE destination = $1 AND event_id = $2::uuid`
	for _, forged := range []string{"pgoutbox.recovering", "pgoutbox.publishing", "pgoutbox.redeliver"} {
		err := tryOwner(`SELECT set_config('`+forged+`', 'on', true), $1::text, $2::text`, toPending)
		kernelfix.WantState(t, err, "OB202")
	}
	kernelfix.WantState(t, tryOwner(`UPDATE outbox.outbox_deliveries SET status = 'pending' WHERE destination = $1 AND event_id = $2::uuid`), "OB202")
	kernelfix.WantState(t, tryOwner(`UPDATE outbox.outbox_deliveries SET status = 'leased', lease_owner = 'x', lease_token = gen_random_uuid(),
		lease_expires_at = now() + interval '1 minute' WHERE destination = $1 AND event_id = $2::uuid`), "OB202")
	_, err := b.Disp.Exec(ctx, toPending, kernelfix.DestMetering, ev)
	kernelfix.WantState(t, err, "42501")

	// A real recovery, then the delivery is quarantined again: the old audit row (an earlier
	// transaction) does not open the door a second time.
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "fixed", "key-1"); err != nil {
		t.Fatal(err)
	}
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "envelope_invalid", "envelope_invalid", nil); err != nil {
		t.Fatal(err)
	}
	kernelfix.WantState(t, tryOwner(toPending), "OB202")
	// A recovery's audit row opens the door for its own delivery only: in the same transaction
	// another quarantined delivery still cannot be moved.
	ev2, _ := rcQuarantined(t, b)
	func() {
		tx, err := owner.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SELECT outbox.redeliver_quarantined($1, $2::uuid, 'CASE-1', 'fixed again', 'key-2')`, kernelfix.DestMetering, ev); err != nil {
			t.Fatalf("owner's recovery: %v", err)
		}
		_, err = tx.Exec(ctx, toPending, kernelfix.DestMetering, ev2)
		kernelfix.WantState(t, err, "OB202")
	}()

	// The audit and the quarantine history are immutable.
	for _, s := range []string{
		`UPDATE outbox.outbox_recoveries SET reason = 'rewritten' WHERE destination = $1 AND event_id = $2::uuid`,
		`DELETE FROM outbox.outbox_recoveries WHERE destination = $1 AND event_id = $2::uuid`,
		`UPDATE outbox.outbox_quarantine SET case_id = 'CASE-9' WHERE destination = $1 AND event_id = $2::uuid AND case_id IS NOT NULL`,
		`UPDATE outbox.outbox_quarantine SET acknowledged_at = now() WHERE destination = $1 AND event_id = $2::uuid AND acknowledged_at IS NOT NULL`,
		`UPDATE outbox.outbox_quarantine SET reason = 'digest_conflict' WHERE destination = $1 AND event_id = $2::uuid`,
		`DELETE FROM outbox.outbox_quarantine WHERE destination = $1 AND event_id = $2::uuid`,
	} {
		kernelfix.WantState(t, tryOwner(s), "OB202")
	}
	_, err = owner.Exec(ctx, `TRUNCATE outbox.outbox_recoveries`)
	kernelfix.WantState(t, err, "OB202")
	// A forged recovered_txid is overwritten by the insert trigger with the inserting
	// transaction's id, so a row prepared in one transaction never opens the door in another.
	func() {
		tx, err := owner.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var stamped bool
		if err := tx.QueryRow(ctx, `WITH r AS (
			INSERT INTO outbox.outbox_recoveries (idempotency_key, destination, event_id, case_id, reason, requested_by,
			       quarantine_id, quarantine_reason, quarantined_at, before_status, before_attempt_count,
			       after_status, after_available_at, recovered_at, recovered_txid)
			VALUES ('forged', $1, $2::uuid, 'C', 'forged', 'x', 0, 'consumer_rejected', now(), 'quarantined', 0,
			        'pending', now(), now(), '999999999'::xid8) RETURNING recovered_txid)
			SELECT recovered_txid = pg_current_xact_id() FROM r`, kernelfix.DestMetering, ev).Scan(&stamped); err != nil || !stamped {
			t.Fatalf("recovered_txid not stamped with the inserting transaction: %v %v", stamped, err)
		}
	}()
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, ev); s != "quarantined" {
		t.Fatalf("status %s", s)
	}
}

// R-AK-10, R-AK-5: the re-delivered delivery's retry budget restarts - max_attempts counts the
// attempts since the last recovery, for retries and for lease expiry, and the backoff starts
// again at base_delay - while attempt numbers continue. A later quarantine adds a second
// quarantine row; the first stays with its case; a second recovery needs a new key.
func TestRecoveryBudgetRestartsAndRequarantineAddsRow(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	dxSetPolicy(t, b.Dsn, kernelfix.DestMetering, 10*time.Second, 100*time.Second, 3, 0, 2)
	ev := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-budget", 1)
	retry := func(wantAttempt int, want string) time.Time {
		t.Helper()
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
		if c.AttemptNumber != wantAttempt {
			t.Fatalf("attempt %d, want %d", c.AttemptNumber, wantAttempt)
		}
		t0 := kernelfix.DBNow(t, b.Admin)
		res, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_unavailable", nil)
		if err != nil || res != want {
			t.Fatalf("retry of attempt %d: %q %v, want %s", wantAttempt, res, err, want)
		}
		if want == "pending" {
			dxMakeAvailable(t, b.Bundle, kernelfix.DestMetering, ev)
		}
		return t0
	}
	retry(1, "pending")
	retry(2, "quarantined") // max_attempts 2: retry_exhausted
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "capacity raised", "budget-1"); err != nil {
		t.Fatal(err)
	}
	// Attempt 3 is the first since the recovery: back to pending after base_delay (10 s, not
	// 10*3^2 s), not quarantined.
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if c.AttemptNumber != 3 {
		t.Fatalf("attempt %d, want 3", c.AttemptNumber)
	}
	t0 := kernelfix.DBNow(t, b.Admin)
	if res, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_unavailable", nil); err != nil || res != "pending" {
		t.Fatalf("first retry after recovery: %q %v", res, err)
	}
	var avail time.Time
	_ = b.Admin.QueryRow(ctx, `SELECT available_at FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`,
		kernelfix.DestMetering, ev).Scan(&avail)
	if d := avail.Sub(t0); d < 9*time.Second || d > 11*time.Second {
		t.Fatalf("backoff after recovery %v, want base_delay 10s", d)
	}
	dxMakeAvailable(t, b.Bundle, kernelfix.DestMetering, ev)
	retry(4, "quarantined") // second attempt since the recovery
	var reasons []string
	var cases []*string
	rows, err := b.Admin.Query(ctx, `SELECT reason, case_id FROM outbox.outbox_quarantine WHERE destination = $1 AND event_id = $2::uuid
		ORDER BY quarantine_id`, kernelfix.DestMetering, ev)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		var cs *string
		_ = rows.Scan(&r, &cs)
		reasons, cases = append(reasons, r), append(cases, cs)
	}
	if len(reasons) != 2 || reasons[0] != "retry_exhausted" || reasons[1] != "retry_exhausted" ||
		cases[0] == nil || *cases[0] != "CASE-1" || cases[1] != nil {
		t.Fatalf("quarantine rows %v %v", reasons, cases)
	}
	// A second recovery (new key): lease expiry on the first attempt since it does not exhaust.
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-2", "capacity raised again", "budget-2"); err != nil {
		t.Fatal(err)
	}
	c = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
	if c.AttemptNumber != 5 {
		t.Fatalf("attempt %d, want 5", c.AttemptNumber)
	}
	dxSleepPast(t, b.Disp, c.LeaseExpiresAt)
	if _, err := pgcall.RecoverExpiredLeases(ctx, b.Disp, 100); err != nil {
		t.Fatal(err)
	}
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, ev); s != "pending" {
		t.Fatalf("after lease expiry on the first attempt since recovery: %s, want pending", s)
	}
	if o, d := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "lease_expired_unknown" || d != "reclaimable" {
		t.Fatalf("finish %s/%s", o, d)
	}
	// ... and on the second it quarantines again (third quarantine row).
	c = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
	dxSleepPast(t, b.Disp, c.LeaseExpiresAt)
	if _, err := pgcall.RecoverExpiredLeases(ctx, b.Disp, 100); err != nil {
		t.Fatal(err)
	}
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, ev); s != "quarantined" || c.AttemptNumber != 6 {
		t.Fatalf("after lease expiry on attempt %d: %s, want quarantined", c.AttemptNumber, s)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid`, ev); n != 3 {
		t.Fatalf("%d quarantine rows, want 3", n)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND acknowledged_at IS NULL`, ev); n != 1 {
		t.Fatalf("%d open quarantine rows, want 1", n)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(DISTINCT attempt_number) FROM outbox.outbox_delivery_attempt_starts WHERE event_id = $1::uuid`, ev); n != 6 {
		t.Fatalf("%d attempt numbers, want 6 (1..6)", n)
	}
}

// R-AK-10, R-AK-4: publication stays correct. The resolution event has two mandatory
// deliveries; one is acknowledged, the other quarantined: not published. Re-delivered and
// acknowledged, the event is published exactly once. Afterwards nothing can re-open it: the
// acknowledged delivery is refused (OB602), a repeat of the key returns the first result, and
// the publication keeps its first time.
func TestRecoveryPublishesOnceWhenLastDeliveryAcknowledged(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ev := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "agg-pub", 1)
	kernelfix.Ack(t, b.Disp, kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoreOps))
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoord)
	if err := pgcall.QuarantineDelivery(context.Background(), b.Disp, kernelfix.FenceOf(c), "unsupported_schema", "unsupported_schema", nil); err != nil {
		t.Fatal(err)
	}
	if dxPublishedAt(t, b.Admin, ev) != nil {
		t.Fatal("published with a quarantined delivery")
	}
	p, err := pgcall.PreviewRedelivery(context.Background(), b.op, kernelfix.DestCoord, ev)
	if err != nil || p.Published || !strings.Contains(p.WouldChange, "last unacknowledged delivery") {
		t.Fatalf("preview %+v %v", p, err)
	}
	if _, err := rcRedeliver(b, b.op, kernelfix.DestCoord, ev, "CASE-P", "schema supported now", "pub-1"); err != nil {
		t.Fatal(err)
	}
	if dxPublishedAt(t, b.Admin, ev) != nil {
		t.Fatal("published by the recovery itself")
	}
	c2 := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoord)
	if res := kernelfix.Ack(t, b.Disp, c2); res != "complete" {
		t.Fatalf("ack: %s", res)
	}
	first := dxPublishedAt(t, b.Admin, ev)
	if first == nil || kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1::uuid`, ev) != 1 {
		t.Fatal("not published exactly once")
	}
	if _, err := rcRedeliver(b, b.op, kernelfix.DestCoord, ev, "CASE-P", "schema supported now", "pub-1"); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	_, err = rcRedeliver(b, b.op, kernelfix.DestCoord, ev, "CASE-P", "again", "pub-2")
	kernelfix.WantState(t, err, "OB602")
	if p, err := pgcall.PreviewRedelivery(context.Background(), b.aud, kernelfix.DestCoord, ev); err != nil || !p.Published || !strings.HasPrefix(p.WouldChange, "nothing") {
		t.Fatalf("preview after publication %+v %v", p, err)
	}
	if again := dxPublishedAt(t, b.Admin, ev); again == nil || !again.Equal(*first) {
		t.Fatalf("publication time changed: %v -> %v", first, again)
	}
}

// R-AK-10: the preview shows what a re-delivery would do and changes nothing: the event, the
// frozen consumer, status and attempts, the quarantine reason and time, publication still
// open, and would_change naming the next attempt number and the state change; for a delivery
// that is not quarantined it says "nothing" (OB602). No such delivery: 22023.
func TestRecoveryPreview(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	ev, c := rcQuarantined(t, b)
	row := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev)
	p, err := pgcall.PreviewRedelivery(ctx, b.op, kernelfix.DestMetering, ev)
	if err != nil {
		t.Fatal(err)
	}
	if p.Destination != kernelfix.DestMetering || p.EventID != ev || p.EventType != kernelfix.Metering || p.ConsumerName != c.ConsumerName ||
		p.Status != "quarantined" || p.AttemptCount != 1 || p.QuarantineReason == nil || *p.QuarantineReason != "consumer_rejected" ||
		p.QuarantinedAt == nil || p.Published {
		t.Fatalf("preview %+v", p)
	}
	for _, want := range []string{"as attempt 2", "quarantined -> pending, due now", c.EventEnvelopeSHA256, "retry budget restarts",
		"reason consumer_rejected", "published when it is acknowledged"} {
		if !strings.Contains(p.WouldChange, want) {
			t.Errorf("would_change lacks %q: %s", want, p.WouldChange)
		}
	}
	if kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev) != row || kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_recoveries`) != 0 {
		t.Fatal("preview changed something")
	}
	if _, err := rcRedeliver(b, b.op, kernelfix.DestMetering, ev, "CASE-1", "fixed", "prev-1"); err != nil {
		t.Fatal(err)
	}
	p, err = pgcall.PreviewRedelivery(ctx, b.aud, kernelfix.DestMetering, ev)
	if err != nil || p.Status != "pending" || p.QuarantineReason != nil || !strings.HasPrefix(p.WouldChange, "nothing: the delivery is pending") {
		t.Fatalf("preview of a pending delivery %+v %v", p, err)
	}
	_, err = pgcall.PreviewRedelivery(ctx, b.aud, kernelfix.DestMetering, "00000000-0000-4000-8000-000000000000")
	kernelfix.WantState(t, err, "22023")
}

// R-AK-10: concurrent requests, real connections step by step. (a) The same request twice at
// once: the second waits for the first's row lock and answers its result - one recovery.
// (b) Another key for the same delivery at once: the second waits, then finds the delivery
// pending - OB602. (c) The same key for two deliveries at once: the second waits on the key's
// unique entry, then OB601. Each time exactly one audit row is added.
func TestRecoveryConcurrentRequests(t *testing.T) {
	t.Parallel()
	b := rcSetup(t)
	ctx := context.Background()
	op2 := testdb.Conn(t, b.Dsn, "outbox_operator")
	type answer struct {
		r   pgcall.Redelivery
		err error
	}
	run := func(evFirst, keyFirst, evSecond, keySecond string) (pgcall.Redelivery, answer) {
		t.Helper()
		tx, err := b.op.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		first, err := rcRedeliver(b, tx, kernelfix.DestMetering, evFirst, "CASE-C", "fixed", keyFirst)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan answer, 1)
		go func() {
			r, err := rcRedeliver(b, op2, kernelfix.DestMetering, evSecond, "CASE-C", "fixed", keySecond)
			done <- answer{r, err}
		}()
		// The second call must be waiting (on the row lock or on the key) before the first commits.
		dispatcherfix.Eventually(t, "second call waiting", func() bool {
			return kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
				AND query LIKE '%redeliver_quarantined%' AND datname = current_database()`) == 1
		})
		select {
		case a := <-done:
			t.Fatalf("second call did not wait: %+v", a)
		default:
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return first, <-done
	}

	// All four quarantined up front (a recovered delivery is pending and would be claimed next).
	ev1, _ := rcQuarantined(t, b)
	ev2, _ := rcQuarantined(t, b)
	ev3, _ := rcQuarantined(t, b)
	ev4, _ := rcQuarantined(t, b)
	first, second := run(ev1, "conc-1", ev1, "conc-1")
	if second.err != nil || second.r != first {
		t.Fatalf("(a) same request: %+v, want %+v", second, first)
	}
	_, second = run(ev2, "conc-2", ev2, "conc-2-other")
	kernelfix.WantState(t, second.err, "OB602")
	row4 := kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev4)
	_, second = run(ev3, "conc-3", ev4, "conc-3")
	kernelfix.WantState(t, second.err, "OB601")
	if kernelfix.Row(t, b.Admin, kernelfix.DestMetering, ev4) != row4 {
		t.Fatal("(c) the refused delivery changed")
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_recoveries`); n != 3 {
		t.Fatalf("%d recoveries, want 3", n)
	}
}
