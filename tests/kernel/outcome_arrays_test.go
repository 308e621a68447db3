package kernel

// HP-2 (SPEC §12a), R-AK-9: the typed forms of ack_deliveries / retry_deliveries /
// quarantine_deliveries (parallel arrays, as internal/pgcall sends them and the dispatcher
// calls them) answer like the JSON forms - same outcomes, same SQLSTATEs, same rows written -
// parse the batch once (outbox._outcome_items, never the JSON parser outbox._batch_items) and
// make a constant number of function calls per batch (HP-1).

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

func taWant(t *testing.T, out []pgcall.ItemOutcome, want [][2]string) {
	t.Helper()
	if len(out) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(out), len(want), out)
	}
	for i, w := range want {
		if out[i].Outcome != w[0] || out[i].SQLState != w[1] {
			t.Errorf("item %d: %+v, want %s %q", i, out[i], w[0], w[1])
		}
	}
}

// R-AK-9 through the typed ack form: accepted items are acknowledged, finished and published;
// a stale token (OB001), a wrong ack (OB002), a missing attempt id (OB001) and a delivery
// named twice (OB001) are refused and change nothing; rows in input order.
func TestTypedAckDeliveriesMixed(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-typed", int64(i+1))
	}
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	if len(cs) != 5 {
		t.Fatalf("claimed %d", len(cs))
	}
	good0 := ackItem(t, cs[0], true)
	stale := ackItem(t, cs[1], true)
	stale.LeaseToken = "00000000-0000-4000-8000-000000000000"
	bad := ackItem(t, cs[2], false)
	bad.Ack = json.RawMessage(`{"destination":"x"}`)
	good3 := ackItem(t, cs[3], false) // no candidate: the database canonicalizes
	noAttempt := ackItem(t, cs[4], true)
	noAttempt.AttemptID = ""
	dup := ackItem(t, cs[0], true)
	before := map[int]string{}
	for _, i := range []int{1, 2, 4} {
		before[i] = kernelfix.Row(t, b.Admin, cs[i].Destination, cs[i].EventID)
	}
	out, err := pgcall.AckDeliveriesTyped(ctx, b.Disp, []pgcall.AckItem{good0, stale, bad, good3, noAttempt, dup})
	if err != nil {
		t.Fatal(err)
	}
	taWant(t, out, [][2]string{{"complete", ""}, {"rejected", "OB001"}, {"rejected", "OB002"}, {"complete", ""}, {"rejected", "OB001"}, {"rejected", "OB001"}})
	if out[0].EventID != cs[0].EventID || out[3].EventID != cs[3].EventID || out[5].EventID != cs[0].EventID {
		t.Fatalf("rows not in input order: %+v", out)
	}
	for _, i := range []int{0, 3} {
		if s := kernelfix.Status(t, b.Admin, cs[i].Destination, cs[i].EventID); s != "acknowledged" {
			t.Errorf("item %d: status %s", i, s)
		}
		if o, _ := kernelfix.Finish(t, b.Admin, cs[i].AttemptID); o != "acknowledged" {
			t.Errorf("item %d: finish %s", i, o)
		}
		if dxPublishedAt(t, b.Admin, cs[i].EventID) == nil {
			t.Errorf("item %d: not published", i)
		}
	}
	if kernelfix.Finishes(t, b.Admin, cs[0].AttemptID) != 1 {
		t.Fatal("the delivery named twice has not exactly one finish")
	}
	for i, row := range before {
		if kernelfix.Row(t, b.Admin, cs[i].Destination, cs[i].EventID) != row || kernelfix.Finishes(t, b.Admin, cs[i].AttemptID) != 0 {
			t.Fatalf("rejected item %d changed its delivery or got a finish", i)
		}
	}
	// the refused ones are still leased to the same attempt: a correct ack goes through later
	out, err = pgcall.AckDeliveriesTyped(ctx, b.Disp, []pgcall.AckItem{ackItem(t, cs[1], true), ackItem(t, cs[2], true), ackItem(t, cs[4], true)})
	if err != nil {
		t.Fatal(err)
	}
	taWant(t, out, [][2]string{{"complete", ""}, {"complete", ""}, {"complete", ""}})
}

