package intake

// Observation intake: quotas and backpressure (R-OB-6), health windows (R-OB-5), payload purge
// with markers and a verifiable run (R-OB-7), T-9 "quota exceeded", "purge then re-submission".

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-OB-6, R-OB-5 "replays never count against a quota", T-9: with 5 per minute, a batch of 8 new
// ids accepts 5 and rejects 3 with OB703 and retryAfterSeconds; replays of the accepted 5 are
// still accepted_existing; a body above max_body_bytes is OB703. One transaction, so one minute.
func TestIntakeQuotaOB703RetryAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 5, MaxBodyBytes: 200})
	tx, err := b.EdgeA.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	docs := make([]any, 8)
	for i := range docs {
		docs[i] = intakefix.Sub(testfix.NewUUID())
	}
	out, err := pgcall.AcceptObservations(ctx, tx, intakefix.JSON(t, docs))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if i < 5 {
			intakefix.Want(t, o, "accepted_new", "")
		} else {
			intakefix.Want(t, o, "rejected", "OB703")
			if !strings.Contains(o.Detail, "retryAfterSeconds=") {
				t.Fatalf("OB703 without retryAfterSeconds: %s", o.Detail)
			}
		}
	}
	replay, err := pgcall.AcceptObservations(ctx, tx, intakefix.JSON(t, docs[:5]))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range replay {
		intakefix.Want(t, o, "accepted_existing", "")
	}
	big := intakefix.Sub(testfix.NewUUID())
	big["body"].(map[string]any)["requestId"] = strings.Repeat("x", 60)
	big["body"].(map[string]any)["label"] = strings.Repeat("y", 32)
	big["body"].(map[string]any)["runId"] = testfix.NewUUID()
	big["body"].(map[string]any)["startedAt"] = "2026-12-03T10:00:00.123456+01:00"
	intakefix.Want(t, intakefix.One(t, tx, intakefix.JSON(t, big)), "rejected", "OB703")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observations`); n != 5 {
		t.Fatalf("%d accepted observations kept, want 5 (accepted work is never dropped)", n)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT coalesce(sum(quota_rejected), 0)::int FROM intake.workload_minutes WHERE workload_principal_id = $1`, intakefix.WorkloadA); n != 4 {
		t.Fatalf("%d quota rejections counted, want 4", n)
	}
}

// R-OB-5: health windows per workload: accepted count and last acceptedAt, known send failures,
// intake rejections; healthy, degraded on any failure or rejection, unknown when nothing was
// heard. A producer-claimed time in the past never moves an observation into a past window.
func TestIntakeHealthWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	s := intakefix.Sub(testfix.NewUUID())
	s["sourceClaimedObservedAt"] = "2000-01-01T00:00:00Z"
	a := intakefix.One(t, b.EdgeA, intakefix.JSON(t, s))
	intakefix.Want(t, a, "accepted_new", "")
	intakefix.Want(t, intakefix.One(t, b.EdgeB, intakefix.JSON(t, intakefix.Sub(testfix.NewUUID()))), "accepted_new", "")
	intakefix.Want(t, intakefix.One(t, b.EdgeB, []byte(`{"bad":1}`)), "rejected", "OB702")
	if err := pgcall.RecordSendFailures(ctx, b.EdgeA, 3, time.Now().Add(-2*time.Minute), time.Now().Add(-time.Minute), "timeout"); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.RecordSendFailures(ctx, b.EdgeA, 1, time.Now().Add(-time.Minute), time.Now(), "bad reason!"); pgcall.SQLState(err) != "22023" {
		t.Fatalf("free-text reason: %v, want 22023", err)
	}
	now := time.Now()
	ws, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, now.Add(-10*time.Minute), now.Add(10*time.Minute), 20*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pgcall.HealthWindow{}
	for _, w := range ws {
		got[w.WorkloadPrincipalID] = w
	}
	if w := got[intakefix.WorkloadA]; w.Accepted != 1 || w.SendFailures != 3 || w.IntakeRejections != 0 || w.Health != "degraded" || !w.LastAcceptedAt.Equal(a.AcceptedAt) {
		t.Fatalf("workload A window %+v, want 1 accepted, 3 send failures, degraded", w)
	}
	if w := got[intakefix.WorkloadB]; w.Accepted != 1 || w.IntakeRejections != 1 || w.Health != "degraded" {
		t.Fatalf("workload B window %+v, want 1 accepted, 1 rejection, degraded", w)
	}
	// a window in the past: nothing heard (the claimed time 2000-01-01 counts for nothing)
	past, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range past {
		if w.Health != "unknown" || w.Accepted != 0 {
			t.Fatalf("past window %+v, want unknown", w)
		}
	}
	// only replays in a window: healthy stays healthy (a replay is neither accepted nor rejected)
	intakefix.Want(t, intakefix.One(t, b.EdgeB, intakefix.JSON(t, s)), "conflict", "OB701") // another source: an integrity alarm, counted
	if _, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, now, now.Add(-time.Minute), time.Minute); pgcall.SQLState(err) != "22023" {
		t.Fatalf("to before from: %v, want 22023", err)
	}
}

