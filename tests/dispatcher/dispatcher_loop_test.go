package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

func dpOneDest(dest string) map[string]config.Destination {
	return map[string]config.Destination{dest: {Transport: config.TransportInProcess, Auth: config.AuthNone}}
}

// R-DP-1, R-AK-7: an HTTP consumer on loopback answers transient errors three times, then
// succeeds: the delivery ends acknowledged, the event is published, and the attempt history
// shows each try with its normalized code.
func TestDispatcherTransientErrorsThenAck(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t, dispatcherfix.MeteringDest)
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		switch call {
		case 1:
			return dispatcherfix.Reply{Kind: "status", Code: 503, Body: `{"code":"consumer_unavailable"}`}
		case 2:
			return dispatcherfix.Reply{Kind: "status", Code: 429, Body: `{"code":"capacity_protection","ref":"shed:queue_full"}`}
		case 3:
			return dispatcherfix.Reply{Kind: "status", Code: 503, Body: `{"code":"awaiting_revision"}`}
		}
		return dispatcherfix.Reply{Kind: "ack"}
	})
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("dp-transient", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})

	ev := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "acknowledged", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "acknowledged" })

	got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
	want := []dispatcherfix.Attempt{
		{Number: 1, Worker: "dp-transient", Outcome: "retryable", Code: "consumer_unavailable"},
		{Number: 2, Worker: "dp-transient", Outcome: "retryable", Code: "capacity_protection"},
		{Number: 3, Worker: "dp-transient", Outcome: "retryable", Code: "awaiting_revision"},
		{Number: 4, Worker: "dp-transient", Outcome: "acknowledged", Code: ""},
	}
	if len(got) != len(want) {
		t.Fatalf("attempt history %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("attempt %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1::uuid`, ev); n != 1 {
		t.Fatal("fully acknowledged event not published")
	}
	if c.CallsFor(ev) != 4 || c.BadSig != 0 {
		t.Fatalf("consumer calls %d, bad signatures %d", c.CallsFor(ev), c.BadSig)
	}
	if v := testutil.ToFloat64(r.M.Retries.WithLabelValues(dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", "capacity_protection", "pending")); v != 1 {
		t.Fatalf("retries{capacity_protection} = %v", v)
	}
	if v := testutil.ToFloat64(r.M.Acks.WithLabelValues(dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", "complete")); v != 1 {
		t.Fatalf("acks{complete} = %v", v)
	}
	if err := r.Stop(t); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// R-DP-1, R-AK-2, R-AK-7: a consumer whose 2xx answers are malformed (bare 2xx, missing receipt,
// an ack the kernel rejects) is retried as invalid_ack and never acknowledged; at max attempts
// the kernel quarantines it as retry_exhausted (never a silent success).
func TestDispatcherMalformedAckRetriedNeverAcknowledged(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	dispatcherfix.FastRetry(t, db.Admin, dispatcherfix.MeteringDest, 4)
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		switch call {
		case 1:
			return dispatcherfix.Reply{Kind: "status", Code: 204}
		case 2:
			return dispatcherfix.Reply{Kind: "status", Code: 200, Body: `{"ack":{"destination":"x"}}`}
		case 3:
			return dispatcherfix.Reply{Kind: "status", Code: 200, Body: `OK`}
		}
		// Well-formed, but the receipt digest does not match its content: ack_delivery (OB002).
		ack, receipt, _ := dispatcherfix.Answer(d)
		var rm map[string]any
		_ = json.Unmarshal(receipt, &rm)
		rm["eventEnvelopeSha256"] = strings.Repeat("0", 64)
		receipt, _ = json.Marshal(rm)
		b, _ := json.Marshal(wire.HTTPSuccessBody{Ack: ack, Receipt: receipt})
		return dispatcherfix.Reply{Kind: "status", Code: 200, Body: string(b)}
	})
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("dp-malformed", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})

	ev := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "terminal", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "quarantined" })
	got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
	if len(got) != 4 {
		t.Fatalf("attempts %+v", got)
	}
	for _, a := range got {
		if a.Outcome != "retryable" || a.Code != "invalid_ack" {
			t.Fatalf("attempt %+v: want retryable invalid_ack", a)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid
		AND (delivered_at IS NOT NULL OR ack_receipt_digest IS NOT NULL)`, ev); n != 0 {
		t.Fatal("a rejected ack left acknowledgement fields")
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'retry_exhausted'`, ev); n != 1 {
		t.Fatal("no retry_exhausted quarantine")
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_events e WHERE e.event_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`, ev); n != 1 {
		t.Fatal("event published without acknowledgement")
	}
	// R-DP-4 (issue 12 defect 6): the consumer answered every time, so nothing is a transport
	// error; the one 200 the kernel refused (OB002) is an ack rejection, and the duration
	// histogram files it under the kernel's verdict, never under "acknowledged".
	for _, code := range []string{"transport_error", "consumer_timeout"} {
		if v := testutil.ToFloat64(r.M.TransportErrors.WithLabelValues(dispatcherfix.MeteringDest, code)); v != 0 {
			t.Fatalf("transport_errors{%s} = %v, want 0", code, v)
		}
	}
	if v := testutil.ToFloat64(r.M.AckRejections.WithLabelValues(dispatcherfix.MeteringDest, "OB002")); v != 1 {
		t.Fatalf("ack_rejections{OB002} = %v, want 1", v)
	}
	for outcome, want := range map[string]uint64{"acknowledged": 0, "ack_rejected": 1, "retryable": 3} {
		if n := histCount(t, r.M.DeliveryLatency, dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", outcome); n != want {
			t.Fatalf("delivery_duration_seconds{outcome=%s} count = %d, want %d", outcome, n, want)
		}
	}
	if v := testutil.ToFloat64(r.M.Acks.WithLabelValues(dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", "complete")); v != 0 {
		t.Fatal("ack counted")
	}
}

// R-DP-1, R-AK-6, R-AK-7: a permanent rejection (409/422 with a non-retryable code) is
// quarantined at once with that normalized code and the event digest.
func TestDispatcherPermanentRejectionQuarantined(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	var first atomic.Value
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		if first.CompareAndSwap(nil, d.EventID) {
			return dispatcherfix.Reply{Kind: "status", Code: 409, Body: `{"code":"unknown_event_type","ref":"type:unsupported"}`}
		}
		return dispatcherfix.Reply{Kind: "status", Code: 422, Body: `{"code":"consumer_rejected"}`}
	})
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("dp-reject", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	cfg.Concurrency = 1
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})

	e1 := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "first quarantined", func() bool { return db.Status(t, dispatcherfix.MeteringDest, e1) == "quarantined" })
	e2 := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "second quarantined", func() bool { return db.Status(t, dispatcherfix.MeteringDest, e2) == "quarantined" })
	for ev, code := range map[string]string{e1: "unknown_event_type", e2: "consumer_rejected"} {
		got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
		if len(got) != 1 || got[0].Outcome != "non_retryable" || got[0].Code != code {
			t.Fatalf("%s: attempts %+v, want one non_retryable %s", code, got, code)
		}
		if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_quarantine q JOIN outbox.outbox_events e USING (event_id)
			WHERE q.event_id = $1::uuid AND q.reason = $2 AND q.event_envelope_sha256 = e.event_envelope_sha256`, ev, code); n != 1 {
			t.Fatalf("%s: quarantine row missing or without the event digest", code)
		}
		if c.CallsFor(ev) != 1 {
			t.Fatalf("quarantined delivery called %d times", c.CallsFor(ev))
		}
	}
	// Issue 12 defect 2 (R-AK-6, R-AK-7): the consumer's ref of a 409/422 answer is kept,
	// sanitized, on the finish and the delivery.
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes f
		JOIN outbox.outbox_deliveries d ON d.current_attempt_id = f.attempt_id
		WHERE d.event_id = $1::uuid AND f.sanitized_error_ref = 'type:unsupported' AND d.last_error_ref = 'type:unsupported'`, e1); n != 1 {
		t.Fatal("the rejection's ref was not kept on the quarantine finish")
	}
	if v := testutil.ToFloat64(r.M.Quarantines.WithLabelValues(dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", "unknown_event_type")); v != 1 {
		t.Fatalf("quarantines{unknown_event_type} = %v", v)
	}
}

