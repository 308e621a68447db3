package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// hpcBacklog appends n metering events (one mandatory delivery each, to kernelfix.DestMetering) in
// one append_events call, as outbox_producer, and returns their ids in append order.
func hpcBacklog(t *testing.T, dsn string, n int) []string {
	t.Helper()
	prod := testdb.Conn(t, dsn, "outbox_producer")
	envs := make([]map[string]any, n)
	ids := make([]string, n)
	for i := range envs {
		envs[i] = testfix.Envelope(kernelfix.Metering, "1", fmt.Sprintf("hpc-agg-%d", i), 1)
		ids[i] = envs[i]["eventId"].(string)
	}
	raw, _ := json.Marshal(envs)
	if _, err := pgcall.AppendEvents(context.Background(), prod, pgcall.AppendEventsParams{Events: raw}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// hpcClaimCalls claims batch deliveries in a transaction of a fresh session with
// track_functions = all and returns the user-function calls the claim made (trigger functions
// included), read from the transaction's own statistics (pg_stat_xact_user_functions). The
// transaction is rolled back, so the backlog is unchanged.
func hpcClaimCalls(t *testing.T, dsn string, batch int) (map[string]int, int) {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Conn(t, dsn, "")
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{`SET LOCAL track_functions = 'all'`, `SET LOCAL ROLE outbox_dispatcher`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cs := kernelfix.Claim(t, tx, kernelfix.WorkerA, batch, time.Minute, kernelfix.DestMetering)
	if len(cs) != batch {
		t.Fatalf("claim of %d returned %d rows", batch, len(cs))
	}
	if _, err := tx.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT schemaname || '.' || funcname, calls::int FROM pg_stat_xact_user_functions`)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		F string
		N int
	}, error) {
		var x struct {
			F string
			N int
		}
		return x, r.Scan(&x.F, &x.N)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, total := map[string]int{}, 0
	for _, c := range calls {
		got[c.F] += c.N
		total += c.N
	}
	return got, total
}

// HP-1: the success path of claim_deliveries makes a constant number of user-function calls
// (pg_stat_user_functions with track_functions = all: PL/pgSQL, SQL and trigger functions),
// the same for a claim of 10 and of 100 - no function runs once per claimed delivery.
func TestClaimHotPathFunctionCallsConstant(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	hpcBacklog(t, b.Dsn, 150)
	small, nSmall := hpcClaimCalls(t, b.Dsn, 10)
	large, nLarge := hpcClaimCalls(t, b.Dsn, 100)
	if nSmall != nLarge {
		t.Fatalf("function calls: claim of 10 made %d %v, claim of 100 made %d %v; want equal (HP-1)", nSmall, small, nLarge, large)
	}
	if small["outbox.claim_deliveries"] != 1 || nSmall != 1 {
		t.Fatalf("claim of 10 called %v; want outbox.claim_deliveries once and nothing else (no expired lease: no recovery)", small)
	}
	// With an expired lease the recovery step runs: still a constant, not per row.
	if _, err := b.Admin.Exec(context.Background(),
		`UPDATE outbox.outbox_deliveries SET status = 'leased', lease_owner = 'gone', lease_token = gen_random_uuid(),
		        lease_expires_at = now() - interval '1 minute'
		  WHERE (destination, event_id) IN (SELECT destination, event_id FROM outbox.outbox_deliveries
		                                     WHERE destination = $1 AND status = 'pending' ORDER BY available_at, created_at, event_id LIMIT 5)`,
		kernelfix.DestMetering); err != nil {
		t.Fatal(err)
	}
	rs, nRs := hpcClaimCalls(t, b.Dsn, 10)
	rl, nRl := hpcClaimCalls(t, b.Dsn, 100)
	if nRs != nRl || rs["outbox._dispatch_recover"] != 1 {
		t.Fatalf("with expired leases: claim of 10 made %d %v, claim of 100 made %d %v; want equal, one recovery", nRs, rs, nRl, rl)
	}
}

// HP-3: the claim is planned for its actual arguments on every call (force_custom_plan on the
// function), never from a generic plan cached while the table was small.
func TestClaimHotPathPlanMode(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	var cfg []string
	if err := b.Admin.QueryRow(context.Background(),
		`SELECT proconfig FROM pg_proc WHERE oid = 'outbox.claim_deliveries(text, text[], integer, interval, text)'::regprocedure`).Scan(&cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cfg {
		found = found || c == "plan_cache_mode=force_custom_plan"
	}
	if !found {
		t.Fatalf("claim_deliveries proconfig %v lacks plan_cache_mode=force_custom_plan (HP-3)", cfg)
	}
}

// R-CL-1, R-CL-3, HP-5: the claimed rows are exactly what a claim promises - per claimed
// delivery one update (status leased, owner, a fresh token and attempt id, expiry = start +
// lease, attempt_count + 1, last_attempt_at = the start) and one attempt start carrying the same
// attempt id, token, number, worker and time; returned in claim order; every token and attempt
// id distinct (none equal to another's or to its own pair); unclaimed rows untouched. A second
// claim cycle (after a retry) keeps it so, with attempt number 2.
func TestClaimHotPathRowsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	ids := hpcBacklog(t, b.Dsn, 60)
	check := func(cs []pgcall.ClaimedDelivery, wantAttempt int, lease time.Duration) {
		t.Helper()
		seen := map[string]bool{}
		for i, c := range cs {
			if seen[c.AttemptID] || seen[c.LeaseToken] || c.AttemptID == c.LeaseToken {
				t.Fatalf("row %d: attempt %s token %s not distinct", i, c.AttemptID, c.LeaseToken)
			}
			seen[c.AttemptID], seen[c.LeaseToken] = true, true
			if c.AttemptNumber != wantAttempt || c.Destination != kernelfix.DestMetering {
				t.Fatalf("row %d: attempt number %d destination %s", i, c.AttemptNumber, c.Destination)
			}
			var ok bool
			if err := b.Admin.QueryRow(ctx, `
				SELECT d.status = 'leased' AND d.lease_owner = $3 AND d.lease_token = $4::uuid
				   AND d.current_attempt_id = $5::uuid AND d.attempt_count = $6 AND d.lease_expires_at = $7
				   AND d.last_attempt_at = s.started_at AND d.lease_expires_at = s.started_at + $8::interval
				   AND s.destination = d.destination AND s.event_id = d.event_id AND s.attempt_number = d.attempt_count
				   AND s.lease_token = d.lease_token AND s.worker = $3
				   AND (SELECT count(*) FROM outbox.outbox_delivery_attempt_starts x
				         WHERE x.destination = d.destination AND x.event_id = d.event_id) = $6
				  FROM outbox.outbox_deliveries AS d
				  JOIN outbox.outbox_delivery_attempt_starts AS s ON s.attempt_id = d.current_attempt_id
				 WHERE d.destination = $1 AND d.event_id = $2::uuid`,
				c.Destination, c.EventID, kernelfix.WorkerA, c.LeaseToken, c.AttemptID, c.AttemptNumber, c.LeaseExpiresAt,
				fmt.Sprintf("%d seconds", int(lease.Seconds()))).Scan(&ok); err != nil || !ok {
				t.Fatalf("row %d (%s): delivery and attempt start do not match the claim: %v %v", i, c.EventID, ok, err)
			}
		}
	}
	first := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 40, time.Minute, kernelfix.DestMetering)
	if len(first) != 40 {
		t.Fatalf("claimed %d, want 40", len(first))
	}
	for i, c := range first { // one append: same available_at/created_at, so event_id order
		if i > 0 && c.EventID <= first[i-1].EventID {
			t.Fatalf("claim order broken at row %d", i)
		}
	}
	check(first, 1, time.Minute)
	claimed := map[string]bool{}
	for _, c := range first {
		claimed[c.EventID] = true
	}
	var untouched int
	if err := b.Admin.QueryRow(ctx, `SELECT count(*)::int FROM outbox.outbox_deliveries AS d
		WHERE d.destination = $1 AND d.status = 'pending' AND d.attempt_count = 0 AND d.lease_token IS NULL
		  AND d.current_attempt_id IS NULL AND d.event_id = ANY ($2::uuid[])
		  AND NOT EXISTS (SELECT 1 FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = d.event_id)`,
		kernelfix.DestMetering, ids).Scan(&untouched); err != nil {
		t.Fatal(err)
	}
	if untouched != 20 {
		t.Fatalf("%d unclaimed deliveries untouched, want 20", untouched)
	}
	// retry the first claim's deliveries (immediately due: fast retry policy), claim them again
	dispatcherfix.FastRetry(t, b.Admin, kernelfix.DestMetering, 10)
	items := make([]pgcall.RetryItem, len(first))
	for i, c := range first {
		items[i] = pgcall.RetryItem{Fence: kernelfix.FenceOf(c), ErrorCode: "consumer_unavailable"}
	}
	outs, err := pgcall.RetryDeliveries(ctx, b.Disp, items)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var second []pgcall.ClaimedDelivery
	for deadline := time.Now().Add(10 * time.Second); len(second) < 60 && time.Now().Before(deadline); {
		second = append(second, kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 100, time.Minute, kernelfix.DestMetering)...)
		if len(second) < 60 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var again []pgcall.ClaimedDelivery
	for _, c := range second {
		if claimed[c.EventID] {
			again = append(again, c)
		}
	}
	if len(second) != 60 || len(again) != 40 {
		t.Fatalf("second round claimed %d (%d retried), want 60 (40)", len(second), len(again))
	}
	check(again, 2, time.Minute)
	for _, a := range again {
		for _, f := range first {
			if a.EventID == f.EventID && (a.AttemptID == f.AttemptID || a.LeaseToken == f.LeaseToken) {
				t.Fatalf("%s: the second attempt reuses the first's attempt id or token", a.EventID)
			}
		}
	}
}
