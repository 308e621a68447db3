package kernel

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// candidateOf is the D-2 receipt digest candidate of a receipt body: the canonical text of the
// body minus <prefix>Ref, <prefix>Digest and the kind's time field (the Go canonicalizer).
func candidateOf(t testing.TB, c pgcall.ClaimedDelivery, receipt json.RawMessage) string {
	t.Helper()
	k := kernelfix.ReceiptKindByType(t, c.ExpectedReceiptType)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(receipt, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, k.Prefix+"Ref")
	delete(m, k.Prefix+"Digest")
	delete(m, k.TimeField)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := canon.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func ackItem(t testing.TB, c pgcall.ClaimedDelivery, hot bool) pgcall.AckItem {
	t.Helper()
	ack, rc := kernelfix.ValidAck(t, c)
	it := pgcall.AckItem{Fence: kernelfix.FenceOf(c), Ack: ack, Receipt: rc}
	if hot {
		it.ReceiptDigestCandidate = candidateOf(t, c, rc)
	}
	return it
}

// R-AK-9: one item's rejection (fencing, ack rule, shape) never stops the others; the accepted
// items are acknowledged in the same call, the rejected ones are untouched; rows come back in
// input order with the SQLSTATE of the one-row function.
func TestAckDeliveriesItemRejectionLeavesOthersAcknowledged(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-batch", int64(i+1))
	}
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	if len(cs) != 4 {
		t.Fatalf("claimed %d", len(cs))
	}
	good0 := ackItem(t, cs[0], true)
	stale := ackItem(t, cs[1], true)
	stale.LeaseToken = "00000000-0000-4000-8000-000000000000" // wrong token: OB001
	bad := ackItem(t, cs[2], false)
	bad.Ack = json.RawMessage(`{"destination":"x"}`) // ack rule: OB002
	good3 := ackItem(t, cs[3], false)                // slow path (no candidate)
	shape := pgcall.AckItem{Fence: pgcall.Fence{Destination: kernelfix.DestMetering, EventID: "not-a-uuid", AttemptID: cs[0].AttemptID, LeaseToken: cs[0].LeaseToken}}
	before1, before2 := kernelfix.Row(t, b.Admin, cs[1].Destination, cs[1].EventID), kernelfix.Row(t, b.Admin, cs[2].Destination, cs[2].EventID)

	out, err := pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{good0, stale, bad, good3, shape})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ outcome, state string }{{"complete", ""}, {"rejected", "OB001"}, {"rejected", "OB002"}, {"complete", ""}, {"rejected", "22023"}}
	if len(out) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(out), len(want), out)
	}
	for i, w := range want {
		if out[i].Outcome != w.outcome || out[i].SQLState != w.state {
			t.Errorf("item %d: %+v, want %s %s", i, out[i], w.outcome, w.state)
		}
	}
	if out[0].EventID != cs[0].EventID || out[3].EventID != cs[3].EventID {
		t.Fatalf("rows not in input order: %+v", out)
	}
	for _, i := range []int{0, 3} {
		if s := kernelfix.Status(t, b.Admin, cs[i].Destination, cs[i].EventID); s != "acknowledged" {
			t.Errorf("item %d: status %s", i, s)
		}
		if o, _ := kernelfix.Finish(t, b.Admin, cs[i].AttemptID); o != "acknowledged" {
			t.Errorf("item %d: finish %s", i, o)
		}
		if dxPublishedAt(t, b.Admin, cs[i].EventID) == nil {
			t.Errorf("item %d: not published", i)
		}
	}
	if kernelfix.Row(t, b.Admin, cs[1].Destination, cs[1].EventID) != before1 || kernelfix.Row(t, b.Admin, cs[2].Destination, cs[2].EventID) != before2 {
		t.Fatal("a rejected item changed its delivery")
	}
	if kernelfix.Finishes(t, b.Admin, cs[1].AttemptID)+kernelfix.Finishes(t, b.Admin, cs[2].AttemptID) != 0 {
		t.Fatal("a rejected item got a finish")
	}
	// The rejected ones are still leased to the same attempt: a correct ack goes through later.
	out, err = pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{ackItem(t, cs[1], true), ackItem(t, cs[2], true)})
	if err != nil || out[0].Outcome != "complete" || out[1].Outcome != "complete" {
		t.Fatalf("retry of the rejected items: %+v %v", out, err)
	}
}

