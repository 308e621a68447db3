package intake

// The observation projector path (SPEC R-OB-4, T-9): work rows fanned out on accept and
// backfilled on registration, fenced claims in (acceptedAt, observationId) order, acks that need
// the lease token, the accepted digest and the consumer's receipt for every registered
// projection, the receipt's insert-or-compare, the observations' own completeness proof and the
// positive-match-only search. Real roles throughout: the projector claims as
// outbox_observation_projector, records receipts as its bound consumer login.

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const (
	opConsumer   = "obs-projector"
	opProjection = "observations"
)

type opBundle struct {
	intakefix.Bundle
	proj *pgx.Conn // outbox_observation_projector
	cons *pgx.Conn // the login bound to opConsumer (member of outbox_consumer)
}

func opSetup(t *testing.T) opBundle {
	t.Helper()
	b := opBundle{Bundle: intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 100000, MaxBodyBytes: 16384})}
	ctx := context.Background()
	role, url := kernelfix.Login(t, b.Admin, b.Dsn, "outbox_consumer")
	testfix.Must(t, pgcall.BindConsumerRole(ctx, b.Reg, opConsumer, role))
	b.proj = testdb.Conn(t, b.Dsn, "outbox_observation_projector")
	cons, err := pgx.Connect(ctx, url)
	testfix.Must(t, err)
	t.Cleanup(func() { cons.Close(context.Background()) })
	b.cons = cons
	return b
}

func opClaim(t *testing.T, conn pgcall.DBTX, n int) []pgcall.ClaimedObservation {
	t.Helper()
	cs, err := pgcall.ClaimObservations(context.Background(), conn, "worker-1", opConsumer, n, time.Minute)
	testfix.Must(t, err)
	return cs
}

func opAck(c pgcall.ClaimedObservation) pgcall.ObservationAck {
	return pgcall.ObservationAck{ConsumerName: opConsumer, ObservationID: c.ObservationID, LeaseToken: c.LeaseToken,
		AcceptedEnvelopeSHA256: c.AcceptedEnvelopeSHA256}
}

func opAckOne(t *testing.T, conn pgcall.DBTX, a pgcall.ObservationAck) pgcall.ObservationAckOutcome {
	t.Helper()
	out, err := pgcall.AckObservations(context.Background(), conn, []pgcall.ObservationAck{a})
	testfix.Must(t, err)
	if len(out) != 1 {
		t.Fatalf("%d ack outcomes for 1 item", len(out))
	}
	return out[0]
}

