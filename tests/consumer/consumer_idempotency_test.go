package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

// R-CO-1, R-AK-8, T-4: the same event delivered three times (lost acks) yields one effect, one
// receipt and byte-identical ack and receipt documents each time, for an unordered recorder
// and for the ordered operations projector.
func TestConsumerReceiptIdempotency(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	cases := []struct {
		name string
		key  consumer.EventKey
	}{
		{reference.MeteringInputProcessorConsumer, reference.ExecutionAttemptEligibility},
		{reference.OperationsProjector, reference.BillingFinalizationCommitted},
		{reference.BillingFinalizationCoordinatorConsumer, reference.ExecutionRunFinalizationClosed},
		{reference.BillingSettlementCatchUpConsumer, reference.MeteringSettlementInput},
	}
	for _, tc := range cases {
		spec := consumerfix.Spec(t, tc.name)
		kit := b.Kit(t, tc.name, nil)
		d := consumerfix.Delivery(t, spec, consumerfix.Env(tc.key, "agg-"+tc.name, 1))
		first := consumerfix.Deliver(t, kit, d)
		doc := consumerfix.WantAck(t, first)
		if doc.Kind != spec.Kind {
			t.Fatalf("%s: receipt kind %s, want %s", tc.name, doc.Kind, spec.Kind)
		}
		for i := 2; i <= 3; i++ {
			d.AttemptID, d.AttemptNumber = testfix.NewUUID(), i
			again := consumerfix.Deliver(t, kit, d)
			consumerfix.WantAck(t, again)
			if !bytes.Equal(again.Ack, first.Ack) || !bytes.Equal(again.Receipt, first.Receipt) {
				t.Fatalf("%s delivery %d: ack/receipt differ from the first:\n%s\n%s", tc.name, i, again.Ack, first.Ack)
			}
		}
		if n := consumerfix.Effects(t, b.Pool, spec, d.EventID); n != 1 {
			t.Fatalf("%s: applied %d times, want 1", tc.name, n)
		}
		if n := consumerfix.Receipts(t, b.Pool, spec.ConsumerName, d.EventID); n != 1 {
			t.Fatalf("%s: %d receipts, want 1", tc.name, n)
		}
	}
}

// R-CO-1, R-CO-2 (concurrency): two deliveries of the same event run at once (an expired lease
// re-delivered while the first attempt is still applying). Both are inside Apply together
// (barrier); the loser's record_receipt answers existing, its transaction (with its duplicate
// mutation) rolls back, and it answers with the winner's receipt: one effect, same ack.
func TestConsumerConcurrentRedelivery(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
	var arrived sync.WaitGroup
	arrived.Add(2)
	release := make(chan struct{})
	kit := b.Kit(t, spec.ConsumerName, func(c *consumer.Config) {
		inner := c.Apply
		c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
			arrived.Done()
			<-release // both transactions are past read_receipt now
			return inner(ctx, tx, ev)
		}
	})
	d := consumerfix.Delivery(t, spec, consumerfix.Env(reference.GatewayEvidenceAvailability, "attempt-1", 1))
	results := make([]wire.Result, 2)
	var done sync.WaitGroup
	for i := range results {
		done.Add(1)
		go func() {
			defer done.Done()
			results[i], _ = kit.Deliver(context.Background(), d)
		}()
	}
	arrived.Wait()
	close(release)
	done.Wait()
	a, c := consumerfix.WantAck(t, results[0]), consumerfix.WantAck(t, results[1])
	if !bytes.Equal(results[0].Ack, results[1].Ack) || a.Digest != c.Digest {
		t.Fatalf("acks differ:\n%s\n%s", results[0].Ack, results[1].Ack)
	}
	if n := consumerfix.Effects(t, b.Pool, spec, d.EventID); n != 1 {
		t.Fatalf("applied %d times, want 1", n)
	}
	if n := consumerfix.Receipts(t, b.Pool, spec.ConsumerName, d.EventID); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}