// R-OB-7, T-9 "purge then re-submission": only observations every registered projector has a
// receipt for are purged (markers first, run row last with purged_set_sha256, verify_purge_run
// re-checks it); the id registry survives, so the purged id answers accepted_existing_purged
// (id, original acceptedAt, algorithm only) and another body under it is still a conflict; a
// DELETE outside the purge is OB202.
func TestIntakePurgeMarkersAndResubmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	if err := pgcall.RegisterObservationProjector(ctx, b.Reg, "ops-projector", "operations", 1); err != nil {
		t.Fatal(err)
	}
	ids := []string{testfix.NewUUID(), testfix.NewUUID(), testfix.NewUUID()}
	outs := map[string]pgcall.ObservationOutcome{}
	for _, id := range ids {
		o := intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(id)))
		intakefix.Want(t, o, "accepted_new", "")
		outs[id] = o
	}
	// the projector's receipts for the first two (fixture: the projector path writes them)
	for _, id := range ids[:2] {
		intakefix.Fixture(t, b.Admin, `INSERT INTO inbox.observation_receipts (consumer_name, projection_name, projection_version,
			observation_id, digest_algorithm_version, accepted_envelope_sha256) VALUES ('ops-projector', 'operations', 1, $1::uuid, 'jcs-sha256-v1', $2)`,
			id, outs[id].AcceptedEnvelopeSHA256)
	}
	if _, err := b.Admin.Exec(ctx, `DELETE FROM intake.observations WHERE observation_id = $1::uuid`, ids[0]); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("DELETE outside the purge: %v, want OB202", err)
	}
	run, err := pgcall.PurgeObservationPayloads(ctx, b.Ret, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if run.Purged != 2 || run.Skipped != 1 || len(run.PurgedSetSHA256) != 64 {
		t.Fatalf("purge run %+v, want 2 purged, 1 skipped (no receipt)", run)
	}
	v, err := pgcall.VerifyPurgeRun(ctx, b.Auditor, run.RunID)
	if err != nil || !v.Verified {
		t.Fatalf("verify: %+v %v", v, err)
	}
	if v, _ := pgcall.VerifyPurgeRun(ctx, b.Auditor, testfix.NewUUID()); v.Verified {
		t.Fatal("an unknown run verified")
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observation_purge_markers WHERE run_id = $1::uuid`, run.RunID); n != 2 {
		t.Fatalf("%d markers", n)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observation_ids`); n != 3 {
		t.Fatalf("%d registry rows, want 3 (the registry survives the purge)", n)
	}
	again := intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(ids[0])))
	intakefix.Want(t, again, "accepted_existing_purged", "")
	if !again.AcceptedAt.Equal(outs[ids[0]].AcceptedAt) || again.AcceptedEnvelopeSHA256 != "" || again.SubmissionPayloadSHA256 != "" ||
		!strings.Contains(again.Detail, "jcs-sha256-v1") {
		t.Fatalf("purged replay %+v, want id, original acceptedAt and algorithm only", again)
	}
	other := intakefix.Sub(ids[0])
	other["body"].(map[string]any)["durationMs"] = 77
	intakefix.Want(t, intakefix.One(t, b.EdgeA, intakefix.JSON(t, other)), "conflict", "OB701")
	intakefix.Want(t, intakefix.One(t, b.EdgeB, intakefix.JSON(t, intakefix.Sub(ids[0]))), "conflict", "OB701")
	intakefix.Want(t, intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(ids[2]))), "accepted_existing", "")
	for _, q := range []string{`DELETE FROM intake.observation_purge_markers`, `UPDATE intake.purge_runs SET purged = 0`} {
		if _, err := b.Admin.Exec(ctx, q); pgcall.SQLState(err) != "OB202" {
			t.Fatalf("%s: %v, want OB202", q, err)
		}
	}
	if _, err := pgcall.PurgeObservationPayloads(ctx, b.Ret, -time.Hour, 10); pgcall.SQLState(err) != "22023" {
		t.Fatalf("negative older_than: %v", err)
	}
}

// R-OB-1, T-7: the intake role has EXECUTE on accept and record_send_failures only and sees no
// table; the registrar may not accept; PUBLIC has nothing; every intake function is SECURITY
// DEFINER with a pinned search_path.
func TestIntakeGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	for _, q := range []string{`SELECT 1 FROM intake.observations LIMIT 0`, `SELECT 1 FROM intake.observation_ids LIMIT 0`,
		`SELECT 1 FROM intake.workloads LIMIT 0`, `SELECT intake.register_workload('x', 'x', 'x', 'x')`,
		`SELECT * FROM intake.purge_observation_payloads('1 day')`} {
		if _, err := b.EdgeA.Exec(ctx, q); !errors.Is(err, pgcall.ErrPermissionDenied) && pgcall.SQLState(err) != "42501" {
			t.Errorf("workload role: %s: %v, want 42501", q, err)
		}
	}
	if _, err := pgcall.AcceptObservations(ctx, b.Reg, intakefix.JSON(t, []any{intakefix.Sub(testfix.NewUUID())})); pgcall.SQLState(err) != "42501" {
		t.Errorf("registrar accept: %v, want 42501", err)
	}
	var bad []string
	rows, err := b.Admin.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'intake' AND (has_function_privilege('public', p.oid, 'EXECUTE')
		   OR (p.proname !~ '^(_|tg_)' AND NOT (p.prosecdef AND EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c = 'search_path=pg_catalog, pg_temp'))))`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, s)
	}
	if len(bad) > 0 {
		t.Fatalf("intake functions executable by PUBLIC or not SECURITY DEFINER with a pinned search_path: %v", bad)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'intake' AND c.relkind = 'r' AND has_table_privilege('outbox_intake', c.oid, 'SELECT,INSERT,UPDATE,DELETE')`); n != 0 {
		t.Fatalf("outbox_intake has privileges on %d intake tables", n)
	}
}
