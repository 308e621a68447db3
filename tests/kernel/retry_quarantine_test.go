package kernel

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// dxSetPolicy changes a destination's retry policy through outbox.set_retry_policy as the
// registrar and returns the new policy version.
func dxSetPolicy(t *testing.T, dsn, dest string, base, maxDelay time.Duration, multiplier, jitter float64, maxAttempts int) int {
	t.Helper()
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	var v int
	if err := reg.QueryRow(context.Background(),
		`SELECT outbox.set_retry_policy($1, $2::interval, $3::numeric, $4::interval, $5::numeric, $6)`,
		dest, (base).String(), multiplier, (maxDelay).String(), jitter, maxAttempts).Scan(&v); err != nil {
		t.Fatalf("set_retry_policy: %v", err)
	}
	return v
}

// dxMakeAvailable moves a pending delivery's available_at to now (a test shortcut instead of
// waiting out the backoff; available_at is not a frozen column).
func dxMakeAvailable(t *testing.T, b kernelfix.Bundle, dest, eventID string) {
	t.Helper()
	if _, err := b.Admin.Exec(context.Background(), `UPDATE outbox.outbox_deliveries SET available_at = clock_timestamp()
		WHERE destination = $1 AND event_id = $2::uuid AND status = 'pending'`, dest, eventID); err != nil {
		t.Fatal(err)
	}
}

