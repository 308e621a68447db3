package tests

// HP-1 (SPEC §12a): on the success path of claim_deliveries, ack_deliveries / retry_deliveries
// and append_events no PL/pgSQL function is called once per item: the number of function calls
// per batch is a small constant, independent of the batch size. Measured, not timed: the
// per-function call counts of pg_stat_user_functions (track_functions = all, set in the
// session) around one call with a batch of 10 and one with a batch of 100 must be equal,
// function by function. Triggers and deferred constraint triggers run at COMMIT count too
// (their trigger functions are PL/pgSQL functions called per row).

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/producer"
)

// hpSession: a superuser connection with track_functions = 'all' (a superuser setting) that
// then acts as role, and a superuser connection that reads the statistics.
func hpSession(t *testing.T, dsn, role string) *pgx.Conn {
	t.Helper()
	c := testdb.Conn(t, dsn, "")
	for _, q := range []string{`SET track_functions = 'all'`, "SET ROLE " + pgx.Identifier{role}.Sanitize()} {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return c
}

// hpFunctionCalls is the call count of every user function of the database, as the statistics
// have them once conn's pending counts are flushed (reader: another connection).
func hpFunctionCalls(t *testing.T, conn, reader *pgx.Conn, others ...*pgx.Conn) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	// Every connection of the test flushes its pending counts first: the cluster tracks all
	// function calls, and a fixture call left pending (a backend flushes at most once a second,
	// and only 10 s later when idle) would otherwise land inside the measured window.
	hpFlush(t, append([]*pgx.Conn{conn, reader}, others...)...)
	if _, err := reader.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	rows, err := reader.Query(ctx, `SELECT schemaname || '.' || funcname, sum(calls)::bigint
	                                  FROM pg_stat_user_functions GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hpFlush makes each connection flush its pending statistics (before its next ReadyForQuery).
func hpFlush(t *testing.T, conns ...*pgx.Conn) {
	t.Helper()
	for _, c := range conns {
		if _, err := c.Exec(context.Background(), `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(context.Background(), `SELECT 1`); err != nil { // a second round trip: the flush has happened
			t.Fatal(err)
		}
	}
}

// hpCount runs op (its own transaction, committed, so deferred triggers are counted) on conn
// and returns the calls it made per function (others: the test's other live connections, whose
// pending counts are flushed before each reading).
func hpCount(t *testing.T, conn, reader *pgx.Conn, op func(tx pgx.Tx) error, others ...*pgx.Conn) map[string]int64 {
	t.Helper()
	before := hpFunctionCalls(t, conn, reader, others...)
	if err := pgx.BeginFunc(context.Background(), conn, op); err != nil {
		t.Fatal(err)
	}
	after := hpFunctionCalls(t, conn, reader, others...)
	d := map[string]int64{}
	for name, n := range after {
		if n -= before[name]; n != 0 {
			d[name] = n
		}
	}
	return d
}

// hpCompare fails unless the per-function call counts of a batch of 10 and of 100 are equal,
// naming every function whose count grows with the batch.
func hpCompare(t *testing.T, what string, small, large map[string]int64) {
	t.Helper()
	if self := "outbox." + what; small[self] != 1 || large[self] != 1 {
		t.Fatalf("%s counted %d and %d times, want 1 per call: function statistics not collected (track_functions)", self, small[self], large[self])
	}
	names := map[string]bool{}
	for n := range small {
		names[n] = true
	}
	for n := range large {
		names[n] = true
	}
	var all, diff []string
	var tot10, tot100 int64
	for n := range names {
		all = append(all, n)
		tot10 += small[n]
		tot100 += large[n]
	}
	sort.Strings(all)
	for _, n := range all {
		if small[n] != large[n] {
			diff = append(diff, fmt.Sprintf("%s: %d calls for 10 items, %d for 100", n, small[n], large[n]))
		}
	}
	t.Logf("%s: %d function calls for a batch of 10, %d for 100", what, tot10, tot100)
	for _, n := range all {
		t.Logf("  %s: %d / %d", n, small[n], large[n])
	}
	if len(diff) > 0 {
		t.Errorf("HP-1: %s calls PL/pgSQL functions per item on the success path (function calls must not depend on the batch size):\n  %s",
			what, strings.Join(diff, "\n  "))
	}
}

// hpEvents are n reference events of one mandatory destination (metering_input_processor), one
// aggregate each.
func hpEvents(prefix string, n int) []producer.Event {
	evs := make([]producer.Event, n)
	for i := range evs {
		s := fmt.Sprintf("%s-%d", prefix, i)
		evs[i] = producer.Event{
			EventType: dxMetering, EventSchemaVersion: "1", AggregateID: "hp-" + s, AggregateRevision: 1,
			Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "tenant-1", WorkspaceID: "workspace-1"},
			CorrelationID: "corr-" + s, OperationID: "op-" + s, CausationID: "cause-" + s,
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 300))),
		}
	}
	return evs
}

