package receipt

import (
	"errors"
	"testing"
)

// The kinds of the unit tests: test data shaped like the reference release's rows of
// outbox.receipt_kinds / receipt_kind_members (the database is the only source in production;
// tests/consumer compares LoadCatalog with the tables).
const (
	OperationsProjection           Kind = "operations_projection"
	MeteringInputProcessor         Kind = "metering_input_processor"
	BillingFinalizationCoordinator Kind = "billing_finalization_coordinator"
	BillingSettlementCatchUp       Kind = "billing_settlement_catch_up"
)

var testCat = mustCatalog(testKinds())

func testKinds() []Info {
	zero := int64(0)
	consumerMembers := func() []Member {
		return []Member{{Name: "consumerOutcome", JSONType: TypeString},
			{Name: "eventSchemaVersion", JSONType: TypeString}, {Name: "eventType", JSONType: TypeString},
			{Name: "projectionName", JSONType: TypeString}, {Name: "projectionVersion", JSONType: TypeInteger}}
	}
	return []Info{
		{OperationsProjection, "OperationsProjectionAppliedReceipt", "operationsProjectionAppliedReceipt", "appliedAt", 1, true,
			[]Member{{Name: "eventSchemaVersion", JSONType: TypeString, Required: true}, {Name: "eventType", JSONType: TypeString, Required: true},
				{Name: "projectionName", JSONType: TypeString, Required: true}, {Name: "projectionOutcome", JSONType: TypeString},
				{Name: "projectionVersion", JSONType: TypeInteger, Required: true}}},
		{MeteringInputProcessor, "MeteringInputProcessorConsumerReceipt", "meteringInputProcessorConsumerReceipt", "committedAt", 1, false, consumerMembers()},
		{BillingFinalizationCoordinator, "BillingFinalizationCoordinatorConsumerReceipt", "billingFinalizationCoordinatorConsumerReceipt", "committedAt", 1, false, consumerMembers()},
		{BillingSettlementCatchUp, "BillingSettlementCatchUpConsumerReceipt", "billingSettlementCatchUpConsumerReceipt", "committedAt", 1, false, consumerMembers()},
		{BrokerPublication, "BrokerPublicationReceipt", "brokerPublicationReceipt", "publishedAt", 1, false,
			[]Member{{Name: "duplicate", JSONType: TypeBoolean, Required: true}, {Name: "sequence", JSONType: TypeInteger, Required: true, Minimum: &zero},
				{Name: "stream", JSONType: TypeString, Required: true}}},
	}
}

func mustCatalog(kinds []Info) *Catalog {
	c, err := NewCatalog(kinds)
	if err != nil {
		panic(err)
	}
	return c
}

// SPEC §13: a catalog knows exactly the kinds it was built from; a kind unknown to it is refused
// by Build and Parse, known once it is in the catalog.
func TestCatalogKnowsOnlyItsKinds(t *testing.T) {
	maxLen := 5
	minCount := int64(3)
	extra := Info{Kind: "widget_sink", ReceiptType: "WidgetSinkReceipt", Prefix: "widgetSinkReceipt", TimeField: "storedAt", SchemaVersion: 2,
		Members: []Member{{Name: "shelf", JSONType: TypeString, Required: true, MaxLength: &maxLen}, {Name: "count", JSONType: TypeInteger, Minimum: &minCount}}}
	p := Params{Destination: "widgets", ConsumerName: "widget_sink", EventID: evID, EventEnvelopeSHA256: sha, Fields: Fields{"shelf": "a1", "count": 3}}
	if _, err := testCat.Build(extra.Kind, p); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kind: %v", err)
	}
	cat := mustCatalog(append(testKinds(), extra))
	d, err := cat.Build(extra.Kind, p)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cat.Parse(d.Receipt); err != nil || got.Kind != extra.Kind {
		t.Fatalf("parse: %v %v", got.Kind, err)
	}
	if _, err := testCat.Parse(d.Receipt); !errors.Is(err, ErrInvalid) {
		t.Fatalf("parse with a catalog without the kind: %v", err)
	}
	for name, f := range map[string]Fields{
		"too long": {"shelf": "abcdef"}, "below minimum": {"shelf": "a", "count": 2}, "missing required": {"count": 4},
		"unsigned below minimum": {"shelf": "a", "count": uint8(1)},
	} {
		p.Fields = f
		if _, err := cat.Build(extra.Kind, p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	for name, kinds := range map[string][]Info{
		"kind twice":   {extra, extra},
		"type twice":   {extra, {Kind: "other", ReceiptType: extra.ReceiptType, Prefix: "other", TimeField: "at", SchemaVersion: 1}},
		"bad type":     {{Kind: "k", ReceiptType: "K", Prefix: "k", TimeField: "at", SchemaVersion: 1, Members: []Member{{Name: "a", JSONType: "number"}}}},
		"no version":   {{Kind: "k", ReceiptType: "K", Prefix: "k", TimeField: "at"}},
		"prefix twice": {extra, {Kind: "other", ReceiptType: "Other", Prefix: extra.Prefix, TimeField: "at", SchemaVersion: 1}},
	} {
		if _, err := NewCatalog(kinds); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