// R-CO-1, T-4: a tampered envelope with the same event id (its own digest consistent, so it
// passes the digest check) meets the first receipt: OB301 → non-retryable receipt_conflict,
// nothing applied a second time.
func TestConsumerTamperedEnvelopeIsReceiptConflict(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	for _, name := range []string{reference.MeteringInputProcessorConsumer, reference.OperationsProjector} {
		spec := consumerfix.Spec(t, name)
		kit := b.Kit(t, name, nil)
		env := consumerfix.Env(spec.Events[len(spec.Events)-1], "agg-tamper", 1)
		consumerfix.WantAck(t, consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, env)))
		env["payload"] = map[string]any{"tampered": "yes"}
		r := consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, env))
		consumerfix.Want(t, r, wire.NonRetryable, consumer.CodeReceiptConflict)
		if n := consumerfix.Effects(t, b.Pool, spec, env["eventId"].(string)); n != 1 {
			t.Fatalf("%s: applied %d times, want 1", name, n)
		}
	}
}

// D-2, R-AK-7: the kit recomputes the envelope digest itself; a delivery whose claimed digest
// differs is the non-retryable digest_conflict and nothing is applied or recorded. An envelope
// outside the jcs subset or missing fields is envelope_invalid.
func TestConsumerDigestMismatch(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	spec := consumerfix.Spec(t, reference.BillingSettlementCatchUpConsumer)
	kit := b.Kit(t, spec.ConsumerName, nil)
	env := consumerfix.Env(reference.MeteringSettlementInput, "dimension-1", 1)
	d := consumerfix.Delivery(t, spec, env)
	d.EnvelopeSHA256 = ckFlip(d.EnvelopeSHA256)
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.NonRetryable, consumer.CodeDigestConflict)

	// Bytes changed in transit, claimed digest of the original.
	d = consumerfix.Delivery(t, spec, env)
	d.Envelope = bytes.Replace(d.Envelope, []byte(`"sample"`), []byte(`"changed"`), 1)
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.NonRetryable, consumer.CodeDigestConflict)

	// Not an EventEnvelope@1 (unknown field) but with a correct digest.
	bad := consumerfix.Env(reference.MeteringSettlementInput, "dimension-1", 2)
	bad["unexpected"] = 1
	consumerfix.Want(t, consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, bad)), wire.NonRetryable, consumer.CodeEnvelopeInvalid)
	// A float: outside jcs-sha256-v1.
	d = consumerfix.Delivery(t, spec, env)
	d.Envelope = []byte(`{"aggregateRevision":1.5}`)
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.NonRetryable, consumer.CodeEnvelopeInvalid)

	if n := consumerfix.Count(t, b.Pool, `SELECT count(*) FROM inbox.inbox_receipts`); n != 0 {
		t.Fatalf("%d receipts written", n)
	}
	if n := consumerfix.Effects(t, b.Pool, spec, env["eventId"].(string)); n != 0 {
		t.Fatalf("applied %d times", n)
	}
}

// ckFlip returns a different 64-hex digest.
func ckFlip(sha string) string {
	if sha[0] == '0' {
		return "1" + sha[1:]
	}
	return "0" + sha[1:]
}