// R-DP-1, R-AK-7, P-5: the dispatcher verifies the envelope digest outside any transaction and
// never delivers a mismatch: it is quarantined as digest_conflict without a consumer call. Two
// ways in: the stored canonical text (what the claim returns and the dispatcher checks by
// sha256 alone) is altered, or a row without canonical text (written outside append_event) has
// its payload altered (the dispatcher canonicalizes the rebuilt envelope itself).
func TestDispatcherDigestMismatchQuarantinedNeverDelivered(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]string{
		"canonical text": `UPDATE outbox.outbox_events SET event_envelope_canonical = replace(event_envelope_canonical, '"sample"', '"tampered"') WHERE event_id = $1::uuid`,
		"payload of a row without canonical text": `UPDATE outbox.outbox_events SET event_envelope_canonical = NULL, event_payload = '{"tampered":true}' WHERE event_id = $1::uuid`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := dispatcherfix.Setup(t)
			ev := db.AppendMetering(t)
			// Corrupt the stored event behind the immutability triggers (superuser, test only).
			ctx := context.Background()
			if _, err := db.Admin.Exec(ctx, `SET session_replication_role = replica`); err != nil {
				t.Fatal(err)
			}
			if tag, err := db.Admin.Exec(ctx, tamper, ev); err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("tamper: %v %v", tag, err)
			}
			if _, err := db.Admin.Exec(ctx, `RESET session_replication_role`); err != nil {
				t.Fatal(err)
			}
			c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack"} })
			cfg := dispatcherfix.Config("dp-digest", dpOneDest(dispatcherfix.MeteringDest))
			dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})
			dispatcherfix.Eventually(t, "quarantined", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "quarantined" })
			got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
			if len(got) != 1 || got[0].Outcome != "non_retryable" || got[0].Code != "digest_conflict" {
				t.Fatalf("attempts %+v", got)
			}
			if c.CallsFor(ev) != 0 {
				t.Fatal("a digest mismatch was delivered")
			}
		})
	}
}

