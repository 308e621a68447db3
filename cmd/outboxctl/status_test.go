package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const statusEventType = "execution.attempt-eligibility.finalized@1" // → metering_input_processor

// meteringAck builds a valid ack and receipt (R-AK-1, R-AK-1a) for a claimed metering delivery.
func meteringAck(t *testing.T, c pgcall.ClaimedDelivery) (ack, receipt json.RawMessage) {
	t.Helper()
	p := "meteringInputProcessorConsumerReceipt"
	body := map[string]any{
		p + "SchemaVersion": 1, p + "DigestAlgorithmVersion": canon.Algorithm,
		"destination": c.Destination, "consumerName": c.ConsumerName, "eventId": c.EventID,
		"eventEnvelopeDigestAlgorithmVersion": c.EventEnvelopeDigestAlgorithmVersion, "eventEnvelopeSha256": c.EventEnvelopeSHA256,
	}
	dg, err := canon.Digest(body)
	if err != nil {
		t.Fatal(err)
	}
	body[p+"Ref"], body[p+"Digest"] = "r-"+c.EventID, dg
	body["committedAt"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	a := map[string]any{"destination": c.Destination, "consumerName": c.ConsumerName, "eventId": c.EventID,
		"eventEnvelopeDigestAlgorithmVersion": c.EventEnvelopeDigestAlgorithmVersion, "eventEnvelopeSha256": c.EventEnvelopeSHA256,
		"appliedReceipt": map[string]any{"kind": "metering_input_processor", p + "Ref": "r-" + c.EventID, p + "SchemaVersion": 1,
			p + "DigestAlgorithmVersion": canon.Algorithm, p + "Digest": dg}}
	ack, _ = json.Marshal(a)
	receipt, _ = json.Marshal(body)
	return ack, receipt
}

// Issue "Go dispatcher" §8, R-DP-4: outboxctl status prints per destination the pending, leased,
// acknowledged and quarantined counts and the oldest pending age, then the latest quarantined
// deliveries with their reasons, read as outbox_auditor from the read-only views.
func TestStatusOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	for i := 0; i < 4; i++ {
		testfix.Append(t, admin, testfix.Envelope(statusEventType, "1", "agg-status", int64(i+1)))
	}
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	claim := func() pgcall.ClaimedDelivery {
		rows, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "status-test", Destinations: []string{"metering_input_processor"}, BatchSize: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v %d", err, len(rows))
		}
		return rows[0]
	}
	c1 := claim()
	a, r := meteringAck(t, c1)
	if _, err := pgcall.AckDelivery(ctx, disp, pgcall.Fence{Destination: c1.Destination, EventID: c1.EventID, AttemptID: c1.AttemptID, LeaseToken: c1.LeaseToken}, a, r); err != nil {
		t.Fatalf("ack: %v", err)
	}
	c2 := claim()
	if err := pgcall.QuarantineDelivery(ctx, disp, pgcall.Fence{Destination: c2.Destination, EventID: c2.EventID, AttemptID: c2.AttemptID, LeaseToken: c2.LeaseToken}, "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatalf("quarantine: %v", err)
	}
	claim() // third: leased; fourth stays pending

	var out bytes.Buffer
	if err := runStatus(ctx, dsn, nil, &out); err != nil {
		t.Fatalf("status: %v", err)
	}
	text := out.String()
	lines := strings.Split(text, "\n")
	if !strings.HasPrefix(lines[0], "DESTINATION") || !strings.Contains(lines[0], "OLDEST PENDING AGE") {
		t.Fatalf("header: %q", lines[0])
	}
	found := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) == 8 {
			found[f[0]] = f
		}
		if l == "" {
			break
		}
	}
	m := found["metering_input_processor"]
	if m == nil || m[1] != "metering_input_processor_consumer" || m[2] != "1" || m[3] != "1" || m[4] != "1" || m[5] != "1" || m[6] == "-" || m[7] != "-" {
		t.Fatalf("metering row %v in\n%s", m, text)
	}
	for _, d := range []string{"core_operations", "billing_finalization_coordinator", "billing_settlement_catch_up"} {
		r := found[d]
		if r == nil || r[2] != "0" || r[3] != "0" || r[4] != "0" || r[5] != "0" || r[6] != "-" || r[7] != "-" {
			t.Fatalf("%s row %v in\n%s", d, r, text)
		}
	}
	if !strings.Contains(text, "Latest quarantined deliveries") {
		t.Fatalf("no quarantine section:\n%s", text)
	}
	var qline string
	for _, l := range lines {
		if strings.Contains(l, c2.EventID) {
			qline = l
		}
	}
	if !strings.Contains(qline, "consumer_rejected") || !strings.Contains(qline, statusEventType) || strings.Contains(text, c1.EventID) {
		t.Fatalf("quarantine line %q in\n%s", qline, text)
	}

	out.Reset()
	if err := runStatus(ctx, dsn, []string{"-json", "-destination", "metering_input_processor"}, &out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Destinations []struct {
			Destination                                string
			Pending, Leased, Acknowledged, Quarantined int
			OldestPendingAt                            *time.Time
		}
		Quarantined []struct {
			EventID, Reason string
			AttemptCount    int
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Destinations) != 1 || doc.Destinations[0].Pending != 1 || doc.Destinations[0].Acknowledged != 1 ||
		doc.Destinations[0].OldestPendingAt == nil || len(doc.Quarantined) != 1 || doc.Quarantined[0].EventID != c2.EventID ||
		doc.Quarantined[0].Reason != "consumer_rejected" || doc.Quarantined[0].AttemptCount != 1 {
		t.Fatalf("json: %s", out.String())
	}

	out.Reset()
	if err := runStatus(ctx, dsn, []string{"-quarantined", "0"}, &out); err != nil || strings.Contains(out.String(), "quarantined deliveries") {
		t.Fatalf("-quarantined 0: %v\n%s", err, out.String())
	}
	if err := runStatus(ctx, dsn, []string{"-force-success"}, &out); !errors.Is(err, errUsage) {
		t.Fatalf("unknown flag: %v", err)
	}
	if err := runStatus(ctx, dsn, []string{"-destination", "nope"}, &out); err == nil {
		t.Fatal("unknown destination accepted")
	}
}