// T-4, R-AK-5, R-AK-7, D-5: retries follow the destination's policy row - available_at lies in
// [now + d*(1-jitter), now + d*(1+jitter)] with d = min(max_delay, base*multiplier^(n-1)) - and
// reaching max attempts quarantines with reason retry_exhausted; the quarantined delivery is
// never claimed again.
func TestRetryBackoffFollowsPolicyAndExhausts(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	// the destination followed the kernel-wide default: its own row starts at version 1 (D-1)
	if v := dxSetPolicy(t, b.Dsn, kernelfix.DestMetering, 10*time.Second, 100*time.Second, 3, 0.1, 5); v != 1 {
		t.Fatalf("policy version %d, want 1", v)
	}
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	wantDelay := []float64{10, 30, 90, 100} // seconds for attempts 1..4; attempt 5 exhausts
	for i, d := range wantDelay {
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
		if c.AttemptNumber != i+1 {
			t.Fatalf("attempt %d, want %d", c.AttemptNumber, i+1)
		}
		ref := "upstream 503\nrequest-id: r-1\t" + strings.Repeat("x", 300)
		t0 := kernelfix.DBNow(t, b.Admin)
		res, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_unavailable", &ref)
		t1 := kernelfix.DBNow(t, b.Admin)
		if err != nil || res != "pending" {
			t.Fatalf("retry %d: %q %v", i+1, res, err)
		}
		var status, code, storedRef string
		var avail time.Time
		var token *string
		if err := b.Admin.QueryRow(ctx, `SELECT status, available_at, last_error_code, last_error_ref, lease_token::text
			FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, eventID).
			Scan(&status, &avail, &code, &storedRef, &token); err != nil {
			t.Fatal(err)
		}
		lo := t0.Add(time.Duration(d * 0.9 * float64(time.Second)))
		hi := t1.Add(time.Duration(d * 1.1 * float64(time.Second)))
		if status != "pending" || token != nil || avail.Before(lo) || avail.After(hi) {
			t.Fatalf("after retry %d: %s token=%v available_at %v, want within [%v, %v]", i+1, status, token, avail, lo, hi)
		}
		if code != "consumer_unavailable" || len(storedRef) > 200 || strings.ContainsAny(storedRef, "\n\t") || !strings.HasPrefix(storedRef, "upstream 503 request-id: r-1 x") {
			t.Fatalf("last error %q %q", code, storedRef)
		}
		if o, disp := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "retryable" || disp != "retry_scheduled" {
			t.Fatalf("finish %s/%s", o, disp)
		}
		// Not claimable before available_at.
		if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestMetering); len(cs) != 0 {
			t.Fatalf("claimed during backoff")
		}
		dxMakeAvailable(t, b, kernelfix.DestMetering, eventID)
	}
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if c.AttemptNumber != 5 {
		t.Fatalf("attempt %d", c.AttemptNumber)
	}
	res, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_timeout", nil)
	if err != nil || res != "quarantined" {
		t.Fatalf("retry at max attempts: %q %v", res, err)
	}
	if o, disp := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "retryable" || disp != "quarantined" {
		t.Fatalf("final finish %s/%s", o, disp)
	}
	var reason, sha, attempt string
	if err := b.Admin.QueryRow(ctx, `SELECT reason, event_envelope_sha256, attempt_id::text FROM outbox.outbox_quarantine
		WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, eventID).Scan(&reason, &sha, &attempt); err != nil {
		t.Fatal(err)
	}
	if reason != "retry_exhausted" || sha != c.EventEnvelopeSHA256 || attempt != c.AttemptID {
		t.Fatalf("quarantine row %s %s %s", reason, sha, attempt)
	}
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID); s != "quarantined" {
		t.Fatalf("status %s", s)
	}
	// Never claimed again, and terminal rows cannot be made available.
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestMetering); len(cs) != 0 {
		t.Fatalf("quarantined delivery claimed")
	}
	_, err = b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET status = 'pending' WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, eventID)
	kernelfix.WantState(t, err, "OB202")
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts WHERE event_id = $1::uuid`, eventID); n != 5 {
		t.Fatalf("%d attempt starts, want 5", n)
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p != nil {
		t.Fatal("a quarantined delivery published its event")
	}
}

// R-AK-5: the backoff function's bounds over many draws: within [d(1-j), d(1+j)], spread over
// both halves, and capped by max_delay before the jitter.
func TestBackoffDelayBounds(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	type tc struct {
		attempts int
		d        float64
	}
	// base 2 s, x2, cap 60 s, jitter 0.25
	for _, c := range []tc{{1, 2}, {2, 4}, {5, 32}, {6, 60}, {40, 60}, {1000, 60}} {
		var lo, hi float64
		var below, above int
		if err := b.Admin.QueryRow(ctx, `
			WITH p AS (SELECT ROW('x', interval '2 seconds', 2::numeric, interval '60 seconds', 0.25::numeric, 20, 1, now())::outbox.outbox_retry_policies AS pol),
			     s AS (SELECT extract(epoch FROM outbox._backoff_delay(p.pol, $1))::float8 AS v FROM p, generate_series(1, 400))
			SELECT min(v), max(v), count(*) FILTER (WHERE v < $2), count(*) FILTER (WHERE v > $2) FROM s`, c.attempts, c.d).
			Scan(&lo, &hi, &below, &above); err != nil {
			t.Fatal(err)
		}
		if lo < c.d*0.75-1e-6 || hi > c.d*1.25+1e-6 || below == 0 || above == 0 {
			t.Fatalf("attempt %d: delays in [%v, %v] (below %d, above %d), want within [%v, %v] on both sides of %v",
				c.attempts, lo, hi, below, above, c.d*0.75, c.d*1.25, c.d)
		}
	}
}

// R-AK-7, T-4: unknown and non-retryable codes are rejected by retry_delivery with 22023 and
// nothing changes; error codes are the closed list in outbox.error_codes.
func TestRetryRejectsUnknownAndNonRetryableCodes(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	before := kernelfix.Row(t, b.Admin, c.Destination, c.EventID)
	for _, code := range []string{"no_such_code", "unsupported_schema", "retry_exhausted", "", "Consumer_Timeout"} {
		_, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), code, nil)
		kernelfix.WantState(t, err, kernelfix.SQLStateParam)
	}
	for _, q := range [][2]string{{"consumer_timeout", "consumer_timeout"}, {"no_such_reason", "unsupported_schema"}, {"unsupported_schema", "no_such_code"}} {
		err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), q[0], q[1], nil)
		kernelfix.WantState(t, err, kernelfix.SQLStateParam)
	}
	if after := kernelfix.Row(t, b.Admin, c.Destination, c.EventID); after != before {
		t.Fatal("rejected calls changed the delivery")
	}
	if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 0 {
		t.Fatalf("%d finishes", n)
	}
	var retryable, nonRetryable int
	if err := b.Admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE retryable), count(*) FILTER (WHERE NOT retryable) FROM outbox.error_codes`).
		Scan(&retryable, &nonRetryable); err != nil {
		t.Fatal(err)
	}
	if retryable != 7 || nonRetryable != 7 {
		t.Fatalf("error codes: %d retryable, %d non-retryable", retryable, nonRetryable)
	}
}

