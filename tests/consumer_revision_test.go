package tests

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

// ckOpsState is the operations projector's observable state, without wall-clock columns.
func ckOpsState(t *testing.T, b *ckBundle) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT 'timeline ' || event_id || ' ' || operation_id || ' ' || entry_kind || ' ' || aggregate_id || '@' || aggregate_revision
		  FROM refconsumer_operations.operation_timeline
		UNION ALL SELECT 'operation ' || operation_id || ' ' || run_id || ' ' || coalesce(reservation_id, '-')
		  FROM refconsumer_operations.operations
		UNION ALL SELECT 'pending ' || event_id || ' ' || (linked_at IS NOT NULL)::text FROM refconsumer_operations.pending_unlinked_reservations
		UNION ALL SELECT 'effect ' || event_id || ' ' || applied_count FROM refconsumer_operations.effects
		UNION ALL SELECT 'receipt ' || event_id || ' ' || receipt_digest || ' ' || receipt_ref FROM inbox.inbox_receipts
		UNION ALL SELECT 'progress ' || aggregate_id || ' ' || last_revision FROM inbox.inbox_revision_progress
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// R-CO-3, T-4: revisions 1, 3, 2 of one aggregate arrive at the ordered operations projector.
// 3 is retryable awaiting_revision with no receipt and no mutation (the gap is recorded);
// 2 applies and closes the gap; 3 then applies. The final state (timeline, receipts and their
// digests, progress, effects) equals the state of a second database fed 1, 2, 3 in order.
func TestConsumerRevisionGap(t *testing.T) {
	t.Parallel()
	spec := ckSpec(t, reference.OperationsProjector)
	keys := []consumer.EventKey{reference.BillingFinalizationCommitted, reference.BillingSettlementTransition, reference.BillingCaseResolutionApplied}
	var ds []wire.Delivery
	for i, k := range keys {
		env := ckEnv(k, "reservation-7", int64(i+1))
		env["operationId"] = "op-7"
		ds = append(ds, ckDelivery(t, spec, env))
	}

	outOfOrder := ckSetup(t)
	kit := outOfOrder.kit(t, spec.ConsumerName, nil)
	ckWantAck(t, ckDeliver(t, kit, ds[0]))
	r := ckDeliver(t, kit, ds[2])
	ckWant(t, r, wire.Retryable, consumer.CodeAwaitingRevision)
	if n := ckReceipts(t, outOfOrder.pool, spec.ConsumerName, ds[2].EventID); n != 0 {
		t.Fatalf("revision 3 got a receipt while 2 is missing")
	}
	if n := ckEffects(t, outOfOrder.pool, spec, ds[2].EventID); n != 0 {
		t.Fatalf("revision 3 applied while 2 is missing")
	}
	if n := ckCount(t, outOfOrder.pool, `SELECT count(*) FROM inbox.inbox_revision_gaps
		WHERE aggregate_id = 'reservation-7' AND expected_revision = 2 AND seen_revision = 3 AND closed_at IS NULL`); n != 1 {
		t.Fatalf("open gap rows (expected 2, seen 3) = %d, want 1", n)
	}
	// A retry before 2 arrives: still waiting, never turned into success.
	ckWant(t, ckDeliver(t, kit, ds[2]), wire.Retryable, consumer.CodeAwaitingRevision)
	ckWantAck(t, ckDeliver(t, kit, ds[1]))
	if n := ckCount(t, outOfOrder.pool, `SELECT count(*) FROM inbox.inbox_revision_gaps
		WHERE aggregate_id = 'reservation-7' AND closed_by_revision = 2 AND observation_count = 2`); n != 1 {
		t.Fatalf("the gap was not closed by revision 2")
	}
	ckWantAck(t, ckDeliver(t, kit, ds[2]))

	inOrder := ckSetup(t)
	kit2 := inOrder.kit(t, spec.ConsumerName, nil)
	for _, d := range ds {
		ckWantAck(t, ckDeliver(t, kit2, d))
	}
	a, b := ckOpsState(t, outOfOrder), ckOpsState(t, inOrder)
	if len(a) != 3*3+1 { // 3 timeline entries, 3 effects, 3 receipts, 1 progress row
		t.Fatalf("state has %d rows:\n%v", len(a), a)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("out-of-order state differs from in-order state:\n%v\n%v", a, b)
	}
}

