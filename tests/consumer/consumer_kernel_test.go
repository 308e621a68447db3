package consumer

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// R-CO-1..6, R-AK-2, R-AK-8, T-4 end to end with the real kernel, in process: one event of each
// of the 13 reference pairs is appended (14 mandatory deliveries) into a database that is
// producer and consumer at once; the dispatcher's claim hands each delivery to the reference
// consumer of its destination through the in-process registry transport; outbox.ack_delivery
// accepts every ack + receipt the kit answers (the receipt contract holds), once for the
// lost-ack redelivery too; every event ends published, every effect counted once. An event
// whose id the consumer already holds with another envelope digest is receipt_conflict, and
// the source delivery ends quarantined.
func TestConsumerKernelEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := consumerfix.Setup(t)
	fixture := testdb.Conn(t, b.Dsn, "")
	testfix.ActivateReference(t, fixture)
	dispatcher := testdb.Conn(t, b.Dsn, "outbox_dispatcher")

	kits := map[string]wire.Consumer{}
	for _, s := range reference.All() {
		kits[s.Destination] = b.Kit(t, s.ConsumerName, nil)
	}
	registry := transport.NewInProcess(kits)

	type appended struct {
		id  string
		env map[string]any
	}
	var events []appended
	var conflicted string
	seen := map[consumer.EventKey]bool{}
	for _, s := range reference.All() {
		for _, k := range s.Events {
			if seen[k] {
				continue
			}
			seen[k] = true
			env := consumerfix.Env(k, fmt.Sprintf("agg-%d", len(events)), 1)
			events = append(events, appended{testfix.Append(t, fixture, env), env})
		}
	}
	if len(events) != 13 {
		t.Fatalf("%d event types, want 13", len(events))
	}
	// The metering consumer already holds a receipt for the first metering event's id, taken
	// from a different envelope (same id, other content).
	for _, e := range events {
		if e.env["eventType"] == reference.ExecutionAttemptEligibility.EventType {
			conflicted = e.id
			other := map[string]any{}
			for k, v := range e.env {
				other[k] = v
			}
			other["eventId"], other["payload"] = e.id, map[string]any{"forged": true}
			spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
			fd := consumerfix.Delivery(t, spec, other)
			consumerfix.WantAck(t, consumerfix.Deliver(t, b.Kit(t, spec.ConsumerName, nil), fd))
		}
	}

	claimed, err := pgcall.ClaimDeliveries(ctx, dispatcher, pgcall.ClaimParams{Worker: "ck-e2e",
		Destinations: []string{"core_operations", "metering_input_processor", "billing_finalization_coordinator", "billing_settlement_catch_up"},
		BatchSize:    100, Lease: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 14 {
		t.Fatalf("claimed %d deliveries, want 14", len(claimed))
	}
	complete := 0
	for i, c := range claimed {
		d := consumerfix.FromClaim(t, c)
		res, err := registry.Deliver(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		f := pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}
		if c.EventID == conflicted {
			consumerfix.Want(t, res, wire.NonRetryable, consumer.CodeReceiptConflict)
			if err := pgcall.QuarantineDelivery(ctx, dispatcher, f, res.Code, res.Code, nil); err != nil {
				t.Fatal(err)
			}
			continue
		}
		consumerfix.WantAck(t, res)
		if i%3 == 0 { // the ack was "lost": the consumer answers the same again
			again, _ := registry.Deliver(ctx, d)
			if !bytes.Equal(again.Ack, res.Ack) || !bytes.Equal(again.Receipt, res.Receipt) {
				t.Fatalf("redelivery answered another ack")
			}
		}
		out, err := pgcall.AckDelivery(ctx, dispatcher, f, res.Ack, res.Receipt)
		if err != nil {
			t.Fatalf("ack_delivery refused the kit's ack for %s/%s: %v\nack %s\nreceipt %s", c.Destination, c.EventType, err, res.Ack, res.Receipt)
		}
		if out == "complete" {
			complete++
		}
	}
	if complete != 12 { // 13 events, one quarantined; the two-member event completes once
		t.Fatalf("%d events completed, want 12", complete)
	}
	if n := consumerfix.Count(t, fixture, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'acknowledged'`); n != 13 {
		t.Fatalf("%d acknowledged deliveries, want 13", n)
	}
	if n := consumerfix.Count(t, fixture, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'receipt_conflict'`, conflicted); n != 1 {
		t.Fatalf("the conflicting delivery is not quarantined")
	}
	if n := consumerfix.Count(t, fixture, `SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`); n != 1 {
		t.Fatalf("%d unpublished events, want only the quarantined one", n)
	}
	// Acks recorded in the kernel carry the receipt refs/digests the inbox stored.
	if n := consumerfix.Count(t, fixture, `SELECT count(*) FROM outbox.outbox_deliveries d JOIN inbox.inbox_receipts r
		ON r.event_id = d.event_id AND r.consumer_name = d.consumer_name
		WHERE d.status = 'acknowledged' AND d.ack_receipt_ref = r.receipt_ref AND d.ack_receipt_digest = r.receipt_digest
		  AND r.event_envelope_sha256 = d.ack_event_envelope_sha256`); n != 13 {
		t.Fatalf("%d acks match their inbox receipts, want 13", n)
	}
	for _, s := range reference.All() {
		for _, e := range events {
			if e.id == conflicted {
				continue
			}
			want := 0
			for _, k := range s.Events {
				if k.EventType == e.env["eventType"] {
					want = 1
				}
			}
			if n := consumerfix.Effects(t, fixture, s, e.id); n != want {
				t.Fatalf("%s applied %s %d times, want %d", s.ConsumerName, e.env["eventType"], n, want)
			}
		}
	}
}
