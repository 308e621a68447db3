package kernel

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
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/producer"
)

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
			EventType: kernelfix.Metering, EventSchemaVersion: "1", AggregateID: "hp-" + s, AggregateRevision: 1,
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
	kernelfix.FlushStats(t, prod)
}

func hpClaim(t *testing.T, db pgcall.DBTX, n int) []pgcall.ClaimedDelivery {
	t.Helper()
	cs, err := pgcall.ClaimDeliveries(context.Background(), db, pgcall.ClaimParams{Worker: kernelfix.WorkerA,
		Destinations: []string{kernelfix.DestMetering}, BatchSize: n, Lease: kernelfix.LongLease})
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
	b := kernelfix.Setup(t)
	hpBacklog(t, b.Dsn, "claim", 110)
	disp := kernelfix.StatsSession(t, b.Dsn, "outbox_dispatcher")
	calls := func(n int) map[string]int64 {
		return kernelfix.CountCalls(t, disp, b.Admin, func(tx pgx.Tx) error { hpClaim(t, tx, n); return nil }, b.Disp)
	}
	small, large := calls(10), calls(100)
	hpCompare(t, "claim_deliveries", small, large)
}

// HP-1: ack_deliveries of an all-success batch of 10 and of 100 (receipts and digest
// candidates built in Go, as bench/outboxbench and the dispatcher do) makes the same calls.
func TestHotPathAckCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	hpBacklog(t, b.Dsn, "ack", 110)
	disp := kernelfix.StatsSession(t, b.Dsn, "outbox_dispatcher")
	small, large := hpClaim(t, b.Disp, 10), hpClaim(t, b.Disp, 100)
	calls := func(cs []pgcall.ClaimedDelivery) map[string]int64 {
		items := make([]pgcall.AckItem, len(cs))
		for i, c := range cs {
			items[i] = ackItem(t, c, true)
		}
		return kernelfix.CountCalls(t, disp, b.Admin, func(tx pgx.Tx) error {
			out, err := pgcall.AckDeliveries(context.Background(), tx, items)
			if err != nil {
				return err
			}
			hpOutcomes(t, out, len(cs), "complete")
			return nil
		}, b.Disp)
	}
	hpCompare(t, "ack_deliveries", calls(small), calls(large))
}

// HP-1: retry_deliveries of an all-pending batch of 10 and of 100 makes the same calls.
func TestHotPathRetryCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	hpBacklog(t, b.Dsn, "retry", 110)
	disp := kernelfix.StatsSession(t, b.Dsn, "outbox_dispatcher")
	small, large := hpClaim(t, b.Disp, 10), hpClaim(t, b.Disp, 100)
	calls := func(cs []pgcall.ClaimedDelivery) map[string]int64 {
		items := make([]pgcall.RetryItem, len(cs))
		for i, c := range cs {
			items[i] = pgcall.RetryItem{Fence: kernelfix.FenceOf(c), ErrorCode: "consumer_unavailable"}
		}
		return kernelfix.CountCalls(t, disp, b.Admin, func(tx pgx.Tx) error {
			out, err := pgcall.RetryDeliveries(context.Background(), tx, items)
			if err != nil {
				return err
			}
			hpOutcomes(t, out, len(cs), "pending")
			return nil
		}, b.Disp)
	}
	hpCompare(t, "retry_deliveries", calls(small), calls(large))
}

// HP-1 (issue item 1: ack / retry / quarantine batches as statements): quarantine_deliveries
// of a batch of 10 and of 100 makes the same calls (the fence rule and the ref sanitizer are
// inlined SQL, the quarantine write runs once per batch).
func TestHotPathQuarantineCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	hpBacklog(t, b.Dsn, "quarantine", 110)
	disp := kernelfix.StatsSession(t, b.Dsn, "outbox_dispatcher")
	small, large := hpClaim(t, b.Disp, 10), hpClaim(t, b.Disp, 100)
	calls := func(cs []pgcall.ClaimedDelivery) map[string]int64 {
		ref := "consumer said no"
		items := make([]pgcall.QuarantineItem, len(cs))
		for i, c := range cs {
			items[i] = pgcall.QuarantineItem{Fence: kernelfix.FenceOf(c), Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &ref}
		}
		return kernelfix.CountCalls(t, disp, b.Admin, func(tx pgx.Tx) error {
			out, err := pgcall.QuarantineDeliveries(context.Background(), tx, items)
			if err != nil {
				return err
			}
			hpOutcomes(t, out, len(cs), "quarantined")
			return nil
		}, b.Disp)
	}
	hpCompare(t, "quarantine_deliveries", calls(small), calls(large))
}

// HP-1: append_events (through the producer library: canonical texts and digests passed, the
// D-2 hot path) of 10 and of 100 envelopes makes the same calls, COMMIT's deferred checks
// included.
func TestHotPathAppendCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	prod := kernelfix.StatsSession(t, b.Dsn, "outbox_producer")
	calls := func(prefix string, n int) map[string]int64 {
		return kernelfix.CountCalls(t, prod, b.Admin, func(tx pgx.Tx) error {
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
