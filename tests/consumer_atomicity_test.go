package tests

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func ckExec(t *testing.T, b *ckBundle, sql string) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// ckNothingVisible asserts that neither the receipt nor any domain row of the event exists.
func ckNothingVisible(t *testing.T, b *ckBundle, spec reference.Spec, eventID string) {
	t.Helper()
	if n := ckReceipts(t, b.pool, spec.ConsumerName, eventID); n != 0 {
		t.Fatalf("receipt visible (%d)", n)
	}
	if n := ckEffects(t, b.pool, spec, eventID); n != 0 {
		t.Fatalf("mutation visible (effects %d)", n)
	}
	if n := ckCount(t, b.pool, `SELECT count(*) FROM refconsumer_metering_input.received_events WHERE event_id = $1::uuid`, eventID); n != 0 {
		t.Fatalf("mutation visible (received_events %d)", n)
	}
}

// R-CO-2: receipt and domain mutation commit together or not at all.
//   - the receipt insert fails after the mutation (a storage failure, SQLSTATE 53100):
//     retryable database_unavailable, neither visible;
//   - the mutation fails after the receipt insert (its deferred check fails at COMMIT):
//     retryable, neither visible;
//   - Apply fails after mutating: its classification is answered, neither visible;
//
// and after the failure is gone the same delivery applies exactly once.
func TestConsumerAtomicity(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	kit := b.kit(t, spec.ConsumerName, nil)
	ckExec(t, b, `CREATE FUNCTION public.ck_fail() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'injected failure' USING ERRCODE = '53100'; END $$`)

	// Receipt insert fails after the mutation.
	d := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-a", 1))
	ckExec(t, b, `CREATE TRIGGER ck_fail BEFORE INSERT ON inbox.inbox_receipts FOR EACH ROW EXECUTE FUNCTION public.ck_fail()`)
	ckWant(t, ckDeliver(t, kit, d), wire.Retryable, consumer.CodeDatabaseUnavailable)
	ckNothingVisible(t, b, spec, d.EventID)
	ckExec(t, b, `DROP TRIGGER ck_fail ON inbox.inbox_receipts`)
	ckWantAck(t, ckDeliver(t, kit, d))
	if n := ckEffects(t, b.pool, spec, d.EventID); n != 1 {
		t.Fatalf("applied %d times after recovery, want 1", n)
	}

	// The mutation fails after the receipt insert (deferred to COMMIT).
	d = ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-b", 1))
	ckExec(t, b, `CREATE CONSTRAINT TRIGGER ck_fail_at_commit AFTER INSERT ON refconsumer_metering_input.received_events
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.ck_fail()`)
	ckWant(t, ckDeliver(t, kit, d), wire.Retryable, consumer.CodeDatabaseUnavailable)
	ckNothingVisible(t, b, spec, d.EventID)
	ckExec(t, b, `DROP TRIGGER ck_fail_at_commit ON refconsumer_metering_input.received_events`)
	ckWantAck(t, ckDeliver(t, kit, d))

	// Apply mutates, then fails: each classification is answered as such, nothing is kept.
	for _, tc := range []struct {
		err    error
		status wire.Status
		code   string
	}{
		{consumer.Retry(consumer.CodeAwaitingRevision, "owner_fact_not_readable", nil), wire.Retryable, consumer.CodeAwaitingRevision},
		{consumer.Reject(consumer.CodeConsumerRejected, "invariant", nil), wire.NonRetryable, consumer.CodeConsumerRejected},
		{errors.New("plain failure"), wire.Retryable, consumer.CodeConsumerUnavailable},
	} {
		failing := b.kit(t, spec.ConsumerName, func(c *consumer.Config) {
			inner := c.Apply
			c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
				if _, err := inner(ctx, tx, ev); err != nil {
					return nil, err
				}
				return nil, tc.err
			}
		})
		d := ckDelivery(t, spec, ckEnv(reference.GatewayEvidenceAvailability, "attempt-c", 1))
		ckWant(t, ckDeliver(t, failing, d), tc.status, tc.code)
		ckNothingVisible(t, b, spec, d.EventID)
	}
}

// R-CO-2, R-CO-3: for an ordered consumer the revision progress is part of the same
// transaction: an Apply failure leaves progress where it was, and the redelivery applies.
func TestConsumerAtomicityOrderedProgress(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.OperationsProjector)
	fail := true
	kit := b.kit(t, spec.ConsumerName, func(c *consumer.Config) {
		inner := c.Apply
		c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
			f, err := inner(ctx, tx, ev)
			if fail {
				return nil, errors.New("fails after the mutation")
			}
			return f, err
		}
	})
	d := ckDelivery(t, spec, ckEnv(reference.BillingFinalizationCommitted, "agg-p", 1))
	ckWant(t, ckDeliver(t, kit, d), wire.Retryable, consumer.CodeConsumerUnavailable)
	if n := ckCount(t, b.pool, `SELECT count(*) FROM inbox.inbox_revision_progress`); n != 0 {
		t.Fatalf("progress advanced by a failed transaction")
	}
	if n := ckCount(t, b.pool, `SELECT count(*) FROM refconsumer_operations.operation_timeline`); n != 0 {
		t.Fatalf("timeline written by a failed transaction")
	}
	fail = false
	ckWantAck(t, ckDeliver(t, kit, d))
	if n := ckCount(t, b.pool, `SELECT last_revision FROM inbox.inbox_revision_progress WHERE aggregate_id = 'agg-p'`); n != 1 {
		t.Fatalf("progress %d, want 1", n)
	}
}