// R-DP-1, R-CL-4: a consumer slower than the lease keeps its lease through renewals: the
// delivery outlives its original expiry, stays with one attempt, and is acknowledged.
func TestDispatcherRenewalKeepsSlowDeliveryLeased(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	release := make(chan struct{})
	c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack", Wait: release} })
	c.Started = make(chan wire.Delivery, 4)
	cfg := dispatcherfix.Config("dp-renew", dpOneDest(dispatcherfix.MeteringDest))
	cfg.Lease = 2 * time.Second
	cfg.RenewFraction = 0.25
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})

	ev := db.AppendMetering(t)
	<-c.Started
	var firstExpiry time.Time
	var firstAttempt string
	if err := db.Admin.QueryRow(context.Background(), `SELECT s.started_at + interval '2 seconds', s.attempt_id::text
		FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = $1::uuid`, ev).Scan(&firstExpiry, &firstAttempt); err != nil {
		t.Fatal(err)
	}
	// Wait (on database state) until the first attempt outlived its original lease by a second and
	// still holds a live, extended lease.
	dispatcherfix.Eventually(t, "lease outlived and renewed", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid AND status = 'leased'
			AND current_attempt_id = $3::uuid AND now() > $2::timestamptz + interval '1 second' AND lease_expires_at > now()`,
			ev, firstExpiry, firstAttempt) == 1
	})
	close(release)
	dispatcherfix.Eventually(t, "acknowledged", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "acknowledged" })
	got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
	if len(got) != 1 || got[0].Outcome != "acknowledged" {
		t.Fatalf("attempts %+v: the lease lapsed", got)
	}
	if v := testutil.ToFloat64(r.M.FencingRejections.WithLabelValues(dispatcherfix.MeteringDest, "renew")); v != 0 {
		t.Fatal("renewal fenced")
	}
}

// R-CL-3, R-AK-8, T-2: with renewal disabled a slow delivery's lease expires; another dispatcher
// recovers and redelivers it; the first dispatcher's late ack is fenced off (counted) and changes
// nothing.
func TestDispatcherLeaseExpiryRedeliveryLateAckFenced(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	release := make(chan struct{})
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		if call == 1 {
			return dispatcherfix.Reply{Kind: "ack", Wait: release} // attempt 1 (dispatcher A): slow, then a valid ack
		}
		return dispatcherfix.Reply{Kind: "ack"}
	})
	c.Started = make(chan wire.Delivery, 4)
	srv, h := dispatcherfix.HTTPConsumer(t, c, 30*time.Second)

	cfgA := dispatcherfix.Config("dp-a", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	cfgA.Lease = time.Second
	cfgA.StatementTimeout = 500 * time.Millisecond
	cfgA.LeaseRenewal = false
	cfgA.Concurrency = 1
	a := dispatcherfix.Start(t, db, cfgA, map[string]transport.Transport{dispatcherfix.MeteringDest: h})

	ev := db.AppendMetering(t)
	d1 := <-c.Started
	if d1.AttemptNumber != 1 {
		t.Fatalf("first call is attempt %d", d1.AttemptNumber)
	}
	cfgB := dispatcherfix.Config("dp-b", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	b := dispatcherfix.Start(t, db, cfgB, map[string]transport.Transport{dispatcherfix.MeteringDest: h})
	dispatcherfix.Eventually(t, "redelivered and acknowledged", func() bool { return db.Status(t, dispatcherfix.MeteringDest, ev) == "acknowledged" })
	d2 := <-c.Started
	if d2.AttemptNumber != 2 || d2.AttemptID == d1.AttemptID {
		t.Fatalf("redelivery attempt %d", d2.AttemptNumber)
	}
	var ackedAttempt string
	if err := db.Admin.QueryRow(context.Background(), `SELECT current_attempt_id::text FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, ev).Scan(&ackedAttempt); err != nil {
		t.Fatal(err)
	}

	close(release) // A's consumer call returns now, long after its lease expired
	dispatcherfix.Eventually(t, "A's late ack fenced", func() bool {
		return testutil.ToFloat64(a.M.FencingRejections.WithLabelValues(dispatcherfix.MeteringDest, "ack")) == 1
	})
	got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
	if len(got) != 2 || got[0].Worker != "dp-a" || got[0].Outcome != "lease_expired_unknown" ||
		got[1].Worker != "dp-b" || got[1].Outcome != "acknowledged" {
		t.Fatalf("attempts %+v", got)
	}
	var still string
	_ = db.Admin.QueryRow(context.Background(), `SELECT current_attempt_id::text FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, ev).Scan(&still)
	if still != ackedAttempt || db.Status(t, dispatcherfix.MeteringDest, ev) != "acknowledged" {
		t.Fatal("the late ack changed the delivery")
	}
	if testutil.ToFloat64(a.M.Acks.WithLabelValues(dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", "complete")) != 0 ||
		testutil.ToFloat64(b.M.Acks.WithLabelValues(dispatcherfix.MeteringDest, dispatcherfix.MeteringType, "1", "complete")) != 1 {
		t.Fatal("ack counters wrong")
	}
}

// D-7, R-DP-1: two dispatchers on one database share the work safely (SKIP LOCKED + fencing):
// every delivery ends acknowledged with exactly one attempt and one finish, no event is applied
// twice, and the claims of both add up to the deliveries.
func TestTwoDispatchersOnOneDatabase(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	dests := []string{"metering_input_processor", "billing_finalization_coordinator", "billing_settlement_catch_up", "core_operations"}
	types := map[string]string{
		"metering_input_processor": dispatcherfix.MeteringType, "billing_finalization_coordinator": "execution.run-finalization.closed@1",
		"billing_settlement_catch_up": "metering.settlement-input.current-changed@1", "core_operations": "run.created@2.0",
	}
	c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack"} })
	mk := func(worker string) *dispatcherfix.Running {
		ds := map[string]config.Destination{}
		for _, d := range dests {
			ds[d] = config.Destination{Transport: config.TransportInProcess, Auth: config.AuthNone}
		}
		cfg := dispatcherfix.Config(worker, ds)
		cfg.BatchSize = 3
		cfg.Concurrency = 4
		cons := map[string]wire.Consumer{}
		for _, d := range dests {
			cons[d] = c
		}
		ip := transport.NewInProcess(cons)
		trs := map[string]transport.Transport{}
		for _, d := range dests {
			trs[d] = ip
		}
		return dispatcherfix.Start(t, db, cfg, trs)
	}
	a, b := mk("dp-one"), mk("dp-two")
	const perDest = 15
	var ids []string
	for i := 0; i < perDest; i++ {
		for _, d := range dests {
			sv := "1"
			if d == "core_operations" {
				sv = "2.0"
			}
			ids = append(ids, testfix.Append(t, db.Admin, testfix.Envelope(types[d], sv, "agg-"+testfix.NewUUID()[:8], 1)))
		}
	}
	total := perDest * len(dests)
	dispatcherfix.Eventually(t, "all acknowledged", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'acknowledged'`) == total
	})
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts`); n != total {
		t.Fatalf("%d attempt starts for %d deliveries", n, total)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome = 'acknowledged'`); n != total {
		t.Fatalf("%d acknowledged finishes for %d deliveries", n, total)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`); n != 0 {
		t.Fatalf("%d events unpublished", n)
	}
	for _, id := range ids {
		if c.AppliedFor(id) != 1 {
			t.Fatalf("event applied %d times", c.AppliedFor(id))
		}
	}
	sum := func(m *metrics.Metrics) float64 {
		s := 0.0
		for _, d := range dests {
			sv := "1"
			if d == "core_operations" {
				sv = "2.0"
			}
			s += testutil.ToFloat64(m.Claims.WithLabelValues(d, types[d], sv))
		}
		return s
	}
	if got := sum(a.M) + sum(b.M); got != float64(total) {
		t.Fatalf("claims %v, want %d", got, total)
	}
}

// R-DP-1: the loop survives losing every database connection (as in a PostgreSQL restart): the
// pool reconnects, LISTEN is re-established, later events are delivered.
func TestDispatcherSurvivesConnectionLoss(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack"} })
	cfg := dispatcherfix.Config("dp-reconnect", dpOneDest(dispatcherfix.MeteringDest))
	cfg.PollInterval = 10 * time.Minute // only NOTIFY (or the post-reconnect catch-up) wakes the loop
	dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})
	e1 := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "first acknowledged", func() bool { return db.Status(t, dispatcherfix.MeteringDest, e1) == "acknowledged" })

	if n := db.Count(t, `SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); n == 0 {
		t.Fatal("no dispatcher sessions to terminate")
	}
	e2 := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "delivered after reconnect", func() bool { return db.Status(t, dispatcherfix.MeteringDest, e2) == "acknowledged" })
}