// R-AK-9, R-AK-4: two deliveries of one event in one batch complete its publication exactly
// once; the same delivery named twice is refused the second time (OB001), never two finishes.
func TestAckDeliveriesOneEventTwoDeliveriesPublishedOnce(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	ev := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "case-b", 1) // core_operations + billing_finalization_coordinator
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps, kernelfix.DestCoord)
	if len(cs) != 2 || cs[0].EventID != ev || cs[1].EventID != ev {
		t.Fatalf("claimed %+v", cs)
	}
	dup := ackItem(t, cs[0], true)
	out, err := pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{ackItem(t, cs[0], true), ackItem(t, cs[1], false), dup})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Outcome != "complete" || out[1].Outcome != "complete" || out[2].Outcome != "rejected" || out[2].SQLState != "OB001" {
		t.Fatalf("outcomes %+v", out)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1::uuid`, ev); n != 1 {
		t.Fatalf("%d publications", n)
	}
	if kernelfix.Finishes(t, b.Admin, cs[0].AttemptID) != 1 {
		t.Fatal("the duplicated item has not exactly one finish")
	}
	// Acking one of the two alone leaves the event open: not_complete, no publication.
	ev2 := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "case-c", 1)
	cs = kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps, kernelfix.DestCoord)
	out, err = pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{ackItem(t, cs[0], true)})
	if err != nil || out[0].Outcome != "not_complete" || dxPublishedAt(t, b.Admin, ev2) != nil {
		t.Fatalf("first of two: %+v %v", out, err)
	}
}

// R-AK-9: the call itself must be a JSON array of at most 1000 items (22023 for the whole call).
func TestOutcomeBatchesRefuseBadCalls(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	for _, fn := range []string{"ack_deliveries", "retry_deliveries", "quarantine_deliveries"} {
		for _, arg := range []string{`{}`, `null`, `"x"`} {
			_, err := b.Disp.Exec(ctx, `SELECT * FROM outbox.`+fn+`($1::json)`, arg)
			kernelfix.WantState(t, err, "22023")
		}
		var big []byte
		big = append(big, '[')
		for i := 0; i < 1001; i++ {
			if i > 0 {
				big = append(big, ',')
			}
			big = append(big, '{', '}')
		}
		big = append(big, ']')
		_, err := b.Disp.Exec(ctx, `SELECT * FROM outbox.`+fn+`($1::json)`, string(big))
		kernelfix.WantState(t, err, "22023")
		var n int
		if err := b.Disp.QueryRow(ctx, `SELECT count(*) FROM outbox.`+fn+`('[]'::json)`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s([]): %d %v", fn, n, err)
		}
	}
	// Every other role: 42501 (R-SEC-1).
	for _, role := range []string{"outbox_producer", "outbox_consumer", "outbox_auditor", "outbox_registrar"} {
		c := testdb.Conn(t, b.Dsn, role)
		_, err := c.Exec(ctx, `SELECT * FROM outbox.ack_deliveries('[]'::json)`)
		kernelfix.WantState(t, err, "42501")
	}
}

// R-AK-9, R-AK-5: a retry batch answers pending, quarantined (retry_exhausted at max attempts)
// and rejected per item; awaiting_revision never exhausts.
func TestRetryDeliveriesMixed(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	if _, err := b.Admin.Exec(ctx, `SELECT outbox.set_retry_policy($1, '1 second', 2, '1 second', 0.2, 1)`, kernelfix.DestMetering); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-r", int64(i+1))
	}
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	ref := "503 from consumer"
	out, err := pgcall.RetryDeliveries(ctx, b.Disp, []pgcall.RetryItem{
		{Fence: kernelfix.FenceOf(cs[0]), ErrorCode: "consumer_unavailable", ErrorRef: &ref}, // attempt 1 of 1: exhausted
		{Fence: kernelfix.FenceOf(cs[1]), ErrorCode: "awaiting_revision"},                    // never exhausts
		{Fence: kernelfix.FenceOf(cs[2]), ErrorCode: "digest_conflict"},                      // non-retryable code: 22023
		{Fence: kernelfix.FenceOf(cs[3]), ErrorCode: "no_such_code"},                         // unknown: 22023
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ outcome, state string }{{"quarantined", ""}, {"pending", ""}, {"rejected", "22023"}, {"rejected", "22023"}}
	for i, w := range want {
		if out[i].Outcome != w.outcome || out[i].SQLState != w.state {
			t.Errorf("item %d: %+v, want %s %s", i, out[i], w.outcome, w.state)
		}
	}
	if s := kernelfix.Status(t, b.Admin, cs[0].Destination, cs[0].EventID); s != "quarantined" {
		t.Fatalf("exhausted: %s", s)
	}
	if r := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'retry_exhausted'`, cs[0].EventID); r != 1 {
		t.Fatal("no retry_exhausted quarantine row")
	}
	if o, d := kernelfix.Finish(t, b.Admin, cs[0].AttemptID); o != "retryable" || d != "quarantined" {
		t.Fatalf("exhausted finish %s/%s", o, d)
	}
	// awaiting_revision: several more attempts past max_attempts, still pending (R-AK-5).
	c := cs[1]
	for i := 0; i < 3; i++ {
		if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE destination = $1 AND event_id = $2::uuid`, c.Destination, c.EventID); err != nil {
			t.Fatal(err)
		}
		c = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
		out, err := pgcall.RetryDeliveries(ctx, b.Disp, []pgcall.RetryItem{{Fence: kernelfix.FenceOf(c), ErrorCode: "awaiting_revision"}})
		if err != nil || out[0].Outcome != "pending" {
			t.Fatalf("awaiting_revision attempt %d: %+v %v", c.AttemptNumber, out, err)
		}
	}
	if s := kernelfix.Status(t, b.Admin, c.Destination, c.EventID); s != "pending" {
		t.Fatalf("awaiting_revision exhausted: %s", s)
	}
	// ... and stays visible: the oldest open gap age per destination (metrics source and status).
	auditor := testdb.Conn(t, b.Dsn, "outbox_auditor")
	stats, err := pgcall.DeliveryStats(ctx, auditor)
	if err != nil {
		t.Fatal(err)
	}
	status, err := pgcall.DeliveryStatus(ctx, auditor)
	if err != nil {
		t.Fatal(err)
	}
	for i := range stats {
		gap := stats[i].OldestGapAge
		if (stats[i].Destination == kernelfix.DestMetering) != (gap > 0) {
			t.Errorf("delivery_stats %s: oldest gap age %v", stats[i].Destination, gap)
		}
	}
	for i := range status {
		gap := status[i].OldestGapAge
		if (status[i].Destination == kernelfix.DestMetering) != (gap > 0) {
			t.Errorf("delivery_status %s: oldest gap age %v", status[i].Destination, gap)
		}
	}
	// the rejected items are untouched and still leased
	for _, i := range []int{2, 3} {
		if s := kernelfix.Status(t, b.Admin, cs[i].Destination, cs[i].EventID); s != "leased" || kernelfix.Finishes(t, b.Admin, cs[i].AttemptID) != 0 {
			t.Fatalf("rejected item %d changed: %s", i, s)
		}
	}
}

// R-AK-9, R-AK-6: a quarantine batch quarantines the fenced items and refuses the others.
func TestQuarantineDeliveriesMixed(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-q", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-q", 2)
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	ref := "consumer said 422"
	out, err := pgcall.QuarantineDeliveries(ctx, b.Disp, []pgcall.QuarantineItem{
		{Fence: kernelfix.FenceOf(cs[0]), Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &ref},
		{Fence: kernelfix.FenceOf(cs[1]), Reason: "consumer_unavailable", ErrorCode: "consumer_unavailable"}, // retryable reason: 22023
	})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Outcome != "quarantined" || out[1].Outcome != "rejected" || out[1].SQLState != "22023" {
		t.Fatalf("outcomes %+v", out)
	}
	if s := kernelfix.Status(t, b.Admin, cs[0].Destination, cs[0].EventID); s != "quarantined" {
		t.Fatal(s)
	}
	if o, d := kernelfix.Finish(t, b.Admin, cs[0].AttemptID); o != "non_retryable" || d != "quarantined" {
		t.Fatalf("finish %s/%s", o, d)
	}
	if got := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid AND sanitized_error_ref = $2`, cs[0].AttemptID, ref); got != 1 {
		t.Fatal("error ref not kept on the finish")
	}
	// a second quarantine of the same attempt: fencing (not leased any more)
	out, err = pgcall.QuarantineDeliveries(ctx, b.Disp, []pgcall.QuarantineItem{{Fence: kernelfix.FenceOf(cs[0]), Reason: "consumer_rejected", ErrorCode: "consumer_rejected"}})
	if err != nil || out[0].SQLState != "OB001" {
		t.Fatalf("second quarantine: %+v %v", out, err)
	}
}