// R-OB-4: registration backfills, accepts fan out, the claim hands out every observation once in
// (acceptedAt, observationId) order, and the ack fence holds (token, digest, receipt per
// registered projection, replay).
func TestObservationProjectorClaimAckFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	before := intakefix.AcceptN(t, b.EdgeA, 5) // accepted before the projector exists: backfilled
	if _, err := pgcall.ClaimObservations(ctx, b.proj, "worker-1", opConsumer, 10, time.Minute); pgcall.SQLState(err) != "OB802" {
		t.Fatalf("claim for an unregistered projector: %v, want OB802", err)
	}
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	after := intakefix.AcceptN(t, b.EdgeB, 4)
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_deliveries WHERE consumer_name = $1 AND status = 'pending'`, opConsumer); n != 9 {
		t.Fatalf("%d pending work rows, want 9 (5 backfilled + 4 fanned out)", n)
	}

	cs := opClaim(t, b.proj, 100)
	if len(cs) != 9 {
		t.Fatalf("claimed %d, want 9", len(cs))
	}
	got := map[string]bool{}
	for i, c := range cs {
		got[c.ObservationID] = true
		if i > 0 && (c.AcceptedAt.Before(cs[i-1].AcceptedAt) || (c.AcceptedAt.Equal(cs[i-1].AcceptedAt) && c.ObservationID < cs[i-1].ObservationID)) {
			t.Fatalf("claim order broken at %d", i)
		}
		var canon string
		testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT outbox.jcs_canonicalize($1::json)`, string(c.Envelope)).Scan(&canon))
		if intakefix.SHA256Hex(canon) != c.AcceptedEnvelopeSHA256 {
			t.Fatalf("claimed envelope does not hash to its acceptedEnvelopeSha256: %s", c.Envelope)
		}
	}
	for _, id := range append(before, after...) {
		if !got[id] {
			t.Fatalf("observation %s not claimed", id)
		}
	}
	if again := opClaim(t, b.proj, 100); len(again) != 0 {
		t.Fatalf("a live lease was handed out again: %d rows", len(again))
	}

	c := cs[0]
	if o := opAckOne(t, b.proj, opAck(c)); o.Outcome != "rejected" || o.SQLState != "OB002" || o.Detail != "receipt_missing" {
		t.Fatalf("ack without receipt: %+v", o)
	}
	outcome, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, c.ObservationID, c.AcceptedEnvelopeSHA256)
	testfix.Must(t, err)
	if outcome != "new" {
		t.Fatalf("first receipt: %s", outcome)
	}
	if outcome, err = pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, c.ObservationID, c.AcceptedEnvelopeSHA256); err != nil || outcome != "existing" {
		t.Fatalf("second receipt: %s %v", outcome, err)
	}
	stale := opAck(c)
	stale.LeaseToken = testfix.NewUUID()
	if o := opAckOne(t, b.proj, stale); o.SQLState != "OB001" || o.Detail != "stale_token" {
		t.Fatalf("stale token: %+v", o)
	}
	wrong := opAck(c)
	wrong.AcceptedEnvelopeSHA256 = intakefix.SHA256Hex("other")
	if o := opAckOne(t, b.proj, wrong); o.SQLState != "OB002" || o.Detail != "digest_mismatch" {
		t.Fatalf("wrong digest: %+v", o)
	}
	if o := opAckOne(t, b.proj, opAck(c)); o.Outcome != "acknowledged" || o.SQLState != "" {
		t.Fatalf("ack: %+v", o)
	}
	if o := opAckOne(t, b.proj, opAck(c)); o.Outcome != "rejected" || o.SQLState != "OB001" || o.Detail != "finished" {
		t.Fatalf("ack replay: %+v, want OB001 finished (R-OB-4: a finished lease's token)", o)
	}

	// A second projection of the same consumer: the ack needs its receipt too.
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, "observations-bis", 1))
	d := cs[1]
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, d.ObservationID, d.AcceptedEnvelopeSHA256); err != nil {
		t.Fatal(err)
	}
	if o := opAckOne(t, b.proj, opAck(d)); o.SQLState != "OB002" || o.Detail != "receipt_missing" {
		t.Fatalf("ack with one of two projections' receipts: %+v", o)
	}
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, "observations-bis", 1, d.ObservationID, d.AcceptedEnvelopeSHA256); err != nil {
		t.Fatal(err)
	}

	// One batch: acknowledged, malformed, unknown, the rest without receipts; input order kept.
	items := []pgcall.ObservationAck{opAck(d), {ConsumerName: opConsumer, ObservationID: "nope"},
		{ConsumerName: opConsumer, ObservationID: testfix.NewUUID(), LeaseToken: testfix.NewUUID(), AcceptedEnvelopeSHA256: intakefix.SHA256Hex("x")}}
	for _, e := range cs[2:] {
		items = append(items, opAck(e))
	}
	out, err := pgcall.AckObservations(ctx, b.proj, items)
	testfix.Must(t, err)
	want := []string{"acknowledged/", "rejected/22023", "rejected/OB001"}
	for range cs[2:] {
		want = append(want, "rejected/OB002")
	}
	for i, o := range out {
		if o.Outcome+"/"+o.SQLState != want[i] {
			t.Fatalf("batch item %d: %+v, want %s", i, o, want[i])
		}
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_deliveries WHERE consumer_name = $1 AND status = 'acknowledged'`, opConsumer); n != 2 {
		t.Fatalf("%d acknowledged work rows, want 2", n)
	}
	// An expired lease is handed out again, with a new token; the old token no longer acks.
	intakefix.Fixture(t, b.Admin, `UPDATE intake.observation_deliveries SET lease_expires_at = now() - interval '1 second'
		WHERE consumer_name = $1 AND observation_id = $2::uuid`, opConsumer, cs[2].ObservationID)
	re := opClaim(t, b.proj, 100)
	if len(re) != 1 || re[0].ObservationID != cs[2].ObservationID || re[0].LeaseToken == cs[2].LeaseToken {
		t.Fatalf("expired lease not re-claimed with a new token: %+v", re)
	}
	if o := opAckOne(t, b.proj, opAck(cs[2])); o.SQLState != "OB001" {
		t.Fatalf("old token after re-claim: %+v", o)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT attempts FROM intake.observation_deliveries WHERE consumer_name = $1 AND observation_id = $2::uuid`, opConsumer, cs[2].ObservationID); n != 2 {
		t.Fatalf("attempts %d, want 2", n)
	}
}

