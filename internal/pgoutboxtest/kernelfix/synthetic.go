package kernelfix

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/receipt"
)

// The synthetic release: a small release of no domain, registered on a kernel-only database
// (testdb.KernelURL) through the public functions only, for tests of kernel rules that need no
// reference vocabulary (SPEC D-1). One event type fans out to two destinations with receipt kinds
// of their own: SynPlain (ordering none) and SynOrdered (per_aggregate).
const (
	SynEvent     = "synthetic.happened@1"
	SynPlain     = "syn_plain"
	SynOrdered   = "syn_ordered"
	synPlainType = "SynPlainReceipt"
	synOrderType = "SynOrderedReceipt"
)

// SynBundle is a kernel-only database with the synthetic release active.
type SynBundle struct {
	Dsn     string
	Admin   *pgx.Conn // superuser: fixtures and assertions only
	Disp    *pgx.Conn // SET ROLE outbox_dispatcher
	Prod    *pgx.Conn // SET ROLE outbox_producer
	Catalog *receipt.Catalog
}

// SetupSynthetic registers and activates the synthetic release on a fresh kernel-only database
// and loads the receipt catalog as the dispatcher would.
func SetupSynthetic(t *testing.T) SynBundle {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	one := int64(1)
	kinds := []pgcall.ReceiptKindParams{
		{ReceiptKind: SynPlain, ReceiptType: synPlainType, FieldPrefix: "synPlainReceipt", TimeField: "doneAt",
			ReceiptSchemaVersion: 1, Members: map[string]pgcall.ReceiptMember{"note": {Type: "string", Required: true}}},
		{ReceiptKind: SynOrdered, ReceiptType: synOrderType, FieldPrefix: "synOrderedReceipt", TimeField: "doneAt",
			ReceiptSchemaVersion: 1, Members: map[string]pgcall.ReceiptMember{"position": {Type: "integer", Required: true, Minimum: &one}}},
	}
	for _, k := range kinds {
		if err := pgcall.RegisterReceiptKind(ctx, reg, k); err != nil {
			t.Fatalf("register receipt kind %s: %v", k.ReceiptKind, err)
		}
	}
	dests := []pgcall.DestinationParams{
		// sorted by destination: the definition's members must be
		{Destination: SynOrdered, ConsumerName: "syn_ordered_consumer", ReceiptKind: SynOrdered, ReceiptType: synOrderType, ReceiptSchemaVersion: 1, Ordering: "per_aggregate"},
		{Destination: SynPlain, ConsumerName: "syn_plain_consumer", ReceiptKind: SynPlain, ReceiptType: synPlainType, ReceiptSchemaVersion: 1, Ordering: "none"},
	}
	var members []map[string]any
	for _, d := range dests {
		if err := pgcall.RegisterDestination(ctx, reg, d); err != nil {
			t.Fatalf("register destination %s: %v", d.Destination, err)
		}
		members = append(members, map[string]any{
			"eventType": SynEvent, "eventSchemaVersion": "1", "destination": d.Destination,
			"consumerName": d.ConsumerName, "expectedReceiptType": d.ReceiptType,
			"expectedReceiptSchemaVersion": 1, "projectionTarget": map[string]any{"state": "not_applicable"},
			"mandatory": true,
		})
	}
	doc, err := json.Marshal(map[string]any{
		"deliverySetVersion": 1, "deliverySetDefinitionSchemaVersion": 1,
		"deliverySetDefinitionDigestAlgorithmVersion": "jcs-sha256-v1",
		"applicableEventCount":                        1, "applicableEvents": []any{map[string]any{"eventType": SynEvent, "eventSchemaVersion": "1"}},
		"memberCount": len(members), "members": members,
	})
	if err != nil {
		t.Fatal(err)
	}
	def, err := release.WithDigest(doc)
	if err != nil {
		t.Fatalf("digest of the synthetic release: %v", err)
	}
	q, err := pgcall.RegisterDeliverySet(ctx, reg, def, "synthetic-test-release")
	if err != nil {
		t.Fatalf("register synthetic delivery set: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, reg, q); err != nil {
		t.Fatalf("activate synthetic delivery set: %v", err)
	}
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	cat, err := receipt.LoadCatalog(ctx, disp)
	if err != nil {
		t.Fatalf("load receipt catalog: %v", err)
	}
	return SynBundle{Dsn: dsn, Admin: testdb.Conn(t, dsn, ""), Disp: disp, Prod: testdb.Conn(t, dsn, "outbox_producer"), Catalog: cat}
}

// Append appends one synthetic event (as outbox_producer) and returns its id.
func (b SynBundle) Append(t *testing.T, aggregateID string, revision int64) string {
	t.Helper()
	ev := fmt.Sprintf(`{"eventId":%q,"eventType":%q,"eventSchemaVersion":"1","aggregateId":%q,"aggregateRevision":%d,
		"tenant":{"tenantKind":"organization","tenantId":"t1","workspaceId":"w1"},
		"occurredAt":"2026-12-06T08:00:00.000000Z","payload":{"n":%d}}`,
		testfix.NewUUID(), SynEvent, aggregateID, revision, revision)
	r, err := pgcall.AppendEvent(context.Background(), b.Prod, pgcall.AppendParams{Event: json.RawMessage(ev)})
	if err != nil {
		t.Fatalf("append %s rev %d: %v", aggregateID, revision, err)
	}
	return r.EventID
}

// Receipt builds, with the loaded catalog, the receipt of the destination's own kind for c.
func (b SynBundle) Receipt(t *testing.T, c pgcall.ClaimedDelivery) receipt.Document {
	t.Helper()
	fields := receipt.Fields{"note": "done"}
	if c.Destination == SynOrdered {
		fields = receipt.Fields{"position": c.AttemptNumber}
	}
	d, err := b.Catalog.Build(receipt.Kind(c.Destination), receipt.Params{
		Destination: c.Destination, ConsumerName: c.ConsumerName, EventID: c.EventID,
		EventEnvelopeSHA256: c.EventEnvelopeSHA256, Fields: fields,
	})
	if err != nil {
		t.Fatalf("build %s receipt: %v", c.Destination, err)
	}
	return d
}
