package intake

// Hardening, third round (issue 38; SPEC R-SEC-3, R-SEC-5, R-OB-1, R-OB-4, R-OB-7): the intake
// tables hold against every role, the owner included. Each finding of the review is a test: the
// forged purge, a shared role registered as a workload, observation claims of another
// projector, observations without legal holds, and owner-level plain DML on what only the
// intake functions may change.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// ownerTx runs sql as outbox_owner in a transaction of its own and returns its SQLSTATE ("" when
// it succeeded; the transaction is rolled back either way).
func ownerTx(t *testing.T, dsn string, stmts ...string) string {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Conn(t, dsn, "outbox_owner")
	tx, err := conn.Begin(ctx)
	testfix.Must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return pgcall.SQLState(err)
		}
	}
	return ""
}

// The forged purge of the review: as the owner, a made-up marker, the session setting the old
// delete guard trusted, a delete of an accepted observation without a receipt, a matching run
// row. Every step is now OB202; the observation stays. verify_purge_run re-derives what it
// certifies: a run forged below the triggers (a superuser with triggers off) is not verified.
func TestForgedPurgeRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	id := intakefix.AcceptN(t, b.EdgeA, 1)[0]
	run := testfix.NewUUID()
	marker := `INSERT INTO intake.observation_purge_markers (observation_id, run_id, accepted_at, accepted_envelope_sha256, purged_at)
		SELECT i.observation_id, '` + run + `', i.accepted_at, i.accepted_envelope_sha256, now() FROM intake.observation_ids i WHERE i.observation_id = '` + id + `'`
	del := `DELETE FROM intake.observations WHERE observation_id = '` + id + `'`
	runRow := `INSERT INTO intake.purge_runs (run_id, run_by, started_at, finished_at, older_than, max_rows, cutoff, purged, skipped, purged_set_sha256)
		VALUES ('` + run + `', 'forger', now(), now(), '0', 1, now(), 1, 0, repeat('0', 64))`
	for what, stmts := range map[string][]string{
		"marker":             {marker},
		"setting and delete": {`SET LOCAL pgintake.purge_run = '` + run + `'`, del},
		"run row":            {runRow},
		"the whole forgery":  {marker, `SET LOCAL pgintake.purge_run = '` + run + `'`, del, runRow},
	} {
		if st := ownerTx(t, b.Dsn, stmts...); st != "OB202" {
			t.Fatalf("owner forging a purge (%s): %q, want OB202", what, st)
		}
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observations WHERE observation_id = $1::uuid`, id); n != 1 {
		t.Fatal("the forged purge removed the observation")
	}
	// below the triggers (a superuser's session_replication_role): verify re-derives and says no
	tx, err := b.Admin.Begin(ctx)
	testfix.Must(t, err)
	for _, s := range []string{`SET LOCAL session_replication_role = replica`, marker, del,
		`INSERT INTO intake.purge_runs (run_id, run_by, started_at, finished_at, older_than, max_rows, cutoff, purged, skipped, purged_set_sha256)
		 SELECT '` + run + `', 'forger', now(), clock_timestamp(), '0', 1, now() + interval '1 second', 1, 0,
		        encode(sha256(convert_to('[{"acceptedEnvelopeSha256":"' || m.accepted_envelope_sha256 || '","observationId":"' || m.observation_id || '"}]', 'UTF8')), 'hex')
		   FROM intake.observation_purge_markers m WHERE m.run_id = '` + run + `'`} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	testfix.Must(t, tx.Commit(ctx))
	v, err := pgcall.VerifyPurgeRun(ctx, b.Ret, run)
	testfix.Must(t, err)
	if v.Verified || !strings.Contains(v.Problem, "receipt") {
		t.Fatalf("forged run verified: %+v, want not verified (no receipt at purge time)", v)
	}
	// a real purge after the receipt is verified
	id2 := intakefix.AcceptN(t, b.EdgeA, 1)[0]
	cs := opClaim(t, b.proj, 10)
	for _, c := range cs {
		if c.ObservationID == id2 {
			_, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, c.ObservationID, c.AcceptedEnvelopeSHA256)
			testfix.Must(t, err)
		}
	}
	r, err := pgcall.PurgeObservationPayloads(ctx, b.Ret, 0, 100)
	testfix.Must(t, err)
	if r.Purged != 1 {
		t.Fatalf("real purge: %+v, want the one observation with its receipt", r)
	}
	v, err = pgcall.VerifyPurgeRun(ctx, b.Ret, r.RunID)
	testfix.Must(t, err)
	if !v.Verified {
		t.Fatalf("real purge not verified: %+v", v)
	}
}

// register_workload refuses a kernel role, a built-in role, a superuser and a role bound to a
// consumer, like bind_consumer_role; a role already registered as another workload is OB702.
func TestRegisterWorkloadRefusesSharedRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 100, MaxBodyBytes: 16384})
	bound, _ := kernelfix.Login(t, b.Admin, b.Dsn, "outbox_consumer")
	testfix.Must(t, pgcall.BindConsumerRole(ctx, b.Reg, "hardening-consumer", bound))
	var super string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT session_user`).Scan(&super))
	for _, role := range []string{"outbox_intake", "outbox_owner", "outbox_producer", "pg_monitor", "pg_read_all_data", super, bound} {
		err := pgcall.RegisterWorkload(ctx, b.Reg, pgcall.RegisterWorkloadParams{DBRole: role, WorkloadPrincipalID: "wp-" + testfix.NewUUID()[:8],
			Service: "svc", Environment: "test", MaxPerMinute: 10, MaxBodyBytes: 1024})
		if pgcall.SQLState(err) != "22023" {
			t.Fatalf("register_workload(%s): %v, want 22023", role, err)
		}
	}
	err := pgcall.RegisterWorkload(ctx, b.Reg, pgcall.RegisterWorkloadParams{DBRole: intakefix.RoleA, WorkloadPrincipalID: "wp-other",
		Service: "svc", Environment: "test", MaxPerMinute: 10, MaxBodyBytes: 1024})
	if pgcall.SQLState(err) != "OB702" {
		t.Fatalf("a role already registered as another workload: %v, want OB702", err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.workloads`); n != 2 {
		t.Fatalf("%d workloads, want the fixture's 2", n)
	}
}

// Observation claims and acks are bound to the caller's role (R-SEC-5): a projector login claims
// and acknowledges only for the consumer bound to it; another projector login is 42501 and
// changes nothing.
func TestObservationClaimsBoundToRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 1000, MaxBodyBytes: 16384})
	const mine = "obs-bound"
	role, url := kernelfix.Login(t, b.Admin, b.Dsn, "outbox_consumer", "outbox_observation_projector")
	_, otherURL := kernelfix.Login(t, b.Admin, b.Dsn, "outbox_observation_projector")
	testfix.Must(t, pgcall.BindConsumerRole(ctx, b.Reg, mine, role))
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, mine, "observations", 1))
	intakefix.AcceptN(t, b.EdgeA, 2)
	connect := func(u string) *pgx.Conn {
		c, err := pgx.Connect(ctx, u)
		testfix.Must(t, err)
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	me, other := connect(url), connect(otherURL)
	if _, err := pgcall.ClaimObservations(ctx, other, "w-other", mine, 10, time.Hour); pgcall.SQLState(err) != "42501" {
		t.Fatalf("another projector's claim: %v, want 42501", err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_deliveries WHERE consumer_name = $1 AND status = 'pending'`, mine); n != 2 {
		t.Fatalf("%d pending after the refused claim, want 2", n)
	}
	cs, err := pgcall.ClaimObservations(ctx, me, "w-me", mine, 10, time.Minute)
	testfix.Must(t, err)
	if len(cs) != 2 {
		t.Fatalf("the bound login claimed %d, want 2", len(cs))
	}
	_, err = pgcall.RecordObservationReceipt(ctx, me, mine, "observations", 1, cs[0].ObservationID, cs[0].AcceptedEnvelopeSHA256)
	testfix.Must(t, err)
	ack := pgcall.ObservationAck{ConsumerName: mine, ObservationID: cs[0].ObservationID, LeaseToken: cs[0].LeaseToken,
		AcceptedEnvelopeSHA256: cs[0].AcceptedEnvelopeSHA256}
	if _, err := pgcall.AckObservations(ctx, other, []pgcall.ObservationAck{ack}); pgcall.SQLState(err) != "42501" {
		t.Fatalf("another projector's ack: %v, want 42501", err)
	}
	out, err := pgcall.AckObservations(ctx, me, []pgcall.ObservationAck{ack})
	testfix.Must(t, err)
	if out[0].Outcome != "acknowledged" {
		t.Fatalf("the bound login's ack: %+v", out[0])
	}
	// an unbound consumer name is refused for everyone but the owner
	if _, err := pgcall.ClaimObservations(ctx, me, "w-me", "obs-unbound", 10, time.Minute); pgcall.SQLState(err) != "42501" {
		t.Fatalf("claim for an unbound consumer: %v, want 42501", err)
	}
}

