package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/producer"
)

func sampleEvent() producer.Event {
	return producer.Event{
		EventType: "wallet.reserved@2.0", EventSchemaVersion: "2.0",
		AggregateID: "wallet-7", AggregateRevision: 1,
		Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "t-1", WorkspaceID: "w-1", ProjectID: "p-1"},
		CorrelationID: "c-1", CausationID: "k-1", OperationID: "o-1",
		Payload: json.RawMessage(`{"amount":"12.50","currency":"EUR","reservationId":"r-1"}`),
	}
}

// D-2, R-AP-3: the producer library appends on the hot path inside the caller's transaction,
// and the database's audit sweep reproduces its digest.
func TestProducerAppendInTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	tx, err := b.producer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := producer.Append(ctx, tx, sampleEvent())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r.DeliveryCount != 1 || len(r.EnvelopeSHA256) != 64 {
		t.Fatalf("result %+v", r)
	}
	var dbDigest, project string
	if err := b.admin.QueryRow(ctx, `SELECT outbox.jcs_sha256(outbox._event_envelope(e)::json), project_id
		FROM outbox.outbox_events e WHERE event_id = $1`, r.EventID).Scan(&dbDigest, &project); err != nil {
		t.Fatal(err)
	}
	if dbDigest != r.EnvelopeSHA256 || project != "p-1" {
		t.Fatalf("stored digest %s (recomputed %s), project %q", r.EnvelopeSHA256, dbDigest, project)
	}
}

// R-AP-1, R-AP-7: database rules come back as typed errors.
func TestProducerTypedErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	ev := sampleEvent()
	ev.EventType = "wallet.reserved@3.0"
	if _, err := producer.Append(ctx, b.producer, ev); !errors.Is(err, producer.ErrNotApplicable) {
		t.Fatalf("not applicable: %v", err)
	}
	ev = sampleEvent()
	ev.CausationID = ""
	if _, err := producer.Append(ctx, b.producer, ev); !errors.Is(err, producer.ErrEnvelopeInvalid) {
		t.Fatalf("refinement: %v", err)
	}
	ev = sampleEvent()
	ev.Payload = json.RawMessage(`{"amount":12.5}`)
	if _, err := producer.Append(ctx, b.producer, ev); !errors.Is(err, producer.ErrNotCanonicalizable) {
		t.Fatalf("float amount: %v", err)
	}
	ev = sampleEvent()
	ev.Payload = json.RawMessage(`{"blob":"` + strings.Repeat("x", 1<<20) + `"}`)
	if _, err := producer.Append(ctx, b.producer, ev); !errors.Is(err, producer.ErrEnvelopeInvalid) {
		t.Fatalf("oversized: %v", err)
	}
	// A role that is not a producer is refused by the grants.
	if _, err := producer.Append(ctx, appendSetup(t).admin, sampleEvent()); err != nil {
		t.Fatalf("superuser append should work: %v", err)
	}
	aud := appendSetup(t)
	if _, err := aud.admin.Exec(ctx, "SET ROLE outbox_dispatcher"); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Append(ctx, aud.admin, sampleEvent()); !errors.Is(err, producer.ErrPermissionDenied) {
		t.Fatalf("dispatcher appending: %v, want 42501", err)
	}
}
