package kernel

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const dxDestOrdered = "ordered_metering"

// dxOrderedSetup registers a per_aggregate destination (R-CL-7) and activates delivery set 2:
// the reference release plus a member sending execution.attempt-eligibility.finalized@1 to it
// (so that event type goes to metering_input_processor, ordering none, and to ordered_metering).
func dxOrderedSetup(t *testing.T) kernelfix.Bundle {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	if _, err := reg.Exec(ctx, `SELECT outbox.register_destination($1, 'ordered_metering_consumer', 'metering_input_processor',
		'MeteringInputProcessorConsumerReceipt', 1, false, 'per_aggregate')`, dxDestOrdered); err != nil {
		t.Fatalf("register destination: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(testfix.ReferenceRelease(t), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "deliverySetDefinitionDigest")
	m["deliverySetVersion"] = 2
	ms := m["members"].([]any)
	ms = append(ms, map[string]any{
		"eventType": kernelfix.Metering, "eventSchemaVersion": "1", "destination": dxDestOrdered,
		"consumerName": "ordered_metering_consumer", "expectedReceiptType": "MeteringInputProcessorConsumerReceipt",
		"expectedReceiptSchemaVersion": 1, "projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true,
	})
	key := func(x any) string {
		mm := x.(map[string]any)
		return mm["eventType"].(string) + "\x00" + mm["eventSchemaVersion"].(string) + "\x00" + mm["destination"].(string) + "\x00" + mm["consumerName"].(string)
	}
	sort.Slice(ms, func(i, j int) bool { return key(ms[i]) < key(ms[j]) })
	m["members"] = ms
	m["memberCount"] = len(ms)
	d, err := canon.Digest(m)
	if err != nil {
		t.Fatal(err)
	}
	m["deliverySetDefinitionDigest"] = d
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pgcall.RegisterDeliverySet(ctx, reg, doc, "test-ordering")
	if err != nil {
		t.Fatalf("register delivery set 2: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, reg, q); err != nil {
		t.Fatalf("activate delivery set 2: %v", err)
	}
	return kernelfix.Bundle{Dsn: dsn, Admin: admin, Disp: testdb.Conn(t, dsn, "outbox_dispatcher")}
}

func dxEventIDs(cs []pgcall.ClaimedDelivery) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		out[c.EventID] = true
	}
	return out
}

// R-CL-7: under per_aggregate, revision 2 of an aggregate is not claimable while revision 1 to
// the same destination is pending or leased; it becomes claimable once revision 1 is
// acknowledged (or quarantined); other aggregates flow meanwhile; a destination with ordering
// none delivers every revision at once.
func TestPerAggregateOrdering(t *testing.T) {
	t.Parallel()
	b := dxOrderedSetup(t)
	ctx := context.Background()
	a1 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-a", 1)
	a2 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-a", 2)
	a3 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-a", 3)
	b1 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-b", 1)
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1`, dxDestOrdered); n != 4 {
		t.Fatalf("%d deliveries to %s", n, dxDestOrdered)
	}

	// ordering none: all four at once.
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestMetering); len(cs) != 4 {
		t.Fatalf("ordering none claimed %d, want 4", len(cs))
	}

	// per_aggregate: only the head of each aggregate.
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered)
	firstClaim := cs
	got := dxEventIDs(cs)
	if len(cs) != 2 || !got[a1] || !got[b1] {
		t.Fatalf("per_aggregate first claim %v, want a1 and b1", got)
	}
	var ca1 pgcall.ClaimedDelivery
	for _, c := range cs {
		if c.EventID == a1 {
			ca1 = c
		}
	}
	// a1 leased: a2 still blocked.
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered); len(cs) != 0 {
		t.Fatalf("claimed %v while revision 1 is leased", dxEventIDs(cs))
	}
	// a1 retried (pending again, available now): a2 still blocked; a1 comes back first.
	if _, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(ca1), "awaiting_revision", nil); err != nil {
		t.Fatal(err)
	}
	dxMakeAvailable(t, b, dxDestOrdered, a1)
	cs = kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered)
	if len(cs) != 1 || cs[0].EventID != a1 {
		t.Fatalf("after retry claimed %v, want only a1", dxEventIDs(cs))
	}
	ca1 = cs[0]
	// Other aggregates flow meanwhile: b2 waits for b1, then goes while agg-a is still blocked.
	b2 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-b", 2)
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered); len(cs) != 0 {
		t.Fatalf("b2 claimed while b1 is leased: %v", dxEventIDs(cs))
	}
	var cb1 pgcall.ClaimedDelivery
	for _, c := range firstClaim {
		if c.EventID == b1 {
			cb1 = c
		}
	}
	kernelfix.Ack(t, b.Disp, cb1)
	cs = kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered)
	if len(cs) != 1 || cs[0].EventID != b2 {
		t.Fatalf("after ack of b1 claimed %v, want only b2 (a2 still blocked by leased a1)", dxEventIDs(cs))
	}
	c := kernelfix.NewReceipt(t, ca1).Seal(t)
	ack, rc := c.JSON(t)
	if _, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(ca1), ack, rc); err != nil {
		t.Fatal(err)
	}
	// a1 acknowledged: a2 (not a3) is claimable.
	cs = kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered)
	if len(cs) != 1 || cs[0].EventID != a2 {
		t.Fatalf("after ack of a1 claimed %v, want only a2", dxEventIDs(cs))
	}
	// a2 quarantined: a3 is claimable (quarantine is terminal).
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(cs[0]), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	cs = kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, dxDestOrdered)
	if len(cs) != 1 || cs[0].EventID != a3 {
		t.Fatalf("after quarantine of a2 claimed %v, want only a3", dxEventIDs(cs))
	}
}