// R-AK-5, R-AK-6, R-AK-9 through the typed retry and quarantine forms: the same per-item
// answers as the JSON forms (exhausted -> quarantined, awaiting_revision pending, a
// non-retryable or unknown code 22023, a retryable quarantine reason 22023) and the same rows.
func TestTypedRetryQuarantineDeliveriesMixed(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	if _, err := b.Admin.Exec(ctx, `SELECT outbox.set_retry_policy($1, '1 second', 2, '1 second', 0.2, 1)`, kernelfix.DestMetering); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-typed-r", int64(i+1))
	}
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	if len(cs) != 6 {
		t.Fatalf("claimed %d", len(cs))
	}
	ref := "503\nfrom\tconsumer"
	out, err := pgcall.RetryDeliveriesTyped(ctx, b.Disp, []pgcall.RetryItem{
		{Fence: kernelfix.FenceOf(cs[0]), ErrorCode: "consumer_unavailable", ErrorRef: &ref}, // attempt 1 of 1: exhausted
		{Fence: kernelfix.FenceOf(cs[1]), ErrorCode: "awaiting_revision"},                    // never exhausts
		{Fence: kernelfix.FenceOf(cs[2]), ErrorCode: "digest_conflict"},                      // non-retryable: 22023
		{Fence: kernelfix.FenceOf(cs[3]), ErrorCode: "no_such_code"},                         // unknown: 22023
	})
	if err != nil {
		t.Fatal(err)
	}
	taWant(t, out, [][2]string{{"quarantined", ""}, {"pending", ""}, {"rejected", "22023"}, {"rejected", "22023"}})
	if s := kernelfix.Status(t, b.Admin, cs[0].Destination, cs[0].EventID); s != "quarantined" {
		t.Fatalf("exhausted: %s", s)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes
		WHERE attempt_id = $1::uuid AND outcome = 'retryable' AND retry_disposition = 'quarantined'
		  AND normalized_error_code = 'consumer_unavailable' AND sanitized_error_ref = '503 from consumer'`, cs[0].AttemptID); n != 1 {
		t.Fatal("the exhausted finish lacks its code or its sanitized ref")
	}
	if s := kernelfix.Status(t, b.Admin, cs[1].Destination, cs[1].EventID); s != "pending" {
		t.Fatalf("awaiting_revision: %s", s)
	}
	for _, i := range []int{2, 3} {
		if s := kernelfix.Status(t, b.Admin, cs[i].Destination, cs[i].EventID); s != "leased" || kernelfix.Finishes(t, b.Admin, cs[i].AttemptID) != 0 {
			t.Fatalf("rejected retry item %d changed: %s", i, s)
		}
	}

	qref := "consumer said 422"
	out, err = pgcall.QuarantineDeliveriesTyped(ctx, b.Disp, []pgcall.QuarantineItem{
		{Fence: kernelfix.FenceOf(cs[4]), Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &qref},
		{Fence: kernelfix.FenceOf(cs[5]), Reason: "consumer_unavailable", ErrorCode: "consumer_unavailable"}, // retryable reason: 22023
		{Fence: kernelfix.FenceOf(cs[2]), Reason: "consumer_rejected", ErrorCode: "no_such_code"},            // unknown code: 22023
	})
	if err != nil {
		t.Fatal(err)
	}
	taWant(t, out, [][2]string{{"quarantined", ""}, {"rejected", "22023"}, {"rejected", "22023"}})
	if s := kernelfix.Status(t, b.Admin, cs[4].Destination, cs[4].EventID); s != "quarantined" {
		t.Fatal(s)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes
		WHERE attempt_id = $1::uuid AND outcome = 'non_retryable' AND retry_disposition = 'quarantined' AND sanitized_error_ref = $2`, cs[4].AttemptID, qref); n != 1 {
		t.Fatal("the quarantine finish lacks its ref")
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'consumer_rejected'`, cs[4].EventID); n != 1 {
		t.Fatal("no quarantine row")
	}
	for _, i := range []int{2, 5} {
		if s := kernelfix.Status(t, b.Admin, cs[i].Destination, cs[i].EventID); s != "leased" || kernelfix.Finishes(t, b.Admin, cs[i].AttemptID) != 0 {
			t.Fatalf("rejected quarantine item %d changed: %s", i, s)
		}
	}
	// the same attempt again: fencing (no longer leased)
	out, err = pgcall.QuarantineDeliveriesTyped(ctx, b.Disp, []pgcall.QuarantineItem{{Fence: kernelfix.FenceOf(cs[4]), Reason: "consumer_rejected", ErrorCode: "consumer_rejected"}})
	if err != nil {
		t.Fatal(err)
	}
	taWant(t, out, [][2]string{{"rejected", "OB001"}})
}

// HP-2, R-SEC-1: a typed call whose arrays are not parallel (lengths differ, a required array
// NULL, more than one dimension) or hold more than 1000 items is refused as a whole (22023) and
// changes nothing; empty arrays answer no rows; other roles cannot call the typed forms (42501).
func TestTypedOutcomesRefuseBadArrays(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-typed-bad", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	before := kernelfix.Row(t, b.Admin, c.Destination, c.EventID)
	d, e, a, k := c.Destination, c.EventID, c.AttemptID, c.LeaseToken
	bad := []struct {
		name string
		sql  string
		args []any
	}{
		{"retry: codes shorter", `SELECT * FROM outbox.retry_deliveries($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], '{}'::text[], NULL::text[])`, []any{[]string{d}, []string{e}, []string{a}, []string{k}}},
		{"retry: codes NULL", `SELECT * FROM outbox.retry_deliveries($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], NULL::text[], NULL::text[])`, []any{[]string{d}, []string{e}, []string{a}, []string{k}}},
		{"retry: ids longer", `SELECT * FROM outbox.retry_deliveries($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], ARRAY['consumer_unavailable'], NULL::text[])`, []any{[]string{d}, []string{e, e}, []string{a}, []string{k}}},
		{"quarantine: reasons NULL", `SELECT * FROM outbox.quarantine_deliveries($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], NULL::text[], ARRAY['consumer_rejected'], NULL::text[])`, []any{[]string{d}, []string{e}, []string{a}, []string{k}}},
		{"quarantine: two dimensions", `SELECT * FROM outbox.quarantine_deliveries(ARRAY[[$1::text]], ARRAY[[$2::uuid]], ARRAY[[$3::uuid]], ARRAY[[$4::uuid]], ARRAY[['consumer_rejected']], ARRAY[['consumer_rejected']], NULL::text[])`, []any{d, e, a, k}},
		{"ack: receipts shorter", `SELECT * FROM outbox.ack_deliveries($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], ARRAY['{}'::json], '{}'::json[], NULL::text[])`, []any{[]string{d}, []string{e}, []string{a}, []string{k}}},
		{"ack: destinations NULL", `SELECT * FROM outbox.ack_deliveries(NULL::text[], $1::uuid[], $2::uuid[], $3::uuid[], ARRAY['{}'::json], ARRAY['{}'::json], NULL::text[])`, []any{[]string{e}, []string{a}, []string{k}}},
		{"retry: 1001 items", `SELECT * FROM outbox.retry_deliveries(array_fill($1::text, ARRAY[1001]), array_fill($2::uuid, ARRAY[1001]), array_fill($3::uuid, ARRAY[1001]), array_fill($4::uuid, ARRAY[1001]), array_fill('consumer_unavailable'::text, ARRAY[1001]), NULL::text[])`, []any{d, e, a, k}},
	}
	for _, tc := range bad {
		_, err := b.Disp.Exec(ctx, tc.sql, tc.args...)
		if err == nil {
			t.Fatalf("%s: accepted", tc.name)
		}
		kernelfix.WantState(t, err, "22023")
	}
	if kernelfix.Row(t, b.Admin, c.Destination, c.EventID) != before || kernelfix.Finishes(t, b.Admin, c.AttemptID) != 0 {
		t.Fatal("a refused typed call changed the delivery")
	}
	for _, q := range []string{
		`SELECT count(*) FROM outbox.ack_deliveries('{}'::text[], '{}'::uuid[], '{}'::uuid[], '{}'::uuid[], '{}'::json[], '{}'::json[], NULL::text[])`,
		`SELECT count(*) FROM outbox.retry_deliveries('{}'::text[], '{}'::uuid[], '{}'::uuid[], '{}'::uuid[], '{}'::text[], NULL::text[])`,
		`SELECT count(*) FROM outbox.quarantine_deliveries('{}'::text[], '{}'::uuid[], '{}'::uuid[], '{}'::uuid[], '{}'::text[], '{}'::text[], NULL::text[])`,
	} {
		var n int
		if err := b.Disp.QueryRow(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: %d %v", q, n, err)
		}
	}
	for _, role := range []string{"outbox_producer", "outbox_consumer", "outbox_auditor", "outbox_registrar"} {
		conn := testdb.Conn(t, b.Dsn, role)
		_, err := conn.Exec(ctx, `SELECT * FROM outbox.retry_deliveries('{}'::text[], '{}'::uuid[], '{}'::uuid[], '{}'::uuid[], '{}'::text[], NULL::text[])`)
		kernelfix.WantState(t, err, "42501")
	}
}

// HP-1, HP-2: each typed form, all-success, makes the same function calls for a batch of 10 and
// of 100; it parses once (outbox._outcome_items once, never the JSON parser outbox._batch_items)
// and never runs the full ack rule.
func TestTypedOutcomesCallsIndependentOfBatch(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	hpBacklog(t, b.Dsn, "typed", 330)
	disp := kernelfix.StatsSession(t, b.Dsn, "outbox_dispatcher")
	ref := "typed ref"
	run := map[string]func(cs []pgcall.ClaimedDelivery) func(tx pgx.Tx) error{
		"ack_deliveries": func(cs []pgcall.ClaimedDelivery) func(tx pgx.Tx) error {
			items := make([]pgcall.AckItem, len(cs))
			for i, c := range cs {
				items[i] = ackItem(t, c, true)
			}
			return func(tx pgx.Tx) error {
				out, err := pgcall.AckDeliveriesTyped(context.Background(), tx, items)
				if err == nil {
					hpOutcomes(t, out, len(cs), "complete")
				}
				return err
			}
		},
		"retry_deliveries": func(cs []pgcall.ClaimedDelivery) func(tx pgx.Tx) error {
			items := make([]pgcall.RetryItem, len(cs))
			for i, c := range cs {
				items[i] = pgcall.RetryItem{Fence: kernelfix.FenceOf(c), ErrorCode: "consumer_unavailable", ErrorRef: &ref}
			}
			return func(tx pgx.Tx) error {
				out, err := pgcall.RetryDeliveriesTyped(context.Background(), tx, items)
				if err == nil {
					hpOutcomes(t, out, len(cs), "pending")
				}
				return err
			}
		},
		"quarantine_deliveries": func(cs []pgcall.ClaimedDelivery) func(tx pgx.Tx) error {
			items := make([]pgcall.QuarantineItem, len(cs))
			for i, c := range cs {
				items[i] = pgcall.QuarantineItem{Fence: kernelfix.FenceOf(c), Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &ref}
			}
			return func(tx pgx.Tx) error {
				out, err := pgcall.QuarantineDeliveriesTyped(context.Background(), tx, items)
				if err == nil {
					hpOutcomes(t, out, len(cs), "quarantined")
				}
				return err
			}
		},
	}
	for _, name := range []string{"ack_deliveries", "retry_deliveries", "quarantine_deliveries"} {
		small, large := hpClaim(t, b.Disp, 10), hpClaim(t, b.Disp, 100)
		cs := kernelfix.CountCalls(t, disp, b.Admin, run[name](small), b.Disp)
		cl := kernelfix.CountCalls(t, disp, b.Admin, run[name](large), b.Disp)
		hpCompare(t, name, cs, cl)
		if cl["outbox._outcome_items"] != 1 || cl["outbox._batch_items"] != 0 {
			t.Errorf("%s typed: outbox._outcome_items %d, outbox._batch_items %d; want 1 and 0 (HP-2: parsed once, no JSON parser)",
				name, cl["outbox._outcome_items"], cl["outbox._batch_items"])
		}
		for _, rule := range []string{"outbox._ack_item_problem", "outbox._ack_problem", "outbox._receipt_problem"} {
			if cl[rule] != 0 {
				t.Errorf("%s typed: %s called %d times on the all-success path (HP-1)", name, rule, cl[rule])
			}
		}
	}
}