// R-DP-6: no active delivery set, or a configured destination the database does not know, or a
// receiptBuilding is a transport that builds receipts of kind itself (transport.ReceiptBuilder).
type receiptBuilding struct {
	transport.Func
	kind string
}

func (r receiptBuilding) ReceiptKind() string { return r.kind }

// JetStream transport on a non-broker destination: the dispatcher refuses to start.
func TestDispatcherPreflightRefusesUnsafeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	builds := "" // the receipt kind the transports build themselves ("" : none)
	mk := func(dsn string, cfg *config.Config) error {
		pc, _ := dispatcher.PoolConfig(cfg, dsn)
		pool := dispatcherfix.Pool(t, pc)
		trs := map[string]transport.Transport{}
		for n := range cfg.Destinations {
			f := transport.Func(func(context.Context, wire.Delivery) (wire.Result, error) { return wire.Result{}, nil })
			trs[n] = f
			if builds != "" {
				trs[n] = receiptBuilding{Func: f, kind: builds}
			}
		}
		d, err := dispatcher.New(pool, cfg, dispatcher.Options{Transports: trs})
		if err != nil {
			t.Fatal(err)
		}
		return d.Preflight(ctx)
	}
	// A fresh database: nothing registered, nothing active.
	bare := &dispatcherfix.DB{Dsn: dispatcherfix.DatabaseURL(t)}
	err := mk(bare.Dsn, dispatcherfix.Config("dp-pre", dpOneDest(dispatcherfix.MeteringDest)))
	if !errors.Is(err, dispatcher.ErrNoActiveDeliverySet) {
		t.Fatalf("no active set: %v", err)
	}
	db := dispatcherfix.Setup(t)
	err = mk(db.Dsn, dispatcherfix.Config("dp-pre", dpOneDest("not_a_destination")))
	if err == nil || !strings.Contains(err.Error(), "destination not_a_destination is not registered") {
		t.Fatalf("unknown destination: %v", err)
	}
	// No transport is a special case (issue 39): a transport that builds its own receipts
	// (transport.ReceiptBuilder, as JetStream does) must serve a destination of that kind.
	builds = transport.BrokerReceiptKind
	err = mk(db.Dsn, dispatcherfix.Config("dp-pre", dpOneDest(dispatcherfix.MeteringDest)))
	builds = ""
	if err == nil || !strings.Contains(err.Error(), "its transport builds broker_publication receipts but the destination's receipt kind is metering_input_processor") {
		t.Fatalf("a broker-receipt transport on a consumer destination: %v", err)
	}
	if err := mk(db.Dsn, dispatcherfix.Config("dp-pre", dpOneDest(dispatcherfix.MeteringDest))); err != nil {
		t.Fatalf("valid preflight refused: %v", err)
	}
	// database_role: every pooled session runs as outbox_dispatcher with the statement timeout,
	// so these tests exercise the dispatcher's real grants.
	cfg := dispatcherfix.Config("dp-pre", dpOneDest(dispatcherfix.MeteringDest))
	pc, _ := dispatcher.PoolConfig(cfg, db.Dsn)
	var who, st string
	if err := dispatcherfix.Pool(t, pc).QueryRow(ctx, `SELECT current_user, current_setting('statement_timeout')`).Scan(&who, &st); err != nil {
		t.Fatal(err)
	}
	if who != "outbox_dispatcher" || st != "900ms" {
		t.Fatalf("session runs as %s with statement_timeout %s", who, st)
	}
}

// histCount is the sample count of one series of a histogram vector.
func histCount(t *testing.T, h *prometheus.HistogramVec, labels ...string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.WithLabelValues(labels...).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