// R-SEC-1: the status views are readable by outbox_auditor and by nobody else among the
// producer/consumer/dispatcher roles; the stats function is executable by dispatcher and auditor.
func TestStatusViewsGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	for _, role := range []string{"outbox_producer", "outbox_consumer", "outbox_dispatcher", "outbox_registrar"} {
		c := testdb.Conn(t, dsn, role)
		if _, err := pgcall.DeliveryStatus(ctx, c); !errors.Is(err, pgcall.ErrPermissionDenied) {
			t.Errorf("%s reads outbox.delivery_status: %v", role, err)
		}
	}
	for _, role := range []string{"outbox_producer", "outbox_consumer", "outbox_registrar"} {
		c := testdb.Conn(t, dsn, role)
		if _, err := pgcall.DeliveryStats(ctx, c); !errors.Is(err, pgcall.ErrPermissionDenied) {
			t.Errorf("%s executes outbox.delivery_stats: %v", role, err)
		}
	}
	for _, role := range []string{"outbox_dispatcher", "outbox_auditor"} {
		c := testdb.Conn(t, dsn, role)
		if _, err := pgcall.DeliveryStats(ctx, c); err != nil {
			t.Errorf("%s cannot execute delivery_stats: %v", role, err)
		}
		if _, err := pgcall.ActiveDeliverySet(ctx, c); !errors.Is(err, pgcall.ErrNoActiveDeliverySet) {
			t.Errorf("%s active_delivery_set on a bare database: %v", role, err)
		}
	}
	a := testdb.Conn(t, dsn, "outbox_auditor")
	if _, err := pgcall.DeliveryStatus(ctx, a); err != nil {
		t.Errorf("auditor cannot read delivery_status: %v", err)
	}
	if _, err := pgcall.QuarantinedDeliveries(ctx, a, nil, 5); err != nil {
		t.Errorf("auditor cannot read quarantined_deliveries: %v", err)
	}
}
