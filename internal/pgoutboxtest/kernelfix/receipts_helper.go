package kernelfix

// A self-contained builder of valid receipt bodies and ActiveConsumerAck@1 documents for a
// claimed delivery (SPEC R-AK-1, R-AK-1a), used by the dispatch tests until the consumer kit
// replaces it. The digest is computed in Go with internal/canon (jcs-sha256-v1), independently
// of the database's own canonicalizer that ack_delivery uses to verify it.

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// ReceiptKind is one row of outbox.receipt_kinds (seeded by migration 004).
type ReceiptKind struct{ Kind, Type, Prefix, TimeField string }

// ReceiptKinds are the receipt types of the reference release, one per destination.
var ReceiptKinds = []ReceiptKind{
	{"operations_projection", "OperationsProjectionAppliedReceipt", "operationsProjectionAppliedReceipt", "appliedAt"},
	{"metering_input_processor", "MeteringInputProcessorConsumerReceipt", "meteringInputProcessorConsumerReceipt", "committedAt"},
	{"billing_finalization_coordinator", "BillingFinalizationCoordinatorConsumerReceipt", "billingFinalizationCoordinatorConsumerReceipt", "committedAt"},
	{"billing_settlement_catch_up", "BillingSettlementCatchUpConsumerReceipt", "billingSettlementCatchUpConsumerReceipt", "committedAt"},
	{"broker_publication", "BrokerPublicationReceipt", "brokerPublicationReceipt", "publishedAt"},
}

// ReceiptKindByType is the receipt kind of receiptType; the test fails when there is none.
func ReceiptKindByType(t testing.TB, receiptType string) ReceiptKind {
	t.Helper()
	for _, k := range ReceiptKinds {
		if k.Type == receiptType {
			return k
		}
	}
	t.Fatalf("no receipt kind for receipt type %q", receiptType)
	return ReceiptKind{}
}

// ReceiptKindByName is the receipt kind named kind; the test fails when there is none.
func ReceiptKindByName(t testing.TB, kind string) ReceiptKind {
	t.Helper()
	for _, k := range ReceiptKinds {
		if k.Kind == kind {
			return k
		}
	}
	t.Fatalf("no receipt kind %q", kind)
	return ReceiptKind{}
}

// ReceiptDoc is a receipt body under construction and, once sealed, its ack.
type ReceiptDoc struct {
	K       ReceiptKind
	Receipt map[string]any
	Ack     map[string]any
}

// NewReceipt returns the unsealed receipt body a correct consumer would write for c: the
// receipt kind of c's expected receipt type, the frozen projection target, the event's identity
// and digest, a fresh ref and time. Edit Receipt before Seal to make a receipt whose digest is
// consistent with the edit.
func NewReceipt(t testing.TB, c pgcall.ClaimedDelivery) *ReceiptDoc {
	t.Helper()
	k := ReceiptKindByType(t, c.ExpectedReceiptType)
	return NewReceiptOfKind(t, c, k)
}

// NewReceiptOfKind builds a valid receipt of kind k for the claimed delivery c.
func NewReceiptOfKind(t testing.TB, c pgcall.ClaimedDelivery, k ReceiptKind) *ReceiptDoc {
	t.Helper()
	r := map[string]any{
		k.Prefix + "Ref":                      "rcpt-" + testfix.NewUUID(),
		k.Prefix + "SchemaVersion":            c.ExpectedReceiptSchemaVersion,
		k.Prefix + "DigestAlgorithmVersion":   "jcs-sha256-v1",
		"destination":                         c.Destination,
		"consumerName":                        c.ConsumerName,
		"eventId":                             c.EventID,
		"eventEnvelopeDigestAlgorithmVersion": c.EventEnvelopeDigestAlgorithmVersion,
		"eventEnvelopeSha256":                 c.EventEnvelopeSHA256,
		k.TimeField:                           time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
	}
	if k.Kind == "operations_projection" {
		if c.RequiredProjectionName != nil {
			r["projectionName"] = *c.RequiredProjectionName
		}
		if c.RequiredProjectionVersion != nil {
			r["projectionVersion"] = *c.RequiredProjectionVersion
		}
		r["eventType"] = c.EventType
		r["eventSchemaVersion"] = c.EventSchemaVersion
	}
	if k.Kind == "broker_publication" {
		r["stream"] = "outbox"
		r["sequence"] = 1
		r["duplicate"] = false
	}
	return &ReceiptDoc{K: k, Receipt: r}
}

// Seal computes <P>Digest = jcs-sha256-v1 of the receipt minus <P>Ref, <P>Digest and the time
// field, stores it in the receipt and builds the matching ActiveConsumerAck@1 from the receipt.
func (d *ReceiptDoc) Seal(t testing.TB) *ReceiptDoc {
	t.Helper()
	p := d.K.Prefix
	candidate := map[string]any{}
	for k, v := range d.Receipt {
		if k == p+"Ref" || k == p+"Digest" || k == d.K.TimeField {
			continue
		}
		candidate[k] = v
	}
	digest, err := canon.Digest(candidate)
	if err != nil {
		t.Fatalf("receipt digest: %v", err)
	}
	d.Receipt[p+"Digest"] = digest
	d.Ack = map[string]any{
		"destination":                         d.Receipt["destination"],
		"consumerName":                        d.Receipt["consumerName"],
		"eventId":                             d.Receipt["eventId"],
		"eventEnvelopeDigestAlgorithmVersion": d.Receipt["eventEnvelopeDigestAlgorithmVersion"],
		"eventEnvelopeSha256":                 d.Receipt["eventEnvelopeSha256"],
		"appliedReceipt": map[string]any{
			"kind":                       d.K.Kind,
			p + "Ref":                    d.Receipt[p+"Ref"],
			p + "SchemaVersion":          d.Receipt[p+"SchemaVersion"],
			p + "DigestAlgorithmVersion": d.Receipt[p+"DigestAlgorithmVersion"],
			p + "Digest":                 digest,
		},
	}
	return d
}

// AppliedReceipt is the ack's appliedReceipt object (after Seal).
func (d *ReceiptDoc) AppliedReceipt() map[string]any { return d.Ack["appliedReceipt"].(map[string]any) }

// JSON returns the ack and the receipt as JSON documents.
func (d *ReceiptDoc) JSON(t testing.TB) (ack, receipt json.RawMessage) {
	t.Helper()
	a, err := json.Marshal(d.Ack)
	if err != nil {
		t.Fatal(err)
	}
	r, err := json.Marshal(d.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	return a, r
}

// ValidAck returns a valid ack and receipt for c.
func ValidAck(t testing.TB, c pgcall.ClaimedDelivery) (ack, receipt json.RawMessage) {
	t.Helper()
	return NewReceipt(t, c).Seal(t).JSON(t)
}

// FenceOf is the fence of a claimed delivery.
func FenceOf(c pgcall.ClaimedDelivery) pgcall.Fence {
	return pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}
}