// Legal holds cover observations (R-OB-7): set_legal_hold takes an accepted observation id, the
// purge skips the held observation (its receipts notwithstanding) until the hold is released, and
// the run that purges it afterwards is verified.
func TestObservationLegalHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	intakefix.AcceptN(t, b.EdgeA, 1)
	cs := opClaim(t, b.proj, 10)
	_, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, cs[0].ObservationID, cs[0].AcceptedEnvelopeSHA256)
	testfix.Must(t, err)
	id := cs[0].ObservationID
	testfix.Must(t, pgcall.SetLegalHold(ctx, b.Ret, id, "litigation 42"))
	if err := pgcall.SetLegalHold(ctx, b.Ret, testfix.NewUUID(), "unknown"); pgcall.SQLState(err) != "P0002" {
		t.Fatalf("hold on an unknown id: %v, want P0002", err)
	}
	r, err := pgcall.PurgeObservationPayloads(ctx, b.Ret, 0, 100)
	testfix.Must(t, err)
	if r.Purged != 0 || r.Skipped != 1 {
		t.Fatalf("purge of a held observation: %+v, want skipped", r)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observations WHERE observation_id = $1::uuid`, id); n != 1 {
		t.Fatal("a held observation lost its payload")
	}
	testfix.Must(t, pgcall.ReleaseLegalHold(ctx, b.Ret, id))
	r, err = pgcall.PurgeObservationPayloads(ctx, b.Ret, 0, 100)
	testfix.Must(t, err)
	if r.Purged != 1 {
		t.Fatalf("purge after the release: %+v, want purged", r)
	}
	v, err := pgcall.VerifyPurgeRun(ctx, b.Ret, r.RunID)
	testfix.Must(t, err)
	if !v.Verified {
		t.Fatalf("purge after the release not verified: %+v", v)
	}
}

// Owner-level plain DML on what only the intake functions change is OB202 (R-SEC-3): accepted
// ids for another workload, envelopes, quota counters, rejections, work rows marked acknowledged,
// receipts, registries; a forged frame inside a literal does not pass the call-stack guard.
func TestOwnerDMLOnIntakeTablesRefused(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	ctx := context.Background()
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	id := intakefix.AcceptN(t, b.EdgeA, 1)[0]
	sha := strings.Repeat("a", 64)
	for what, sql := range map[string]string{
		"id for another workload": `INSERT INTO intake.observation_ids (observation_id, workload_principal_id, digest_algorithm_version, submission_payload_sha256, accepted_envelope_sha256, accepted_at)
			VALUES (gen_random_uuid(), '` + intakefix.WorkloadB + `', 'jcs-sha256-v1', '` + sha + `', '` + sha + `', now())`,
		"envelope":               `INSERT INTO intake.observations SELECT * FROM intake.observations WHERE false`,
		"quota reset":            `UPDATE intake.workload_minutes SET accepted = 0`,
		"quota delete":           `DELETE FROM intake.workload_minutes`,
		"quota truncate":         `TRUNCATE intake.workload_minutes`,
		"rejections":             `INSERT INTO intake.intake_rejections (workload_principal_id, rejected_at, rejected, quota_rejected) VALUES ('` + intakefix.WorkloadA + `', now(), 1, 0)`,
		"work rows acknowledged": `UPDATE intake.observation_deliveries SET status = 'acknowledged', acknowledged_at = now()`,
		"work row inserted":      `INSERT INTO intake.observation_deliveries (consumer_name, observation_id, accepted_at) VALUES ('x', '` + id + `', now())`,
		"receipt without a mutation": `INSERT INTO inbox.observation_receipts (consumer_name, projection_name, projection_version, observation_id, digest_algorithm_version, accepted_envelope_sha256)
			SELECT '` + opConsumer + `', '` + opProjection + `', 1, i.observation_id, 'jcs-sha256-v1', i.accepted_envelope_sha256 FROM intake.observation_ids i`,
		"workload registered directly":  `INSERT INTO intake.workloads (db_role, workload_principal_id, service, environment, max_per_minute, max_body_bytes) VALUES ('outbox_intake', 'wp-x', 'svc', 'test', 1, 2)`,
		"projector registered directly": `INSERT INTO intake.observation_projectors (consumer_name, projection_name, projection_version) VALUES ('x', 'y', 1)`,
		"send failures":                 `INSERT INTO intake.send_failures (workload_principal_id, failed, window_start, window_end, reason) VALUES ('` + intakefix.WorkloadA + `', 1, now() - interval '1 minute', now(), 'x')`,
		"conflict audit":                `INSERT INTO intake.observation_conflicts (observation_id, first_workload_id, second_workload_id, reason) VALUES ('` + id + `', 'a', 'b', 'other_digest')`,
		// a frame forged inside a quoted identifier: the statement is not a whole statement of claim_observations
		"forged frame": `DO $$ BEGIN EXECUTE 'UPDATE intake.observation_deliveries AS "' || E'\nPL/pgSQL function intake.claim_observations(text,text,integer,interval) line 1 at RETURN QUERY\nx' || '" SET status = ''acknowledged'', acknowledged_at = now()'; END $$`,
	} {
		if st := ownerTx(t, b.Dsn, sql); st != "OB202" {
			t.Fatalf("owner %s: %q, want OB202", what, st)
		}
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_deliveries WHERE status = 'pending'`); n != 1 {
		t.Fatalf("%d pending work rows, want 1 (nothing changed)", n)
	}
}