// R-AK-6, T-4: quarantine_delivery appends a non_retryable finish, makes the delivery terminal
// quarantined with the event digest in the quarantine row; never claimed again; the event stays
// unpublished.
func TestQuarantineDelivery(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Settlement, "agg-1", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCatchUp)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "unsupported_schema", "unsupported_schema", nil); err != nil {
		t.Fatal(err)
	}
	if o, d := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "non_retryable" || d != "quarantined" {
		t.Fatalf("finish %s/%s", o, d)
	}
	var code string
	if err := b.Admin.QueryRow(ctx, `SELECT normalized_error_code FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid`, c.AttemptID).Scan(&code); err != nil || code != "unsupported_schema" {
		t.Fatalf("finish code %q %v", code, err)
	}
	var status string
	var token *string
	if err := b.Admin.QueryRow(ctx, `SELECT status, lease_token::text FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`,
		kernelfix.DestCatchUp, eventID).Scan(&status, &token); err != nil || status != "quarantined" || token != nil {
		t.Fatalf("delivery %s %v %v", status, token, err)
	}
	var reason, alg, sha, attempt string
	if err := b.Admin.QueryRow(ctx, `SELECT reason, event_envelope_digest_algorithm_version, event_envelope_sha256, attempt_id::text
		FROM outbox.outbox_quarantine WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestCatchUp, eventID).Scan(&reason, &alg, &sha, &attempt); err != nil {
		t.Fatal(err)
	}
	if reason != "unsupported_schema" || alg != "jcs-sha256-v1" || sha != c.EventEnvelopeSHA256 || attempt != c.AttemptID {
		t.Fatalf("quarantine row %s %s %s %s", reason, alg, sha, attempt)
	}
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestCatchUp); len(cs) != 0 {
		t.Fatal("quarantined delivery claimed")
	}
	// The finished fence is dead.
	err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "unsupported_schema", "unsupported_schema", nil)
	kernelfix.WantFencing(t, err)
}

// R-AK-6, R-SEC-3: quarantine rows are append-only except acknowledged_at and case_id (OB202
// for anything else, DELETE, TRUNCATE - the owner included); the dispatcher cannot touch them.
func TestQuarantineRowAppendOnly(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "envelope_invalid", "envelope_invalid", nil); err != nil {
		t.Fatal(err)
	}
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	if _, err := owner.Exec(ctx, `UPDATE outbox.outbox_quarantine SET acknowledged_at = now(), case_id = 'CASE-1'
		WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestMetering, eventID); err != nil {
		t.Fatalf("acknowledging a quarantine row: %v", err)
	}
	for _, stmt := range []string{
		`UPDATE outbox.outbox_quarantine SET reason = 'digest_conflict' WHERE destination = $1 AND event_id = $2::uuid`,
		`UPDATE outbox.outbox_quarantine SET event_envelope_sha256 = repeat('0', 64) WHERE destination = $1 AND event_id = $2::uuid`,
		`UPDATE outbox.outbox_quarantine SET quarantined_at = now(), case_id = 'CASE-2' WHERE destination = $1 AND event_id = $2::uuid`,
		`DELETE FROM outbox.outbox_quarantine WHERE destination = $1 AND event_id = $2::uuid`,
	} {
		_, err := owner.Exec(ctx, stmt, kernelfix.DestMetering, eventID)
		kernelfix.WantState(t, err, "OB202")
	}
	_, err := owner.Exec(ctx, `TRUNCATE outbox.outbox_quarantine`)
	kernelfix.WantState(t, err, "OB202")
	_, err = b.Disp.Exec(ctx, `UPDATE outbox.outbox_quarantine SET case_id = 'x'`)
	kernelfix.WantState(t, err, "42501")
	var caseID string
	if err := b.Admin.QueryRow(ctx, `SELECT case_id FROM outbox.outbox_quarantine WHERE event_id = $1::uuid`, eventID).Scan(&caseID); err != nil || caseID != "CASE-1" {
		t.Fatalf("case_id %q %v", caseID, err)
	}
}

