package tests

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

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/dispatcher"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/transport"
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
	db := dpSetup(t, dpMeteringDest)
	c := newDPConsumer(func(call int, d wire.Delivery) dpReply {
		switch call {
		case 1:
			return dpReply{kind: "status", code: 503, body: `{"code":"consumer_unavailable"}`}
		case 2:
			return dpReply{kind: "status", code: 429, body: `{"code":"capacity_protection","ref":"shed:queue_full"}`}
		case 3:
			return dpReply{kind: "status", code: 503, body: `{"code":"awaiting_revision"}`}
		}
		return dpReply{kind: "ack"}
	})
	srv, h := dpHTTPConsumer(t, c, 5*time.Second)
	cfg := dpConfig("dp-transient", map[string]config.Destination{dpMeteringDest: dpHTTPDest(srv.URL)})
	r := dpStart(t, db, cfg, map[string]transport.Transport{dpMeteringDest: h})

	ev := db.appendMetering(t)
	dpEventually(t, "acknowledged", func() bool { return db.status(t, dpMeteringDest, ev) == "acknowledged" })

	got := db.attempts(t, dpMeteringDest, ev)
	want := []dpAttempt{
		{1, "dp-transient", "retryable", "consumer_unavailable"},
		{2, "dp-transient", "retryable", "capacity_protection"},
		{3, "dp-transient", "retryable", "awaiting_revision"},
		{4, "dp-transient", "acknowledged", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("attempt history %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("attempt %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1::uuid`, ev); n != 1 {
		t.Fatal("fully acknowledged event not published")
	}
	if c.callsFor(ev) != 4 || c.badSig != 0 {
		t.Fatalf("consumer calls %d, bad signatures %d", c.callsFor(ev), c.badSig)
	}
	if v := testutil.ToFloat64(r.m.Retries.WithLabelValues(dpMeteringDest, dpMeteringType, "1", "capacity_protection", "pending")); v != 1 {
		t.Fatalf("retries{capacity_protection} = %v", v)
	}
	if v := testutil.ToFloat64(r.m.Acks.WithLabelValues(dpMeteringDest, dpMeteringType, "1", "complete")); v != 1 {
		t.Fatalf("acks{complete} = %v", v)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// R-DP-1, R-AK-2, R-AK-7: a consumer whose 2xx answers are malformed (bare 2xx, missing receipt,
// an ack the kernel rejects) is retried as invalid_ack and never acknowledged; at max attempts
// the kernel quarantines it as retry_exhausted (never a silent success).
func TestDispatcherMalformedAckRetriedNeverAcknowledged(t *testing.T) {
	t.Parallel()
	db := dpSetup(t)
	dpFastRetry(t, db.admin, dpMeteringDest, 4)
	c := newDPConsumer(func(call int, d wire.Delivery) dpReply {
		switch call {
		case 1:
			return dpReply{kind: "status", code: 204}
		case 2:
			return dpReply{kind: "status", code: 200, body: `{"ack":{"destination":"x"}}`}
		case 3:
			return dpReply{kind: "status", code: 200, body: `OK`}
		}
		// Well-formed, but the receipt digest does not match its content: ack_delivery (OB002).
		ack, receipt, _ := dpAnswer(d)
		var rm map[string]any
		_ = json.Unmarshal(receipt, &rm)
		rm["eventEnvelopeSha256"] = strings.Repeat("0", 64)
		receipt, _ = json.Marshal(rm)
		b, _ := json.Marshal(wire.HTTPSuccessBody{Ack: ack, Receipt: receipt})
		return dpReply{kind: "status", code: 200, body: string(b)}
	})
	srv, h := dpHTTPConsumer(t, c, 5*time.Second)
	cfg := dpConfig("dp-malformed", map[string]config.Destination{dpMeteringDest: dpHTTPDest(srv.URL)})
	r := dpStart(t, db, cfg, map[string]transport.Transport{dpMeteringDest: h})

	ev := db.appendMetering(t)
	dpEventually(t, "terminal", func() bool { return db.status(t, dpMeteringDest, ev) == "quarantined" })
	got := db.attempts(t, dpMeteringDest, ev)
	if len(got) != 4 {
		t.Fatalf("attempts %+v", got)
	}
	for _, a := range got {
		if a.Outcome != "retryable" || a.Code != "invalid_ack" {
			t.Fatalf("attempt %+v: want retryable invalid_ack", a)
		}
	}
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid
		AND (delivered_at IS NOT NULL OR ack_receipt_digest IS NOT NULL)`, ev); n != 0 {
		t.Fatal("a rejected ack left acknowledgement fields")
	}
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'retry_exhausted'`, ev); n != 1 {
		t.Fatal("no retry_exhausted quarantine")
	}
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_events e WHERE e.event_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`, ev); n != 1 {
		t.Fatal("event published without acknowledgement")
	}
	// R-DP-4 (issue 12 defect 6): the consumer answered every time, so nothing is a transport
	// error; the one 200 the kernel refused (OB002) is an ack rejection, and the duration
	// histogram files it under the kernel's verdict, never under "acknowledged".
	for _, code := range []string{"transport_error", "consumer_timeout"} {
		if v := testutil.ToFloat64(r.m.TransportErrors.WithLabelValues(dpMeteringDest, code)); v != 0 {
			t.Fatalf("transport_errors{%s} = %v, want 0", code, v)
		}
	}
	if v := testutil.ToFloat64(r.m.AckRejections.WithLabelValues(dpMeteringDest, "OB002")); v != 1 {
		t.Fatalf("ack_rejections{OB002} = %v, want 1", v)
	}
	for outcome, want := range map[string]uint64{"acknowledged": 0, "ack_rejected": 1, "retryable": 3} {
		if n := histCount(t, r.m.DeliveryLatency, dpMeteringDest, dpMeteringType, "1", outcome); n != want {
			t.Fatalf("delivery_duration_seconds{outcome=%s} count = %d, want %d", outcome, n, want)
		}
	}
	if v := testutil.ToFloat64(r.m.Acks.WithLabelValues(dpMeteringDest, dpMeteringType, "1", "complete")); v != 0 {
		t.Fatal("ack counted")
	}
}

