package consumerfix

import (
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/wire"
)

// FromClaim turns a claimed row into the delivery a dispatcher hands over: the envelope
// canonicalized and its digest checked against the claimed one (R-DP-1).
func FromClaim(t *testing.T, r pgcall.ClaimedDelivery) wire.Delivery {
	t.Helper()
	c, err := canon.Canonicalize(r.EventEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if sha, _ := canon.SHA256Hex(c); sha != r.EventEnvelopeSHA256 {
		t.Fatalf("claimed envelope digest %s, recomputed %s", r.EventEnvelopeSHA256, sha)
	}
	d := wire.Delivery{Destination: r.Destination, ConsumerName: r.ConsumerName, EventID: r.EventID,
		AttemptID: r.AttemptID, AttemptNumber: r.AttemptNumber, ExpectedReceiptType: r.ExpectedReceiptType,
		ExpectedReceiptSchemaVersion: r.ExpectedReceiptSchemaVersion, Envelope: c,
		EnvelopeDigestAlgorithmVersion: r.EventEnvelopeDigestAlgorithmVersion, EnvelopeSHA256: r.EventEnvelopeSHA256}
	if r.RequiredProjectionName != nil {
		d.RequiredProjectionName = *r.RequiredProjectionName
	}
	if r.RequiredProjectionVersion != nil {
		d.RequiredProjectionVersion = *r.RequiredProjectionVersion
	}
	return d
}