// D-2: the receipt hot path accepts exactly what the slow path accepts. A candidate that is
// correct is used; one that is not canonical or not the receipt's falls back to the slow path
// (the decision is the receipt's, never the candidate's); a receipt whose digest is wrong is
// refused either way.
func TestAckReceiptHotPathDecidesLikeSlowPath(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-h", int64(i+1))
	}
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	items := make([]pgcall.AckItem, 4)
	for i, c := range cs {
		items[i] = ackItem(t, c, true)
	}
	items[1].ReceiptDigestCandidate = " " + items[1].ReceiptDigestCandidate // not canonical: slow path decides (valid)
	items[2].ReceiptDigestCandidate = `{"eventId":"forged"}`                // not this receipt: slow path decides (valid)
	// a receipt whose digest does not match: the candidate of the edited receipt hashes to
	// something else than the quartet's digest -> OB002 on both paths
	var rc map[string]any
	if err := json.Unmarshal(items[3].Receipt, &rc); err != nil {
		t.Fatal(err)
	}
	rc["consumerOutcome"] = "tampered"
	items[3].Receipt, _ = json.Marshal(rc)
	items[3].ReceiptDigestCandidate = candidateOf(t, cs[3], items[3].Receipt)
	out, err := pgcall.AckDeliveries(ctx, b.Disp, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []string{"complete", "complete", "complete", "rejected"} {
		if out[i].Outcome != w {
			t.Errorf("item %d: %+v, want %s", i, out[i], w)
		}
	}
	slow := items[3]
	slow.ReceiptDigestCandidate = ""
	out, err = pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{slow})
	if err != nil || out[0].SQLState != "OB002" {
		t.Fatalf("slow path of the tampered receipt: %+v %v", out, err)
	}
	// The one-row function takes the same optional argument.
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-h", 9)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	it := ackItem(t, c, true)
	if res, err := pgcall.AckDelivery(ctx, b.Disp, it.Fence, it.Ack, it.Receipt, it.ReceiptDigestCandidate); err != nil || res != "complete" {
		t.Fatalf("ack_delivery with candidate: %s %v", res, err)
	}
}

