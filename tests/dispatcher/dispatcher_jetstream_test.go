package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

const (
	dpBrokerDest     = "broker_events"
	dpBrokerConsumer = "jetstream_broker"
	dpStream         = "OUTBOX_EVENTS"
	dpSubject        = "outbox.events.metering"
)

// dpNATS runs a real nats-server with JetStream in this process (loopback, random port).
func dpNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// dpActivateWithBroker registers the broker destination (SPEC R-AK-1: broker_publication) and
// activates delivery set 2: the reference release plus a mandatory broker member for the
// metering event type.
func dpActivateWithBroker(t *testing.T, db *dispatcherfix.DB) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Admin.Exec(ctx, "SET ROLE outbox_registrar"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = db.Admin.Exec(ctx, "RESET ROLE") }()
	if _, err := db.Admin.Exec(ctx, `SELECT outbox.register_destination($1, $2, 'broker_publication', 'BrokerPublicationReceipt', 1, false)`,
		dpBrokerDest, dpBrokerConsumer); err != nil {
		t.Fatalf("register broker destination: %v", err)
	}
	raw, err := reference.Releases.ReadFile(reference.ReleasePath)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		t.Fatal(err)
	}
	members := def["members"].([]any)
	members = append(members, map[string]any{
		"eventType": dispatcherfix.MeteringType, "eventSchemaVersion": "1", "destination": dpBrokerDest, "consumerName": dpBrokerConsumer,
		"expectedReceiptType": "BrokerPublicationReceipt", "expectedReceiptSchemaVersion": 1,
		"projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true,
	})
	key := func(m any) string {
		x := m.(map[string]any)
		return x["eventType"].(string) + "\x00" + x["eventSchemaVersion"].(string) + "\x00" + x["destination"].(string) + "\x00" + x["consumerName"].(string)
	}
	sort.Slice(members, func(i, j int) bool { return key(members[i]) < key(members[j]) })
	def["members"] = members
	def["memberCount"] = len(members)
	def["deliverySetVersion"] = 2
	b, _ := json.Marshal(def)
	doc, err := release.WithDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pgcall.RegisterDeliverySet(ctx, db.Admin, doc, "dispatcher-jetstream-test")
	if err != nil {
		t.Fatalf("register set 2: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, db.Admin, q); err != nil {
		t.Fatalf("activate set 2: %v", err)
	}
}

// R-DP-2, D-7, R-AK-1: the JetStream adapter publishes with Nats-Msg-Id = event id. The first
// attempt's PubAck is lost (the publish happened, the dispatcher saw an error and retried); the
// second publish is de-duplicated by JetStream (one stored message, PubAck duplicate=true) and
// its BrokerPublicationReceipt is accepted by ack_delivery: the delivery ends acknowledged.
func TestDispatcherJetStreamLostPubAckDeduplicated(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	dpActivateWithBroker(t, db)
	dispatcherfix.FastRetry(t, db.Admin, dpBrokerDest, 20)
	url := dpNATS(t)

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dpStream, Subjects: []string{"outbox.events.>"}, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	inner, err := transport.NewJetStream(transport.JetStreamOptions{URL: url, Subject: dpSubject, Stream: dpStream, Timeout: 5 * time.Second, Name: "dp-js"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Close() })
	// The dispatcher hands its receipt catalog to the transports it holds; this one is wrapped.
	inner.SetReceiptCatalog(testdb.Receipts(t))
	var mu sync.Mutex
	var results []wire.Result
	calls := 0
	lossy := transport.Func(func(ctx context.Context, d wire.Delivery) (wire.Result, error) {
		res, err := inner.Deliver(ctx, d)
		mu.Lock()
		defer mu.Unlock()
		calls++
		results = append(results, res)
		if calls == 1 && err == nil {
			return wire.Result{}, errors.New("simulated: PubAck lost after the broker stored the message")
		}
		return res, err
	})
	cfg := dispatcherfix.Config("dp-js", map[string]config.Destination{dpBrokerDest: {Transport: config.TransportJetStream, NATSURL: url,
		Subject: dpSubject, Stream: dpStream, Timeout: 5 * time.Second, Auth: config.AuthNone}})
	// The wrapper still builds broker receipts (it passes JetStream's on): it says so.
	dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dpBrokerDest: receiptBuilding{Func: lossy, kind: inner.ReceiptKind()}})

	ev := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "broker delivery acknowledged", func() bool { return db.Status(t, dpBrokerDest, ev) == "acknowledged" })

	got := db.Attempts(t, dpBrokerDest, ev)
	if len(got) != 2 || got[0].Outcome != "retryable" || got[0].Code != "transport_error" || got[1].Outcome != "acknowledged" {
		t.Fatalf("attempts %+v", got)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1 (de-duplicated)", info.State.Msgs)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(jetstream.MsgIDHeader) != ev || msg.Subject != dpSubject {
		t.Fatalf("message id %q subject %q", msg.Header.Get(jetstream.MsgIDHeader), msg.Subject)
	}
	var stored string
	if err := db.Admin.QueryRow(ctx, `SELECT event_envelope_sha256 FROM outbox.outbox_events WHERE event_id = $1::uuid`, ev).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sum, err := canon.SHA256Hex(msg.Data); err != nil || sum != stored {
		t.Fatal("published body is not the canonical envelope of the event")
	}
	mu.Lock()
	var second map[string]any
	_ = json.Unmarshal(results[1].Receipt, &second)
	mu.Unlock()
	if second["duplicate"] != true || second["sequence"] != float64(1) || second["stream"] != dpStream {
		t.Fatalf("second PubAck receipt %v: want duplicate=true, sequence 1", second)
	}
	var kind, ref, digest string
	if err := db.Admin.QueryRow(ctx, `SELECT ack_receipt_kind, ack_receipt_ref, ack_receipt_digest FROM outbox.outbox_deliveries
		WHERE destination = $1 AND event_id = $2::uuid`, dpBrokerDest, ev).Scan(&kind, &ref, &digest); err != nil {
		t.Fatal(err)
	}
	if kind != "broker_publication" || ref != dpStream+":1" || digest != second["brokerPublicationReceiptDigest"] {
		t.Fatalf("stored ack: kind %s ref %s digest %s", kind, ref, digest)
	}
	// The broker's ack covers only its own delivery: the metering consumer's is still pending,
	// so the event is not published.
	if db.Status(t, dispatcherfix.MeteringDest, ev) != "pending" ||
		db.Count(t, `SELECT count(*) FROM outbox.outbox_events e WHERE e.event_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`, ev) != 1 {
		t.Fatal("broker ack stood in for another destination")
	}
}
