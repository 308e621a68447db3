package dispatcher

// Controlled recovery end to end through the real dispatcher (SPEC R-AK-10, R-AK-8, R-CO-1):
// deliveries quarantined by a consumer that rejected them or by an exhausted retry budget are
// re-delivered by an operator after the consumer was fixed, and the dispatcher delivers the
// original event again.

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// rcRedeliverOp re-delivers as outbox_operator and fails the test on error.
func rcRedeliverOp(t *testing.T, op *pgx.Conn, dest, ev, caseID, reason, key string) pgcall.Redelivery {
	t.Helper()
	r, err := pgcall.RedeliverQuarantined(context.Background(), op, pgcall.RedeliverParams{
		Destination: dest, EventID: ev, CaseID: caseID, Reason: reason, IdempotencyKey: key})
	if err != nil {
		t.Fatalf("redeliver %s/%s: %v", dest, ev, err)
	}
	return r
}

// R-AK-10 through the dispatcher: one delivery is quarantined because the consumer rejected
// it (consumer_rejected, non-retryable), another because its retry budget ran out
// (retry_exhausted). The consumer is fixed; the operator previews and re-delivers both (one
// key each; the same key again makes no second recovery). The dispatcher delivers the original
// events again: both deliveries end acknowledged, each event published once, the attempt
// numbers continue (2 after 1; 3 after 1 and 2), the audit rows are there, and
// pgoutbox_redeliveries_total counts one re-delivery per quarantine reason.
func TestRecoveryThroughDispatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dispatcherfix.Setup(t)
	dispatcherfix.FastRetry(t, db.Admin, dispatcherfix.MeteringDest, 2)
	var fixed atomic.Bool
	var rejected atomic.Value // the event the consumer rejects permanently while broken
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		switch {
		case fixed.Load():
			return dispatcherfix.Reply{Kind: "ack"}
		case d.EventID == rejected.Load():
			return dispatcherfix.Reply{Kind: "result", Wres: wire.Result{Status: wire.NonRetryable, Code: "consumer_rejected", Ref: "bug:4711"}}
		}
		return dispatcherfix.Reply{Kind: "result", Wres: wire.Result{Status: wire.Retryable, Code: "consumer_unavailable"}}
	})
	cfg := dispatcherfix.Config("dp-recovery", dpOneDest(dispatcherfix.MeteringDest))
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})

	evRejected := testfix.NewUUID()
	rejected.Store(evRejected)
	env := testfix.Envelope(dispatcherfix.MeteringType, "1", "agg-rejected", 1)
	env["eventId"] = evRejected
	testfix.Append(t, db.Admin, env)
	evExhausted := db.AppendMetering(t)
	for _, ev := range []string{evRejected, evExhausted} {
		ev := ev
		dispatcherfix.Eventually(t, "quarantined "+ev, func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "quarantined" })
	}
	for ev, reason := range map[string]string{evRejected: "consumer_rejected", evExhausted: "retry_exhausted"} {
		if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = $2`, ev, reason); n != 1 {
			t.Fatalf("%s: no %s quarantine row", ev, reason)
		}
	}

	fixed.Store(true)
	op := testdb.Conn(t, db.Dsn, "outbox_operator")
	for _, ev := range []string{evRejected, evExhausted} {
		p, err := pgcall.PreviewRedelivery(ctx, op, dispatcherfix.MeteringDest, ev)
		if err != nil || p.Status != "quarantined" || p.Published {
			t.Fatalf("preview %+v %v", p, err)
		}
	}
	first := rcRedeliverOp(t, op, dispatcherfix.MeteringDest, evRejected, "INC-1", "consumer accepts schema 1 again (fix 4711)", "inc-1-rejected")
	rcRedeliverOp(t, op, dispatcherfix.MeteringDest, evExhausted, "INC-1", "consumer capacity restored", "inc-1-exhausted")
	if again := rcRedeliverOp(t, op, dispatcherfix.MeteringDest, evRejected, "INC-1", "consumer accepts schema 1 again (fix 4711)", "inc-1-rejected"); again != first {
		t.Fatalf("same key again: %+v, want %+v", again, first)
	}
	for _, ev := range []string{evRejected, evExhausted} {
		ev := ev
		dispatcherfix.Eventually(t, "acknowledged "+ev, func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "acknowledged" })
	}

	wantAttempts := map[string][]dispatcherfix.Attempt{
		evRejected:  {{Number: 1, Worker: "dp-recovery", Outcome: "non_retryable", Code: "consumer_rejected"}, {Number: 2, Worker: "dp-recovery", Outcome: "acknowledged", Code: ""}},
		evExhausted: {{Number: 1, Worker: "dp-recovery", Outcome: "retryable", Code: "consumer_unavailable"}, {Number: 2, Worker: "dp-recovery", Outcome: "retryable", Code: "consumer_unavailable"}, {Number: 3, Worker: "dp-recovery", Outcome: "acknowledged", Code: ""}},
	}
	for ev, want := range wantAttempts {
		got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
		if len(got) != len(want) {
			t.Fatalf("%s: attempts %+v, want %+v", ev, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: attempt %d = %+v, want %+v", ev, i+1, got[i], want[i])
			}
		}
		if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1::uuid`, ev); n != 1 {
			t.Fatalf("%s: %d publications, want 1", ev, n)
		}
		if c.AppliedFor(ev) != 1 {
			t.Fatalf("%s: answered with an ack %d times", ev, c.AppliedFor(ev))
		}
		if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_recoveries r JOIN outbox.outbox_quarantine q USING (quarantine_id)
			WHERE r.event_id = $1::uuid AND r.before_status = 'quarantined' AND r.after_status = 'pending'
			  AND q.acknowledged_at = r.recovered_at AND q.case_id = 'INC-1'`, ev); n != 1 {
			t.Fatalf("%s: %d audit rows", ev, n)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_recoveries`); n != 2 {
		t.Fatalf("%d recoveries, want 2", n)
	}

	// The metric, read through the dispatcher's own pool (role outbox_dispatcher).
	col := metrics.NewRedeliveries(r.Pool, 5*time.Second)
	want := `
# HELP pgoutbox_redeliveries_total Controlled re-deliveries of quarantined deliveries (outbox.redeliver_quarantined) so far, by destination and the quarantine's reason code; a database count (R-AK-10).
# TYPE pgoutbox_redeliveries_total counter
pgoutbox_redeliveries_total{destination="metering_input_processor",reason="consumer_rejected"} 1
pgoutbox_redeliveries_total{destination="metering_input_processor",reason="retry_exhausted"} 1
# HELP pgoutbox_redelivery_stats_up 1 when the last outbox.redelivery_stats read succeeded.
# TYPE pgoutbox_redelivery_stats_up gauge
pgoutbox_redelivery_stats_up 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// Issue 21 item 6: the populated collector passes promlint (a _total series is a counter).
	if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) != 0 {
		t.Fatalf("promlint: %v %+v", err, problems)
	}
	if err := r.Stop(t); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// R-AK-10, R-AK-8, R-CO-1: a re-delivery of an event the consumer had in fact applied is
// harmless. The reference consumer applies the event and commits its receipt, but its answer
// is lost and replaced by a permanent rejection on the way back (a broken proxy): the delivery
// is quarantined. After the proxy is fixed the operator re-delivers it; the consumer finds its
// receipt and answers the same one, the kernel accepts it, the event is published once, the
// consumer's apply ran exactly once and it holds exactly one receipt - the one the delivery's
// acknowledgement names.
func TestRecoveryRedeliveryOfAppliedEventIsHarmless(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kb := consumerfix.Setup(t) // one database: producer side and the reference consumers' inbox
	db := &dispatcherfix.DB{Dsn: kb.Dsn, Admin: testdb.Conn(t, kb.Dsn, "")}
	testfix.ActivateReference(t, db.Admin)
	var spec reference.Spec
	for _, s := range reference.All() {
		if s.Destination == dispatcherfix.MeteringDest {
			spec = s
		}
	}
	var applies atomic.Int64
	kit := kb.Kit(t, spec.ConsumerName, func(c *consumer.Config) {
		orig := c.Apply
		c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
			applies.Add(1)
			return orig(ctx, tx, ev)
		}
	})
	inner := transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: kit})
	var proxyFixed atomic.Bool
	var mu sync.Mutex
	var answers []wire.Result // what the consumer really answered, in order
	tr := transport.Func(func(ctx context.Context, d wire.Delivery) (wire.Result, error) {
		res, err := inner.Deliver(ctx, d)
		if err != nil {
			return res, err
		}
		mu.Lock()
		answers = append(answers, res)
		mu.Unlock()
		if !proxyFixed.Load() {
			return wire.Result{Status: wire.NonRetryable, Code: "consumer_rejected", Ref: "proxy:422"}, nil
		}
		return res, nil
	})
	cfg := dispatcherfix.Config("dp-recovery-kit", dpOneDest(dispatcherfix.MeteringDest))
	dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: tr})

	ev := testfix.Append(t, db.Admin, testfix.Envelope(dispatcherfix.MeteringType, "1", "agg-applied", 1))
	dispatcherfix.Eventually(t, "quarantined", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "quarantined" })
	if applies.Load() != 1 || consumerfix.Receipts(t, db.Admin, spec.ConsumerName, ev) != 1 {
		t.Fatalf("before recovery: %d applies, %d receipts", applies.Load(), consumerfix.Receipts(t, db.Admin, spec.ConsumerName, ev))
	}

	proxyFixed.Store(true)
	op := testdb.Conn(t, db.Dsn, "outbox_operator")
	rcRedeliverOp(t, op, dispatcherfix.MeteringDest, ev, "INC-PROXY", "proxy fixed; consumer had applied the event (its receipt answers)", "inc-proxy-1")
	dispatcherfix.Eventually(t, "acknowledged", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "acknowledged" })

	if applies.Load() != 1 {
		t.Fatalf("apply ran %d times, want 1 (the re-delivery must find the receipt)", applies.Load())
	}
	if n := consumerfix.Receipts(t, db.Admin, spec.ConsumerName, ev); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 2 || answers[0].Status != wire.Acknowledged || answers[1].Status != wire.Acknowledged {
		t.Fatalf("consumer answers %+v", answers)
	}
	ref := func(r wire.Result) string {
		var a struct {
			AppliedReceipt map[string]any `json:"appliedReceipt"`
		}
		_ = json.Unmarshal(r.Ack, &a)
		b, _ := json.Marshal(a.AppliedReceipt)
		return string(b)
	}
	if ref(answers[0]) != ref(answers[1]) || ref(answers[0]) == "null" {
		t.Fatalf("the re-delivery answered another receipt:\n%s\n%s", ref(answers[0]), ref(answers[1]))
	}
	var same int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_deliveries d JOIN inbox.inbox_receipts r
		ON r.event_id = d.event_id AND r.consumer_name = d.consumer_name
		WHERE d.destination = $1 AND d.event_id = $2::uuid
		  AND d.ack_receipt_ref = r.receipt_ref AND d.ack_receipt_digest = r.receipt_digest`, dispatcherfix.MeteringDest, ev).Scan(&same); err != nil || same != 1 {
		t.Fatalf("the acknowledgement does not name the consumer's one receipt: %d %v", same, err)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1::uuid`, ev); n != 1 {
		t.Fatalf("%d publications", n)
	}
	got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
	if len(got) != 2 || got[0].Outcome != "non_retryable" || got[1].Number != 2 || got[1].Outcome != "acknowledged" {
		t.Fatalf("attempts %+v", got)
	}
}