// D-2: the audit sweep re-canonicalizes what the hot path trusted: a stored receipt tampered
// by a superuser is reported; clean ones are not.
func TestVerifyAckDigestsReportsTampering(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-v", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-v", 2)
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestMetering)
	if _, err := pgcall.AckDeliveries(ctx, b.Disp, []pgcall.AckItem{ackItem(t, cs[0], true), ackItem(t, cs[1], true)}); err != nil {
		t.Fatal(err)
	}
	auditor := testdb.Conn(t, b.Dsn, "outbox_auditor")
	probs, err := pgcall.VerifyAckDigests(ctx, auditor, 100)
	if err != nil || len(probs) != 0 {
		t.Fatalf("clean: %+v %v", probs, err)
	}
	if _, err := b.Admin.Exec(ctx, `ALTER TABLE outbox.outbox_delivery_attempt_finishes DISABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_delivery_attempt_finishes
		SET receipt = jsonb_set(receipt::jsonb, '{consumerOutcome}', '"forged"')::json WHERE attempt_id = $1::uuid`, cs[1].AttemptID); err != nil {
		t.Fatal(err)
	}
	probs, err = pgcall.VerifyAckDigests(ctx, auditor, 100)
	if err != nil || len(probs) != 1 || probs[0].EventID != cs[1].EventID {
		t.Fatalf("tampered: %+v %v", probs, err)
	}
	_, err = pgcall.VerifyAckDigests(ctx, b.Disp, 100)
	kernelfix.WantState(t, err, "42501")
}

var _ = time.Second