// R-CO-4, T-4: an event type this consumer does not support is unknown_event_type, a known
// type under another schema version unsupported_schema — both non-retryable, nothing written.
// A delivery for another receipt contract is unsupported_schema too; one for another version of
// the kit's projection is retryable (R-PV-2, R-PV-3: another instance serves that version).
func TestConsumerUnknownSchema(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	spec := consumerfix.Spec(t, reference.OperationsProjector)
	kit := b.Kit(t, spec.ConsumerName, nil)

	// Routed to metering in the release, unknown to the projector.
	other := consumerfix.Delivery(t, spec, consumerfix.Env(reference.ExecutionAttemptEligibility, "a-1", 1))
	consumerfix.Want(t, consumerfix.Deliver(t, kit, other), wire.NonRetryable, consumer.CodeUnknownEventType)

	v3 := consumerfix.Env(reference.RunCreated, "run-1", 1)
	v3["eventSchemaVersion"] = "3.0"
	consumerfix.Want(t, consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, v3)), wire.NonRetryable, consumer.CodeUnsupportedSchema)

	d := consumerfix.Delivery(t, spec, consumerfix.Env(reference.RunCreated, "run-2", 1))
	d.RequiredProjectionVersion = 2
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.Retryable, consumer.CodeConsumerUnavailable)
	d.RequiredProjectionName = "another_projection"
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.NonRetryable, consumer.CodeUnsupportedSchema)
	d = consumerfix.Delivery(t, spec, consumerfix.Env(reference.RunCreated, "run-3", 1))
	d.ExpectedReceiptSchemaVersion = 2
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.NonRetryable, consumer.CodeUnsupportedSchema)

	// Misrouted (another destination's delivery): a configuration error, retryable.
	d = consumerfix.Delivery(t, spec, consumerfix.Env(reference.RunCreated, "run-4", 1))
	d.Destination = "metering_input_processor"
	consumerfix.Want(t, consumerfix.Deliver(t, kit, d), wire.Retryable, consumer.CodeConsumerUnavailable)

	for _, q := range []string{`SELECT count(*) FROM inbox.inbox_receipts`, `SELECT count(*) FROM inbox.inbox_revision_progress`,
		`SELECT count(*) FROM refconsumer_operations.effects`} {
		if n := consumerfix.Count(t, b.Pool, q); n != 0 {
			t.Fatalf("%s = %d, want 0", q, n)
		}
	}
}

// R-CO-6: each reference consumer supports exactly the pairs the reference release routes to
// its destination, with the release's consumer name and receipt type.
func TestReferenceConsumersMatchRelease(t *testing.T) {
	t.Parallel()
	raw := ckReleaseDoc(t)
	var rel struct {
		Members []struct {
			EventType, EventSchemaVersion, Destination, ConsumerName, ExpectedReceiptType string
			ProjectionTarget                                                              struct {
				State, ProjectionName string
				ProjectionVersion     int
			}
		}
	}
	if err := json.Unmarshal(raw, &rel); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[consumer.EventKey]bool{}
	for _, m := range rel.Members {
		spec, ok := reference.Lookup(m.ConsumerName)
		if !ok || spec.Destination != m.Destination {
			t.Fatalf("release member %s→%s has no reference consumer", m.Destination, m.ConsumerName)
		}
		if want[m.ConsumerName] == nil {
			want[m.ConsumerName] = map[consumer.EventKey]bool{}
		}
		want[m.ConsumerName][consumer.EventKey{EventType: m.EventType, SchemaVersion: m.EventSchemaVersion}] = true
		info, _ := ckKindInfo(t, spec)
		if info != m.ExpectedReceiptType {
			t.Errorf("%s: receipt type %s, release expects %s", spec.ConsumerName, info, m.ExpectedReceiptType)
		}
		if (m.ProjectionTarget.State == "required") != (spec.ProjectionName != "") ||
			m.ProjectionTarget.ProjectionName != spec.ProjectionName || m.ProjectionTarget.ProjectionVersion != spec.ProjectionVersion {
			t.Errorf("%s: projection %s@%d, release %+v", spec.ConsumerName, spec.ProjectionName, spec.ProjectionVersion, m.ProjectionTarget)
		}
	}
	for _, spec := range reference.All() {
		got := map[consumer.EventKey]bool{}
		for _, k := range spec.Events {
			got[k] = true
		}
		if len(got) != len(want[spec.ConsumerName]) {
			t.Errorf("%s supports %d pairs, the release routes %d", spec.ConsumerName, len(got), len(want[spec.ConsumerName]))
		}
		for k := range want[spec.ConsumerName] {
			if !got[k] {
				t.Errorf("%s does not support %v", spec.ConsumerName, k)
			}
		}
	}
}

func ckReleaseDoc(t *testing.T) []byte {
	t.Helper()
	doc, err := reference.LoadRelease()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func ckKindInfo(t *testing.T, spec reference.Spec) (string, int) {
	info, _ := testdb.Receipts(t).Lookup(spec.Kind)
	return info.ReceiptType, info.SchemaVersion
}