// R-OB-4, R-SEC-5: the receipt is recorded only as the bound consumer, for a registered
// projector, with the accepted digest; another digest for the same key is OB301.
func TestObservationReceiptRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	id := intakefix.AcceptN(t, b.EdgeA, 1)[0]
	var sha string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT accepted_envelope_sha256 FROM intake.observation_ids WHERE observation_id = $1::uuid`, id).Scan(&sha))

	other, otherURL := kernelfix.Login(t, b.Admin, b.Dsn, "outbox_consumer")
	_ = other
	oc, err := pgx.Connect(ctx, otherURL)
	testfix.Must(t, err)
	defer oc.Close(ctx)
	if _, err := pgcall.RecordObservationReceipt(ctx, oc, opConsumer, opProjection, 1, id, sha); pgcall.SQLState(err) != "42501" {
		t.Fatalf("unbound role: %v, want 42501", err)
	}
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 2, id, sha); pgcall.SQLState(err) != "OB802" {
		t.Fatalf("unregistered version: %v, want OB802", err)
	}
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, id, intakefix.SHA256Hex("not it")); pgcall.SQLState(err) != "OB002" {
		t.Fatalf("digest not accepted: %v, want OB002", err)
	}
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, testfix.NewUUID(), sha); pgcall.SQLState(err) != "OB002" {
		t.Fatalf("unknown observation: %v, want OB002", err)
	}
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, id, "XYZ"); pgcall.SQLState(err) != "22023" {
		t.Fatalf("malformed digest: %v, want 22023", err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM inbox.observation_receipts`); n != 0 {
		t.Fatalf("refused receipts wrote %d rows", n)
	}
	if o, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, id, sha); err != nil || o != "new" {
		t.Fatalf("receipt: %s %v", o, err)
	}
	if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, id, intakefix.SHA256Hex("other")); pgcall.SQLState(err) != "OB301" {
		t.Fatalf("another digest for a recorded key: %v, want OB301", err)
	}
	if _, err := b.Admin.Exec(ctx, `UPDATE inbox.observation_receipts SET recorded_at = now()`); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("receipt update: %v, want OB202", err)
	}
	if _, err := b.Admin.Exec(ctx, `DELETE FROM intake.observation_deliveries`); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("work row delete: %v, want OB202", err)
	}
}

// R-OB-4: concurrent claimers never get the same observation (SKIP LOCKED), and a projector
// registered while workloads are accepting misses none of them (the backfill waits for the
// accepts in flight).
func TestObservationProjectorConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	// accepts running while the projector registers
	const writers, per = 4, 10
	conns := make([]*pgx.Conn, writers)
	for i := range conns {
		if i%2 == 0 {
			conns[i] = testdb.Conn(t, b.Dsn, intakefix.RoleA)
		} else {
			conns[i] = testdb.Conn(t, b.Dsn, intakefix.RoleB)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(c *pgx.Conn) {
			defer wg.Done()
			<-start
			for j := 0; j < per; j++ {
				docs := []byte("[")
				for k := 0; k < 5; k++ {
					if k > 0 {
						docs = append(docs, ',')
					}
					d, _ := json.Marshal(intakefix.Sub(testfix.NewUUID()))
					docs = append(docs, d...)
				}
				docs = append(docs, ']')
				if _, err := pgcall.AcceptObservations(ctx, c, docs); err != nil {
					errs <- err
					return
				}
			}
		}(conns[i])
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		if err := pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1); err != nil {
			errs <- err
		}
	}()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observations o WHERE NOT EXISTS
		(SELECT 1 FROM intake.observation_deliveries d WHERE d.consumer_name = $1 AND d.observation_id = o.observation_id)`, opConsumer); n != 0 {
		t.Fatalf("%d accepted observations have no work row of the projector registered meanwhile", n)
	}
	total := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observations`)
	if total != writers*per*5 {
		t.Fatalf("%d observations accepted, want %d", total, writers*per*5)
	}

	// two claimers at once: disjoint, together everything
	p1 := testdb.Conn(t, b.Dsn, "outbox_observation_projector")
	p2 := testdb.Conn(t, b.Dsn, "outbox_observation_projector")
	var mu sync.Mutex
	seen := map[string]int{}
	go2 := make(chan struct{})
	var cw sync.WaitGroup
	for _, c := range []*pgx.Conn{p1, p2} {
		cw.Add(1)
		go func(c *pgx.Conn) {
			defer cw.Done()
			<-go2
			for {
				cs, err := pgcall.ClaimObservations(ctx, c, "w", opConsumer, 7, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, x := range cs {
					seen[x.ObservationID]++
				}
				mu.Unlock()
			}
		}(c)
	}
	close(go2)
	cw.Wait()
	if len(seen) != total {
		t.Fatalf("claimed %d distinct observations, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("observation %s claimed %d times", id, n)
		}
	}
}