// hpBacklog appends n events in one transaction through the producer library (not measured).
func hpBacklog(t *testing.T, dsn, prefix string, n int) {
	t.Helper()
	prod := testdb.Conn(t, dsn, "outbox_producer")
	if err := pgx.BeginFunc(context.Background(), prod, func(tx pgx.Tx) error {
		_, err := producer.AppendMany(context.Background(), tx, hpEvents(prefix, n))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hpFlush(t, prod)
}

func hpClaim(t *testing.T, db pgcall.DBTX, n int) []pgcall.ClaimedDelivery {
	t.Helper()
	cs, err := pgcall.ClaimDeliveries(context.Background(), db, pgcall.ClaimParams{Worker: dxWorkerA,
		Destinations: []string{dxDestMetering}, BatchSize: n, Lease: dxLongLease})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != n {
		t.Fatalf("claimed %d, want %d", len(cs), n)
	}
	return cs
}

func hpOutcomes(t *testing.T, out []pgcall.ItemOutcome, n int, want string) {
	t.Helper()
	if len(out) != n {
		t.Fatalf("%d outcomes, want %d", len(out), n)
	}
	for i, o := range out {
		if o.Outcome != want {
			t.Fatalf("item %d: %+v, want %s (an all-success batch)", i, o, want)
		}
	}
}

// HP-1: claim_deliveries of 10 and of 100 from a backlog makes the same function calls.
func TestHotPathClaimCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	hpBacklog(t, b.dsn, "claim", 110)
	disp := hpSession(t, b.dsn, "outbox_dispatcher")
	calls := func(n int) map[string]int64 {
		return hpCount(t, disp, b.admin, func(tx pgx.Tx) error { hpClaim(t, tx, n); return nil }, b.disp)
	}
	small, large := calls(10), calls(100)
	hpCompare(t, "claim_deliveries", small, large)
}

// HP-1: ack_deliveries of an all-success batch of 10 and of 100 (receipts and digest
// candidates built in Go, as bench/outboxbench and the dispatcher do) makes the same calls.
func TestHotPathAckCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	hpBacklog(t, b.dsn, "ack", 110)
	disp := hpSession(t, b.dsn, "outbox_dispatcher")
	small, large := hpClaim(t, b.disp, 10), hpClaim(t, b.disp, 100)
	calls := func(cs []pgcall.ClaimedDelivery) map[string]int64 {
		items := make([]pgcall.AckItem, len(cs))
		for i, c := range cs {
			items[i] = ackItem(t, c, true)
		}
		return hpCount(t, disp, b.admin, func(tx pgx.Tx) error {
			out, err := pgcall.AckDeliveries(context.Background(), tx, items)
			if err != nil {
				return err
			}
			hpOutcomes(t, out, len(cs), "complete")
			return nil
		}, b.disp)
	}
	hpCompare(t, "ack_deliveries", calls(small), calls(large))
}

// HP-1: retry_deliveries of an all-pending batch of 10 and of 100 makes the same calls.
func TestHotPathRetryCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	hpBacklog(t, b.dsn, "retry", 110)
	disp := hpSession(t, b.dsn, "outbox_dispatcher")
	small, large := hpClaim(t, b.disp, 10), hpClaim(t, b.disp, 100)
	calls := func(cs []pgcall.ClaimedDelivery) map[string]int64 {
		items := make([]pgcall.RetryItem, len(cs))
		for i, c := range cs {
			items[i] = pgcall.RetryItem{Fence: fenceOf(c), ErrorCode: "consumer_unavailable"}
		}
		return hpCount(t, disp, b.admin, func(tx pgx.Tx) error {
			out, err := pgcall.RetryDeliveries(context.Background(), tx, items)
			if err != nil {
				return err
			}
			hpOutcomes(t, out, len(cs), "pending")
			return nil
		}, b.disp)
	}
	hpCompare(t, "retry_deliveries", calls(small), calls(large))
}

// HP-1 (issue item 1: ack / retry / quarantine batches as statements): quarantine_deliveries
// of a batch of 10 and of 100 makes the same calls (the fence rule and the ref sanitizer are
// inlined SQL, the quarantine write runs once per batch).
func TestHotPathQuarantineCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	hpBacklog(t, b.dsn, "quarantine", 110)
	disp := hpSession(t, b.dsn, "outbox_dispatcher")
	small, large := hpClaim(t, b.disp, 10), hpClaim(t, b.disp, 100)
	calls := func(cs []pgcall.ClaimedDelivery) map[string]int64 {
		ref := "consumer said no"
		items := make([]pgcall.QuarantineItem, len(cs))
		for i, c := range cs {
			items[i] = pgcall.QuarantineItem{Fence: fenceOf(c), Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &ref}
		}
		return hpCount(t, disp, b.admin, func(tx pgx.Tx) error {
			out, err := pgcall.QuarantineDeliveries(context.Background(), tx, items)
			if err != nil {
				return err
			}
			hpOutcomes(t, out, len(cs), "quarantined")
			return nil
		}, b.disp)
	}
	hpCompare(t, "quarantine_deliveries", calls(small), calls(large))
}

// HP-1: append_events (through the producer library: canonical texts and digests passed, the
// D-2 hot path) of 10 and of 100 envelopes makes the same calls, COMMIT's deferred checks
// included.
func TestHotPathAppendCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	prod := hpSession(t, b.dsn, "outbox_producer")
	calls := func(prefix string, n int) map[string]int64 {
		return hpCount(t, prod, b.admin, func(tx pgx.Tx) error {
			rs, err := producer.AppendMany(context.Background(), tx, hpEvents(prefix, n))
			if err == nil && len(rs) != n {
				err = fmt.Errorf("%d results, want %d", len(rs), n)
			}
			return err
		})
	}
	small, large := calls("a10", 10), calls("a100", 100)
	hpCompare(t, "append_events", small, large)
}