// D-5, R-AK-5: every change of a retry policy is recorded (INSERT/UPDATE/DELETE, policy_version
// bumped, changed_by = session_user); the history is append-only; only the registrar (and
// owner) may change policies. A destination without a row follows the kernel-wide default
// (D-1): a retry there writes no policy row.
func TestRetryPolicyHistory(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	// (the template's history may hold the pre-041 seed of this destination and its removal)
	since := kernelfix.QueryInt(t, b.Admin, `SELECT coalesce(max(change_id), 0) FROM outbox.outbox_retry_policy_history`)
	history := func() int {
		return kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_retry_policy_history WHERE destination = $1 AND change_id > $2`,
			kernelfix.DestCatchUp, since)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_retry_policies WHERE destination = $1`, kernelfix.DestCatchUp); n != 0 {
		t.Fatalf("%d policy rows for a newly registered destination, want 0 (it follows the default)", n)
	}
	var login string
	if err := b.Admin.QueryRow(ctx, `SELECT session_user`).Scan(&login); err != nil {
		t.Fatal(err)
	}
	if v := dxSetPolicy(t, b.Dsn, kernelfix.DestCatchUp, 2*time.Second, time.Minute, 2, 0.2, 10); v != 1 {
		t.Fatalf("version %d", v)
	}
	// Setting the same values again changes nothing and records nothing.
	if v := dxSetPolicy(t, b.Dsn, kernelfix.DestCatchUp, 2*time.Second, time.Minute, 2, 0.2, 10); v != 1 {
		t.Fatalf("version %d after a no-op", v)
	}
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	if _, err := owner.Exec(ctx, `UPDATE outbox.outbox_retry_policies SET max_attempts = 3 WHERE destination = $1`, kernelfix.DestCatchUp); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `DELETE FROM outbox.outbox_retry_policies WHERE destination = $1`, kernelfix.DestCatchUp); err != nil {
		t.Fatal(err)
	}
	rows, err := b.Admin.Query(ctx, `SELECT operation, policy_version, max_attempts, changed_by FROM outbox.outbox_retry_policy_history
		WHERE destination = $1 AND change_id > $2 ORDER BY change_id`, kernelfix.DestCatchUp, since)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var op, by string
		var v, max int
		if err := rows.Scan(&op, &v, &max, &by); err != nil {
			t.Fatal(err)
		}
		if by != login {
			t.Fatalf("changed_by %q, want session_user %q", by, login)
		}
		got = append(got, op+":"+strconv.Itoa(v)+":"+strconv.Itoa(max))
	}
	want := "INSERT:1:10 UPDATE:2:3 DELETE:2:3"
	if strings.Join(got, " ") != want {
		t.Fatalf("history %v, want %s", got, want)
	}
	for _, stmt := range []string{
		`UPDATE outbox.outbox_retry_policy_history SET max_attempts = 99`,
		`DELETE FROM outbox.outbox_retry_policy_history`,
		`TRUNCATE outbox.outbox_retry_policy_history`,
		`TRUNCATE outbox.outbox_retry_policies`,
	} {
		_, err := owner.Exec(ctx, stmt)
		kernelfix.WantState(t, err, "OB202")
	}
	// A retry on a destination whose policy row was deleted follows the default (1 s +- 20 %
	// for the first attempt) and writes no policy row and no history.
	kernelfix.Append(t, b.Admin, kernelfix.Settlement, "agg-1", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCatchUp)
	if res, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "transport_error", nil); err != nil || res != "pending" {
		t.Fatalf("retry without a policy row: %q %v", res, err)
	}
	if n := history(); n != 3 {
		t.Fatalf("%d history rows, want 3", n)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_retry_policies WHERE destination = $1`, kernelfix.DestCatchUp); n != 0 {
		t.Fatalf("%d policy rows after a retry on the default, want 0", n)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_deliveries AS d
		JOIN outbox.outbox_delivery_attempt_finishes AS f ON f.attempt_id = d.current_attempt_id
		WHERE d.destination = $1 AND d.available_at - f.finished_at BETWEEN interval '0.8 seconds' AND interval '1.2 seconds'`,
		kernelfix.DestCatchUp); n != 1 {
		t.Fatalf("the retry's backoff is not the default's first delay (1 s +- 20 %%)")
	}
	// Out-of-range values and the dispatcher are refused.
	reg := testdb.Conn(t, b.Dsn, "outbox_registrar")
	_, err = reg.Exec(ctx, `SELECT outbox.set_retry_policy($1, '1 second', 2, '5 minutes', 1.5, 20)`, kernelfix.DestCatchUp)
	kernelfix.WantState(t, err, kernelfix.SQLStateParam)
	_, err = reg.Exec(ctx, `SELECT outbox.set_retry_policy('no_such_destination', '1 second', 2, '5 minutes', 0.2, 20)`)
	kernelfix.WantState(t, err, kernelfix.SQLStateParam)
	_, err = b.Disp.Exec(ctx, `SELECT outbox.set_retry_policy($1, '1 second', 2, '5 minutes', 0.2, 20)`, kernelfix.DestCatchUp)
	kernelfix.WantState(t, err, "42501")
}