// R-DP-1, R-AK-6, R-AK-7: a permanent rejection (409/422 with a non-retryable code) is
// quarantined at once with that normalized code and the event digest.
func TestDispatcherPermanentRejectionQuarantined(t *testing.T) {
	t.Parallel()
	db := dpSetup(t)
	var first atomic.Value
	c := newDPConsumer(func(call int, d wire.Delivery) dpReply {
		if first.CompareAndSwap(nil, d.EventID) {
			return dpReply{kind: "status", code: 409, body: `{"code":"unknown_event_type","ref":"type:unsupported"}`}
		}
		return dpReply{kind: "status", code: 422, body: `{"code":"consumer_rejected"}`}
	})
	srv, h := dpHTTPConsumer(t, c, 5*time.Second)
	cfg := dpConfig("dp-reject", map[string]config.Destination{dpMeteringDest: dpHTTPDest(srv.URL)})
	cfg.Concurrency = 1
	r := dpStart(t, db, cfg, map[string]transport.Transport{dpMeteringDest: h})

	e1 := db.appendMetering(t)
	dpEventually(t, "first quarantined", func() bool { return db.status(t, dpMeteringDest, e1) == "quarantined" })
	e2 := db.appendMetering(t)
	dpEventually(t, "second quarantined", func() bool { return db.status(t, dpMeteringDest, e2) == "quarantined" })
	for ev, code := range map[string]string{e1: "unknown_event_type", e2: "consumer_rejected"} {
		got := db.attempts(t, dpMeteringDest, ev)
		if len(got) != 1 || got[0].Outcome != "non_retryable" || got[0].Code != code {
			t.Fatalf("%s: attempts %+v, want one non_retryable %s", code, got, code)
		}
		if n := db.count(t, `SELECT count(*) FROM outbox.outbox_quarantine q JOIN outbox.outbox_events e USING (event_id)
			WHERE q.event_id = $1::uuid AND q.reason = $2 AND q.event_envelope_sha256 = e.event_envelope_sha256`, ev, code); n != 1 {
			t.Fatalf("%s: quarantine row missing or without the event digest", code)
		}
		if c.callsFor(ev) != 1 {
			t.Fatalf("quarantined delivery called %d times", c.callsFor(ev))
		}
	}
	// Issue 12 defect 2 (R-AK-6, R-AK-7): the consumer's ref of a 409/422 answer is kept,
	// sanitized, on the finish and the delivery.
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes f
		JOIN outbox.outbox_deliveries d ON d.current_attempt_id = f.attempt_id
		WHERE d.event_id = $1::uuid AND f.sanitized_error_ref = 'type:unsupported' AND d.last_error_ref = 'type:unsupported'`, e1); n != 1 {
		t.Fatal("the rejection's ref was not kept on the quarantine finish")
	}
	if v := testutil.ToFloat64(r.m.Quarantines.WithLabelValues(dpMeteringDest, dpMeteringType, "1", "unknown_event_type")); v != 1 {
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
			db := dpSetup(t)
			ev := db.appendMetering(t)
			// Corrupt the stored event behind the immutability triggers (superuser, test only).
			ctx := context.Background()
			if _, err := db.admin.Exec(ctx, `SET session_replication_role = replica`); err != nil {
				t.Fatal(err)
			}
			if tag, err := db.admin.Exec(ctx, tamper, ev); err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("tamper: %v %v", tag, err)
			}
			if _, err := db.admin.Exec(ctx, `RESET session_replication_role`); err != nil {
				t.Fatal(err)
			}
			c := newDPConsumer(func(int, wire.Delivery) dpReply { return dpReply{kind: "ack"} })
			cfg := dpConfig("dp-digest", dpOneDest(dpMeteringDest))
			dpStart(t, db, cfg, map[string]transport.Transport{dpMeteringDest: transport.NewInProcess(map[string]wire.Consumer{dpMeteringDest: c})})
			dpEventually(t, "quarantined", func() bool { return db.status(t, dpMeteringDest, ev) == "quarantined" })
			got := db.attempts(t, dpMeteringDest, ev)
			if len(got) != 1 || got[0].Outcome != "non_retryable" || got[0].Code != "digest_conflict" {
				t.Fatalf("attempts %+v", got)
			}
			if c.callsFor(ev) != 0 {
				t.Fatal("a digest mismatch was delivered")
			}
		})
	}
}

// R-DP-1, R-CL-4: a consumer slower than the lease keeps its lease through renewals: the
// delivery outlives its original expiry, stays with one attempt, and is acknowledged.
func TestDispatcherRenewalKeepsSlowDeliveryLeased(t *testing.T) {
	t.Parallel()
	db := dpSetup(t)
	release := make(chan struct{})
	c := newDPConsumer(func(int, wire.Delivery) dpReply { return dpReply{kind: "ack", wait: release} })
	c.started = make(chan wire.Delivery, 4)
	cfg := dpConfig("dp-renew", dpOneDest(dpMeteringDest))
	cfg.Lease = 2 * time.Second
	cfg.RenewFraction = 0.25
	r := dpStart(t, db, cfg, map[string]transport.Transport{dpMeteringDest: transport.NewInProcess(map[string]wire.Consumer{dpMeteringDest: c})})

	ev := db.appendMetering(t)
	<-c.started
	var firstExpiry time.Time
	var firstAttempt string
	if err := db.admin.QueryRow(context.Background(), `SELECT s.started_at + interval '2 seconds', s.attempt_id::text
		FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = $1::uuid`, ev).Scan(&firstExpiry, &firstAttempt); err != nil {
		t.Fatal(err)
	}
	// Wait (on database state) until the first attempt outlived its original lease by a second and
	// still holds a live, extended lease.
	dpEventually(t, "lease outlived and renewed", func() bool {
		return db.count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid AND status = 'leased'
			AND current_attempt_id = $3::uuid AND now() > $2::timestamptz + interval '1 second' AND lease_expires_at > now()`,
			ev, firstExpiry, firstAttempt) == 1
	})
	close(release)
	dpEventually(t, "acknowledged", func() bool { return db.status(t, dpMeteringDest, ev) == "acknowledged" })
	got := db.attempts(t, dpMeteringDest, ev)
	if len(got) != 1 || got[0].Outcome != "acknowledged" {
		t.Fatalf("attempts %+v: the lease lapsed", got)
	}
	if v := testutil.ToFloat64(r.m.FencingRejections.WithLabelValues(dpMeteringDest, "renew")); v != 0 {
		t.Fatal("renewal fenced")
	}
}