// R-OB-4, R-OP-2, R-OP-3: the observations' own proof (own member set digest, receipt anti-join),
// which observation traffic never makes an event proof stale, and search by observationId that
// answers matched or inconclusive, never not_found.
func TestObservationCompletenessAndSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	ids := intakefix.AcceptN(t, b.EdgeA, 3)
	scope := json.RawMessage(`{"sourceKind":"observation"}`)
	snap := func() pgcall.CompletenessSnapshot {
		t.Helper()
		var s pgcall.CompletenessSnapshot
		testfix.Must(t, pgx.BeginTxFunc(ctx, b.Auditor, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			var err error
			s, err = pgcall.TakeCompletenessSnapshot(ctx, tx, scope)
			return err
		}))
		return s
	}
	eventProof := func() pgcall.CompletenessSnapshot {
		t.Helper()
		var s pgcall.CompletenessSnapshot
		testfix.Must(t, pgx.BeginTxFunc(ctx, b.Auditor, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			var err error
			s, err = pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{}`))
			return err
		}))
		return s
	}
	ev := eventProof()
	s1 := snap()
	if s1.Status != "partial_source_gap" {
		t.Fatalf("observation proof with 3 unprojected: %s", s1.Status)
	}
	var doc string
	testfix.Must(t, b.Auditor.QueryRow(ctx, `SELECT outbox.read_manifest($1::uuid)::text`, s1.ManifestID).Scan(&doc))
	var m struct {
		MemberCount int `json:"memberCount"`
		Guards      map[string]struct {
			Count int `json:"count"`
		} `json:"guards"`
		Members []struct {
			ObservationID string `json:"observationId"`
		} `json:"members"`
	}
	testfix.Must(t, json.Unmarshal([]byte(doc), &m))
	if m.MemberCount != 3 || m.Guards["receiptAntiJoin"].Count != 3 || m.Guards["nonTerminalObservationDeliveries"].Count != 3 {
		t.Fatalf("manifest: members %d, guards %+v", m.MemberCount, m.Guards)
	}
	var canon string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT outbox.jcs_canonicalize($1::json)`, doc).Scan(&canon))
	if canon != doc {
		t.Fatalf("observation manifest is not canonical text")
	}
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	for i, mm := range m.Members {
		if mm.ObservationID != sorted[i] {
			t.Fatalf("member %d = %s, want %s", i, mm.ObservationID, sorted[i])
		}
	}

	// project them all
	for _, c := range opClaim(t, b.proj, 10) {
		if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, c.ObservationID, c.AcceptedEnvelopeSHA256); err != nil {
			t.Fatal(err)
		}
		if o := opAckOne(t, b.proj, opAck(c)); o.Outcome != "acknowledged" {
			t.Fatalf("ack: %+v", o)
		}
	}
	if f, err := pgcall.CheckCompleteness(ctx, b.Auditor, s1.ManifestID); err != nil || f.Freshness != "stale" {
		t.Fatalf("first proof after projection: %+v %v", f, err)
	}
	s2 := snap()
	if s2.Status != "complete_for_supported_scope" {
		t.Fatalf("observation proof after projection: %s", s2.Status)
	}
	if f, err := pgcall.CheckCompleteness(ctx, b.Auditor, s2.ManifestID); err != nil || f.Freshness != "verified_current" {
		t.Fatalf("second proof: %+v %v", f, err)
	}
	intakefix.AcceptN(t, b.EdgeB, 1)
	if f, err := pgcall.CheckCompleteness(ctx, b.Auditor, s2.ManifestID); err != nil || f.Freshness != "stale" {
		t.Fatalf("observation proof after a new accept: %+v %v", f, err)
	}
	if f, err := pgcall.CheckCompleteness(ctx, b.Auditor, ev.ManifestID); err != nil || f.Freshness != "verified_current" {
		t.Fatalf("event proof after observation traffic: %+v %v (observations must not touch it)", f, err)
	}
	for _, bad := range []string{`{"sourceKind":"observation","eventTypes":["run.created"]}`, `{"sourceKind":"audit"}`, `{"sourceKind":1}`} {
		err := pgx.BeginTxFunc(ctx, b.Auditor, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			_, err := pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(bad))
			return err
		})
		if pgcall.SQLState(err) != "22023" {
			t.Fatalf("scope %s: %v, want 22023", bad, err)
		}
	}

	hits, err := pgcall.SearchExactID(ctx, b.Auditor, "observationId", ids[0])
	testfix.Must(t, err)
	if len(hits) != 1 || hits[0].Result != "matched" || hits[0].Reason == nil || *hits[0].Reason != "positive_match_only" || hits[0].EventID != nil {
		t.Fatalf("search of an accepted observation: %+v", hits)
	}
	hits, err = pgcall.SearchExactID(ctx, b.Auditor, "observationId", testfix.NewUUID())
	testfix.Must(t, err)
	if len(hits) != 1 || hits[0].Result != "inconclusive" || *hits[0].Reason != "positive_match_only" {
		t.Fatalf("search of an unknown observation (complete proof exists): %+v", hits)
	}
	if _, err := pgcall.SearchExactID(ctx, b.Auditor, "observationId", "not-a-uuid"); pgcall.SQLState(err) != "22023" {
		t.Fatalf("malformed observationId: %v", err)
	}
}