// R-OP-1, R-CO-6: wallet.reserved before its run waits in pending_unlinked_reservations (no
// fake operation) and is linked when run.created is applied; in the other order it links at
// once. Both orders end in the same operation and timeline.
func TestConsumerOperationsWalletFirst(t *testing.T) {
	t.Parallel()
	spec := ckSpec(t, reference.OperationsProjector)
	mk := func(i int) (wire.Delivery, wire.Delivery) {
		run := ckEnv(reference.RunCreated, fmt.Sprintf("run-%d", i), 1)
		wallet := ckEnv(reference.WalletReserved, fmt.Sprintf("reservation-%d", i), 1)
		for _, e := range []map[string]any{run, wallet} {
			e["operationId"], e["correlationId"] = fmt.Sprintf("op-%d", i), fmt.Sprintf("corr-%d", i)
		}
		wallet["causationId"] = run["eventId"]
		return ckDelivery(t, spec, run), ckDelivery(t, spec, wallet)
	}
	outcome := func(r wire.Result) string {
		doc := ckWantAck(t, r)
		var m map[string]any
		if err := jsonUnmarshal(doc.Receipt, &m); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(m["projectionOutcome"])
	}
	b := ckSetup(t)
	kit := b.kit(t, spec.ConsumerName, nil)

	run1, wallet1 := mk(1)
	if o := outcome(ckDeliver(t, kit, wallet1)); o != reference.OutcomeReservationPending {
		t.Fatalf("wallet first: %s", o)
	}
	if n := ckCount(t, b.pool, `SELECT count(*) FROM refconsumer_operations.operations`); n != 0 {
		t.Fatalf("wallet-first created %d operations", n)
	}
	if o := outcome(ckDeliver(t, kit, run1)); o != reference.OutcomeOperationCreated {
		t.Fatalf("run: %s", o)
	}
	run2, wallet2 := mk(2)
	outcome(ckDeliver(t, kit, run2))
	if o := outcome(ckDeliver(t, kit, wallet2)); o != reference.OutcomeReservationLinked {
		t.Fatalf("wallet after run: %s", o)
	}
	for i := 1; i <= 2; i++ {
		var res string
		var entries int
		if err := b.pool.QueryRow(context.Background(), `SELECT o.reservation_id,
			(SELECT count(*) FROM refconsumer_operations.operation_timeline t WHERE t.operation_id = o.operation_id
			   AND t.entry_kind IN ('run_created', 'wallet_reserved'))
			FROM refconsumer_operations.operations o WHERE o.operation_id = $1`, fmt.Sprintf("op-%d", i)).Scan(&res, &entries); err != nil {
			t.Fatal(err)
		}
		if res != fmt.Sprintf("reservation-%d", i) || entries != 2 {
			t.Fatalf("operation %d: reservation %s, %d timeline entries; want linked with 2", i, res, entries)
		}
	}
	if n := ckCount(t, b.pool, `SELECT count(*) FROM refconsumer_operations.pending_unlinked_reservations WHERE linked_at IS NULL`); n != 0 {
		t.Fatalf("%d reservations still unlinked", n)
	}
}

// R-CO-3: a different event claiming an aggregate revision the ordered consumer already
// applied is never guessed into success: non-retryable consumer_rejected, nothing applied,
// while the redelivery of the event that did apply is still acknowledged with its receipt.
func TestConsumerRevisionAlreadyHeldByAnotherEvent(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.OperationsProjector)
	kit := b.kit(t, spec.ConsumerName, nil)
	first := ckDelivery(t, spec, ckEnv(reference.BillingFinalizationCommitted, "agg-r", 1))
	ckWantAck(t, ckDeliver(t, kit, first))
	other := ckDelivery(t, spec, ckEnv(reference.BillingSettlementTransition, "agg-r", 1))
	ckWant(t, ckDeliver(t, kit, other), wire.NonRetryable, consumer.CodeConsumerRejected)
	if n := ckEffects(t, b.pool, spec, other.EventID); n != 0 {
		t.Fatalf("the second event at revision 1 was applied")
	}
	ckWantAck(t, ckDeliver(t, kit, first))
}