// R-CL-3, R-AK-8, T-2: with renewal disabled a slow delivery's lease expires; another dispatcher
// recovers and redelivers it; the first dispatcher's late ack is fenced off (counted) and changes
// nothing.
func TestDispatcherLeaseExpiryRedeliveryLateAckFenced(t *testing.T) {
	t.Parallel()
	db := dpSetup(t)
	release := make(chan struct{})
	c := newDPConsumer(func(call int, d wire.Delivery) dpReply {
		if call == 1 {
			return dpReply{kind: "ack", wait: release} // attempt 1 (dispatcher A): slow, then a valid ack
		}
		return dpReply{kind: "ack"}
	})
	c.started = make(chan wire.Delivery, 4)
	srv, h := dpHTTPConsumer(t, c, 30*time.Second)

	cfgA := dpConfig("dp-a", map[string]config.Destination{dpMeteringDest: dpHTTPDest(srv.URL)})
	cfgA.Lease = time.Second
	cfgA.StatementTimeout = 500 * time.Millisecond
	cfgA.LeaseRenewal = false
	cfgA.Concurrency = 1
	a := dpStart(t, db, cfgA, map[string]transport.Transport{dpMeteringDest: h})

	ev := db.appendMetering(t)
	d1 := <-c.started
	if d1.AttemptNumber != 1 {
		t.Fatalf("first call is attempt %d", d1.AttemptNumber)
	}
	cfgB := dpConfig("dp-b", map[string]config.Destination{dpMeteringDest: dpHTTPDest(srv.URL)})
	b := dpStart(t, db, cfgB, map[string]transport.Transport{dpMeteringDest: h})
	dpEventually(t, "redelivered and acknowledged", func() bool { return db.status(t, dpMeteringDest, ev) == "acknowledged" })
	d2 := <-c.started
	if d2.AttemptNumber != 2 || d2.AttemptID == d1.AttemptID {
		t.Fatalf("redelivery attempt %d", d2.AttemptNumber)
	}
	var ackedAttempt string
	if err := db.admin.QueryRow(context.Background(), `SELECT current_attempt_id::text FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, ev).Scan(&ackedAttempt); err != nil {
		t.Fatal(err)
	}

	close(release) // A's consumer call returns now, long after its lease expired
	dpEventually(t, "A's late ack fenced", func() bool {
		return testutil.ToFloat64(a.m.FencingRejections.WithLabelValues(dpMeteringDest, "ack")) == 1
	})
	got := db.attempts(t, dpMeteringDest, ev)
	if len(got) != 2 || got[0].Worker != "dp-a" || got[0].Outcome != "lease_expired_unknown" ||
		got[1].Worker != "dp-b" || got[1].Outcome != "acknowledged" {
		t.Fatalf("attempts %+v", got)
	}
	var still string
	_ = db.admin.QueryRow(context.Background(), `SELECT current_attempt_id::text FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, ev).Scan(&still)
	if still != ackedAttempt || db.status(t, dpMeteringDest, ev) != "acknowledged" {
		t.Fatal("the late ack changed the delivery")
	}
	if testutil.ToFloat64(a.m.Acks.WithLabelValues(dpMeteringDest, dpMeteringType, "1", "complete")) != 0 ||
		testutil.ToFloat64(b.m.Acks.WithLabelValues(dpMeteringDest, dpMeteringType, "1", "complete")) != 1 {
		t.Fatal("ack counters wrong")
	}
}

