package producer

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
)

// P-6: the producer's direct canonical writer gives exactly the bytes of canonicalizing
// Envelope(ev) (SPEC D-2), for every kind of string and optional member.
func TestCanonicalEnvelopeMatchesCanonicalizer(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC)
	nasty := []string{"plain", "é ü 漢字", "emoji 😀", "quote \" back \\ slash /", "ctl \b\f\n\r\t \x01\x1f \x7f",
		"html <a href=\"x\">&amp;</a>", "line sep \u2028 \u2029", "\ufeffbom", "\ue000\uffff private"}
	for i, s := range nasty {
		for _, opt := range []string{"", s} {
			ev := Event{EventID: "00000000-0000-4000-8000-000000000001", EventType: "run.created@2.0", EventSchemaVersion: "2.0",
				AggregateID: s, AggregateRevision: int64(i + 1), Tenant: Tenant{TenantKind: s, TenantID: "t", WorkspaceID: "w", ProjectID: opt},
				CorrelationID: opt, CausationID: opt, OperationID: opt, OccurredAt: at,
				Payload: json.RawMessage(`{"z":1,"a":[1,{"y":"` + "\\u00e9" + `","b":null}],"n":1E2}`)}
			got, ok := canonicalEnvelope(ev)
			if !ok {
				t.Fatalf("%q: not written directly", s)
			}
			doc, _, err := Envelope(ev)
			if err != nil {
				t.Fatal(err)
			}
			want, err := canon.Canonicalize(doc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
			}
		}
	}
	for _, ev := range []Event{
		{AggregateID: "bad \xff utf-8", Payload: json.RawMessage(`{}`)},
		{AggregateID: "nul \x00", Payload: json.RawMessage(`{}`)},
		{AggregateID: "a", AggregateRevision: 1 << 60},
		{AggregateID: "a", Payload: json.RawMessage(`{"x":1.5}`)},
	} {
		if _, ok := canonicalEnvelope(ev); ok {
			t.Fatalf("%+v: written directly, want the general path", ev)
		}
	}
}
