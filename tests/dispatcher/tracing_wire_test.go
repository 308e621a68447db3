package dispatcher

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// R-DP-7 (golden wire, NATS): a JetStream message without a trace context has exactly the
// headers it had before trace context existed; with one, the same plus traceparent and
// tracestate, and the same body.
func TestJetStreamTraceHeadersGoldenWire(t *testing.T) {
	t.Parallel()
	url := dpNATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dpStream, Subjects: []string{"outbox.events.>"}})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewJetStream(transport.JetStreamOptions{URL: url, Subject: dpSubject, Stream: dpStream, Timeout: 5 * time.Second, Name: "dp-js-wire"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.SetReceiptCatalog(testdb.Receipts(t))
	base := wire.Delivery{Destination: dpBrokerDest, ConsumerName: dpBrokerConsumer, AttemptID: "1c7d1f3e-0000-4000-8000-000000000001",
		AttemptNumber: 1, ExpectedReceiptType: "BrokerPublicationReceipt", ExpectedReceiptSchemaVersion: 1,
		EnvelopeDigestAlgorithmVersion: "jcs-sha256-v1", EnvelopeSHA256: strings.Repeat("ab", 32),
		Envelope: json.RawMessage(`{"payload":{}}`)}
	plain, traced := base, base
	plain.EventID = "8a0b5b8e-1f43-4b43-9d7a-0d5f0c7f9a11"
	traced.EventID = "8a0b5b8e-1f43-4b43-9d7a-0d5f0c7f9a12"
	traced.TraceParent, traced.TraceState = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=1"
	for _, d := range []wire.Delivery{plain, traced} {
		if res, err := tr.Deliver(ctx, d); err != nil || res.Status != wire.Acknowledged {
			t.Fatalf("deliver %s: %+v %v", d.EventID, res, err)
		}
	}
	keys := func(seq uint64) (nats.Header, []string, []byte) {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var k []string
		for name := range m.Header {
			k = append(k, name)
		}
		sort.Strings(k)
		return m.Header, k, m.Data
	}
	ph, pk, pb := keys(1)
	golden := []string{"Nats-Expected-Stream", "Nats-Msg-Id", wire.HeaderConsumer, wire.HeaderDestination, wire.HeaderEnvelopeSHA256, wire.HeaderEventID}
	sort.Strings(golden)
	if strings.Join(pk, ",") != strings.Join(golden, ",") || ph.Get("Nats-Msg-Id") != plain.EventID {
		t.Fatalf("plain message headers %v, golden %v", pk, golden)
	}
	th, tk, tb := keys(2)
	want := append(append([]string{}, golden...), "traceparent", "tracestate")
	sort.Strings(want)
	if strings.Join(tk, ",") != strings.Join(want, ",") || th.Get("traceparent") != traced.TraceParent || th.Get("tracestate") != "rojo=1" {
		t.Fatalf("traced message headers %v (%q %q), want %v", tk, th.Get("traceparent"), th.Get("tracestate"), want)
	}
	if string(pb) != string(tb) {
		t.Fatal("bodies differ")
	}
}