// D-7, R-DP-1: two dispatchers on one database share the work safely (SKIP LOCKED + fencing):
// every delivery ends acknowledged with exactly one attempt and one finish, no event is applied
// twice, and the claims of both add up to the deliveries.
func TestTwoDispatchersOnOneDatabase(t *testing.T) {
	t.Parallel()
	db := dpSetup(t)
	dests := []string{"metering_input_processor", "billing_finalization_coordinator", "billing_settlement_catch_up", "core_operations"}
	types := map[string]string{
		"metering_input_processor": dpMeteringType, "billing_finalization_coordinator": "execution.run-finalization.closed@1",
		"billing_settlement_catch_up": "metering.settlement-input.current-changed@1", "core_operations": "run.created@2.0",
	}
	c := newDPConsumer(func(int, wire.Delivery) dpReply { return dpReply{kind: "ack"} })
	mk := func(worker string) *dpRunning {
		ds := map[string]config.Destination{}
		for _, d := range dests {
			ds[d] = config.Destination{Transport: config.TransportInProcess, Auth: config.AuthNone}
		}
		cfg := dpConfig(worker, ds)
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
		return dpStart(t, db, cfg, trs)
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
			ids = append(ids, testfix.Append(t, db.admin, testfix.Envelope(types[d], sv, "agg-"+testfix.NewUUID()[:8], 1)))
		}
	}
	total := perDest * len(dests)
	dpEventually(t, "all acknowledged", func() bool {
		return db.count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'acknowledged'`) == total
	})
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts`); n != total {
		t.Fatalf("%d attempt starts for %d deliveries", n, total)
	}
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome = 'acknowledged'`); n != total {
		t.Fatalf("%d acknowledged finishes for %d deliveries", n, total)
	}
	if n := db.count(t, `SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`); n != 0 {
		t.Fatalf("%d events unpublished", n)
	}
	for _, id := range ids {
		if c.appliedFor(id) != 1 {
			t.Fatalf("event applied %d times", c.appliedFor(id))
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
	if got := sum(a.m) + sum(b.m); got != float64(total) {
		t.Fatalf("claims %v, want %d", got, total)
	}
}

// R-DP-1: the loop survives losing every database connection (as in a PostgreSQL restart): the
// pool reconnects, LISTEN is re-established, later events are delivered.
func TestDispatcherSurvivesConnectionLoss(t *testing.T) {
	t.Parallel()
	db := dpSetup(t)
	c := newDPConsumer(func(int, wire.Delivery) dpReply { return dpReply{kind: "ack"} })
	cfg := dpConfig("dp-reconnect", dpOneDest(dpMeteringDest))
	cfg.PollInterval = 10 * time.Minute // only NOTIFY (or the post-reconnect catch-up) wakes the loop
	dpStart(t, db, cfg, map[string]transport.Transport{dpMeteringDest: transport.NewInProcess(map[string]wire.Consumer{dpMeteringDest: c})})
	e1 := db.appendMetering(t)
	dpEventually(t, "first acknowledged", func() bool { return db.status(t, dpMeteringDest, e1) == "acknowledged" })

	if n := db.count(t, `SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); n == 0 {
		t.Fatal("no dispatcher sessions to terminate")
	}
	e2 := db.appendMetering(t)
	dpEventually(t, "delivered after reconnect", func() bool { return db.status(t, dpMeteringDest, e2) == "acknowledged" })
}

// R-DP-6: no active delivery set, or a configured destination the database does not know, or a
// JetStream transport on a non-broker destination: the dispatcher refuses to start.
func TestDispatcherPreflightRefusesUnsafeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mk := func(dsn string, cfg *config.Config) error {
		pc, _ := dispatcher.PoolConfig(cfg, dsn)
		pool := dpPool(t, pc)
		trs := map[string]transport.Transport{}
		for n := range cfg.Destinations {
			trs[n] = transport.Func(func(context.Context, wire.Delivery) (wire.Result, error) { return wire.Result{}, nil })
		}
		d, err := dispatcher.New(dispatcher.Options{Config: cfg, Pool: pool, Transports: trs})
		if err != nil {
			t.Fatal(err)
		}
		return d.Preflight(ctx)
	}
	// A fresh database: nothing registered, nothing active.
	bare := &dpDB{dsn: testdbURL(t)}
	err := mk(bare.dsn, dpConfig("dp-pre", dpOneDest(dpMeteringDest)))
	if !errors.Is(err, dispatcher.ErrNoActiveDeliverySet) {
		t.Fatalf("no active set: %v", err)
	}
	db := dpSetup(t)
	err = mk(db.dsn, dpConfig("dp-pre", dpOneDest("not_a_destination")))
	if err == nil || !strings.Contains(err.Error(), "destination not_a_destination is not registered") {
		t.Fatalf("unknown destination: %v", err)
	}
	js := map[string]config.Destination{dpMeteringDest: {Transport: config.TransportJetStream, NATSURL: "nats://127.0.0.1:1", Subject: "a.b", Timeout: time.Second, Auth: config.AuthNone}}
	err = mk(db.dsn, dpConfig("dp-pre", js))
	if err == nil || !strings.Contains(err.Error(), "uses transport jetstream but its receipt kind is metering_input_processor") {
		t.Fatalf("jetstream on a consumer destination: %v", err)
	}
	if err := mk(db.dsn, dpConfig("dp-pre", dpOneDest(dpMeteringDest))); err != nil {
		t.Fatalf("valid preflight refused: %v", err)
	}
	// database_role: every pooled session runs as outbox_dispatcher with the statement timeout,
	// so these tests exercise the dispatcher's real grants.
	cfg := dpConfig("dp-pre", dpOneDest(dpMeteringDest))
	pc, _ := dispatcher.PoolConfig(cfg, db.dsn)
	var who, st string
	if err := dpPool(t, pc).QueryRow(ctx, `SELECT current_user, current_setting('statement_timeout')`).Scan(&who, &st); err != nil {
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
