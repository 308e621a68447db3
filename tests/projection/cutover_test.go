package projection

// Projection versions, slice R-PV-2/R-PV-3 (SPEC §11b, §13; sql/034_projection_cutover.sql,
// docs/projection-versions.md): claim pauses, the freeze (CutoverCandidateBoundary@1, token
// rotation, an empty batch at the boundary's end), candidate_progress, the fenced cutover (a Blocked proof
// changes nothing else; a complete shadow switches: pointer, delivery set, claims), OB001 for a
// stale token, OB804 for a concurrent cutover, OB808 for a direct retargeting activation, the
// rollback by the same protocol, retire (OB809) and drop_retired_projection.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// cvQuartet reads the registered quartet of a delivery-set version.
func cvQuartet(t *testing.T, db pgcall.DBTX, version int) pgcall.Quartet {
	t.Helper()
	var q pgcall.Quartet
	testfix.Must(t, db.QueryRow(context.Background(), `SELECT delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest
		FROM outbox.delivery_set_versions WHERE delivery_set_version = $1`, version).Scan(&q.DeliverySetVersion,
		&q.DefinitionSchemaVersion, &q.DigestAlgorithmVersion, &q.DefinitionDigest))
	return q
}

func cvProgress(t *testing.T, f projectionfix.Fixture, build string) pgcall.CandidateProgress {
	t.Helper()
	p, err := pgcall.CandidateProgressOf(context.Background(), f.Auditor, build)
	testfix.Must(t, err)
	return p
}

// cvState is what a blocked cutover must leave unchanged: the registry, the active delivery set,
// the claim pauses.
func cvState(t *testing.T, f projectionfix.Fixture) string {
	t.Helper()
	var s string
	testfix.Must(t, f.Admin.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(projection_name || '@' || projection_version || ':' || state || ':' || coalesce(live_build_token::text, '-'), ' '
		   ORDER BY projection_name, projection_version) FROM outbox.projection_versions)
		|| ' set=' || (SELECT delivery_set_version FROM outbox.delivery_set_versions WHERE status = 'active')
		|| ' paused=' || coalesce((SELECT string_agg(destination, ',' ORDER BY destination) FROM outbox.destination_claim_pauses), '')`).Scan(&s))
	return s
}

// cvCanonical asserts that a stored document is canonical RFC 8785 text (the database's own
// canonicalizer and the Go one agree) with the given sha256.
func cvCanonical(t *testing.T, f projectionfix.Fixture, doc json.RawMessage, sha string) map[string]any {
	t.Helper()
	var again string
	testfix.Must(t, f.Admin.QueryRow(context.Background(), `SELECT outbox.jcs_canonicalize($1::json)`, string(doc)).Scan(&again))
	if again != string(doc) {
		t.Fatalf("document is not canonical:\n  %s\n  %s", doc, again)
	}
	c, err := canon.Canonicalize(doc)
	testfix.Must(t, err)
	if string(c) != string(doc) {
		t.Fatalf("Go canonical form differs:\n  %s\n  %s", doc, c)
	}
	if got := intakefix.SHA256Hex(string(doc)); got != sha {
		t.Fatalf("document sha256 %s, returned %s", got, sha)
	}
	var m map[string]any
	testfix.Must(t, json.Unmarshal(doc, &m))
	return m
}

// R-PV-2 (c): a paused destination's pending deliveries are not claimed, the others are; resume
// restores; pause and resume are idempotent and audited; only the projector and the operator
// may pause.
func TestCutoverPauseDestinationClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	ops := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-pause", 1)
	met := kernelfix.Append(t, f.Admin, kernelfix.Metering, "agg-pause", 1)

	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, f.Proj, kernelfix.DestCoreOps, "cutover runbook"))
	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, testdb.Conn(t, f.Dsn, "outbox_operator"), kernelfix.DestCoreOps, "again"))
	got := kernelfix.Claim(t, f.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps, kernelfix.DestMetering)
	if len(got) != 1 || got[0].EventID != met {
		t.Fatalf("claim with core_operations paused: %+v, want only the metering delivery %s", got, met)
	}
	if got := kernelfix.Claim(t, f.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps); len(got) != 0 {
		t.Fatalf("claim of the paused destination alone: %+v", got)
	}
	testfix.Must(t, pgcall.ResumeDestinationClaims(ctx, f.Proj, kernelfix.DestCoreOps))
	testfix.Must(t, pgcall.ResumeDestinationClaims(ctx, f.Proj, kernelfix.DestCoreOps))
	got = kernelfix.Claim(t, f.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps)
	if len(got) != 1 || got[0].EventID != ops {
		t.Fatalf("claim after resume: %+v, want %s", got, ops)
	}
	var log string
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT string_agg(destination || ':' || action || ':' || coalesce(reason, '-'), ' ' ORDER BY log_id)
		FROM outbox.destination_claim_pause_log`).Scan(&log))
	if log != "core_operations:pause:cutover runbook core_operations:resume:-" {
		t.Fatalf("pause log %q (one row per effective change)", log)
	}
	// An expired lease of a paused destination is still recovered (to pending), not re-claimed.
	if _, err := f.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET lease_expires_at = now() - interval '1 minute'
		WHERE destination = $1 AND event_id = $2::uuid`, kernelfix.DestCoreOps, ops); err != nil {
		t.Fatal(err)
	}
	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, f.Proj, kernelfix.DestCoreOps, "second pause"))
	if got := kernelfix.Claim(t, f.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps); len(got) != 0 {
		t.Fatalf("claim of the paused destination with an expired lease: %+v", got)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid AND status = 'pending'`, kernelfix.DestCoreOps, ops); n != 1 {
		t.Fatal("the expired lease of the paused destination was not recovered to pending")
	}
	testfix.Must(t, pgcall.ResumeDestinationClaims(ctx, testdb.Conn(t, f.Dsn, "outbox_operator"), kernelfix.DestCoreOps))
	if got := kernelfix.Claim(t, f.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps); len(got) != 1 || got[0].EventID != ops {
		t.Fatalf("claim after the second resume: %+v", got)
	}
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT string_agg(action, ' ' ORDER BY log_id) FROM outbox.destination_claim_pause_log`).Scan(&log))
	if log != "pause resume pause resume" {
		t.Fatalf("pause log %q (one row per effective change)", log)
	}
	if err := pgcall.PauseDestinationClaims(ctx, f.Proj, "no_such_destination", "x"); consumerfix.SQLState(err) != "22023" {
		t.Fatalf("unknown destination: %v, want 22023", err)
	}
	if err := pgcall.PauseDestinationClaims(ctx, f.Proj, kernelfix.DestCoreOps, ""); consumerfix.SQLState(err) != "22023" {
		t.Fatalf("empty reason: %v, want 22023", err)
	}
	for _, role := range []string{"outbox_dispatcher", "outbox_consumer", "outbox_registrar", "outbox_auditor"} {
		if err := pgcall.PauseDestinationClaims(ctx, testdb.Conn(t, f.Dsn, role), kernelfix.DestCoreOps, "x"); consumerfix.SQLState(err) != "42501" {
			t.Fatalf("%s pauses: %v, want 42501", role, err)
		}
	}
	if _, err := testdb.Conn(t, f.Dsn, "outbox_owner").Exec(ctx, `DELETE FROM outbox.destination_claim_pause_log`); consumerfix.SQLState(err) != "OB202" {
		t.Fatalf("pause log delete: %v, want OB202", err)
	}
}

// R-PV-2 (a): the freeze writes an immutable canonical CutoverCandidateBoundary@1 over the exact
// member set (per-kind set digests the test recomputes), rotates the token (old: OB001), and the
// frozen build's claims hand out only the members it lacks, then zero rows (a later event is never
// handed out); candidate_progress moves building -> frozen -> catching_up -> ready.
func TestCutoverFreezeBoundary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	a := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-fz-a", 1)
	bID := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-fz-b", 1)
	m := kernelfix.Append(t, f.Admin, kernelfix.Metering, "agg-fz", 1)
	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateBuilding || p.Remaining != 3 || p.Built != 0 {
		t.Fatalf("progress before claims: %+v", p)
	}
	first, err := pgcall.ClaimRebuildSources(ctx, f.Proj, build.BuildID, build.BuildToken, 1)
	testfix.Must(t, err)
	if len(first) != 1 || first[0].ID != a {
		t.Fatalf("first claim %+v", first)
	}
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	if fz.BuildToken == build.BuildToken {
		t.Fatal("freeze did not rotate the token")
	}
	if _, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, fz.BuildToken); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("second freeze: %v, want OB001", err)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, build.BuildID, build.BuildToken, 5); !errors.Is(err, pgcall.ErrFencingRejected) {
		t.Fatalf("claim with the pre-freeze token: %v, want OB001", err)
	}
	if err := projectionfix.Receipt(t, f, 2, build.BuildToken, a); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("shadow receipt with the pre-freeze token: %v, want OB001", err)
	}
	if _, err := pgcall.FreezeCutoverCandidate(ctx, f.Reg, build.BuildID, fz.BuildToken); consumerfix.SQLState(err) != "42501" {
		t.Fatalf("registrar freezes: %v, want 42501", err)
	}

	doc, err := pgcall.ReadCutoverBoundary(ctx, f.Auditor, fz.BoundaryID)
	testfix.Must(t, err)
	d := cvCanonical(t, f, doc, fz.BoundarySHA256)
	if d["documentType"] != "CutoverCandidateBoundary@1" || d["buildId"] != build.BuildID || d["boundaryId"] != fz.BoundaryID ||
		d["projectionName"] != "operations_timeline" || d["projectionVersion"] != float64(2) ||
		d["semanticDefinitionSha256"] != strings.Repeat("c", 64) {
		t.Fatalf("boundary document %s", doc)
	}
	er := d["expectedReceipt"].(map[string]any)
	if er["consumerName"] != "operations_projector" || er["projectionName"] != "operations_timeline" || er["projectionVersion"] != float64(2) {
		t.Fatalf("expected receipt coordinates %v", er)
	}
	filter := d["sourceFilter"].(map[string]any)
	fc, err := canon.Canonicalize(kernelfix.MustJSON(t, filter))
	testfix.Must(t, err)
	if d["sourceFilterSha256"] != intakefix.SHA256Hex(string(fc)) || filter["observations"] != false {
		t.Fatalf("source filter %v / %v", filter, d["sourceFilterSha256"])
	}
	var types []string
	for _, x := range filter["eventTypes"].([]any) {
		types = append(types, x.(map[string]any)["eventType"].(string))
	}
	if len(types) != 9 || !sort.StringsAreSorted(types) || !containsString(types, kernelfix.RunCreated) || containsString(types, kernelfix.Metering) {
		t.Fatalf("filter event types %v: want the 9 operations_timeline pairs in order", types)
	}
	// the per-kind set digests, recomputed from the events themselves
	ids := []string{a, bID, m}
	sort.Strings(ids)
	var lines strings.Builder
	for _, id := range ids {
		var sha string
		testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT event_envelope_sha256 FROM outbox.outbox_events WHERE event_id = $1::uuid`, id).Scan(&sha))
		lines.WriteString(id + " " + sha + "\n")
	}
	members := d["members"].(map[string]any)
	ev, ob := members["event"].(map[string]any), members["observation"].(map[string]any)
	if ev["count"] != float64(3) || ev["setSha256"] != intakefix.SHA256Hex(lines.String()) || ob["count"] != float64(0) || ob["setSha256"] != intakefix.SHA256Hex("") {
		t.Fatalf("member digests %v, want 3 events with %s", members, intakefix.SHA256Hex(lines.String()))
	}
	if _, err := testdb.Conn(t, f.Dsn, "outbox_owner").Exec(ctx, `UPDATE outbox.cutover_boundaries SET document = '{}'`); consumerfix.SQLState(err) != "OB202" {
		t.Fatalf("boundary update: %v, want OB202", err)
	}

	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateFrozen || p.Remaining != 2+2 {
		t.Fatalf("progress after freeze: %+v, want frozen with 2 members to hand out and 2 receipts missing", p)
	}
	late := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-fz-late", 1)
	if n := projectionfix.Drain(t, f, build.BuildID, fz.BuildToken); n != 2 {
		t.Fatalf("frozen build handed out %d sources, want the 2 members it lacked", n)
	}
	// the end of the boundary is an empty batch, like every claim's end (R-PV-2, issue 37), again and again
	for i := 0; i < 2; i++ {
		if rest, err := pgcall.ClaimRebuildSources(ctx, f.Proj, build.BuildID, fz.BuildToken, 5); err != nil || len(rest) != 0 {
			t.Fatalf("claim past the boundary: %d rows, %v; want zero rows and no error", len(rest), err)
		}
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM outbox.projection_build_sources WHERE build_id = $1::uuid AND source_id = $2::uuid`, build.BuildID, late); n != 0 {
		t.Fatal("an event after the boundary was handed out")
	}
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateCatchingUp || p.Remaining != 3 || p.Built != 3 {
		t.Fatalf("progress after the catch-up: %+v, want catching_up, 3 receipts missing (a, b, the later event)", p)
	}
	for _, id := range []string{a, bID, late} {
		testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, id))
	}
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateReady || p.Remaining != 0 || p.LagSeconds != 0 {
		t.Fatalf("progress with every receipt: %+v, want ready", p)
	}
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// R-PV-2 (c), R-PV-3: a blocked cutover (one source without a shadow receipt) writes a Blocked
// proof and changes nothing else; a stale token is OB001; a direct activation that retargets is
// OB808; the complete shadow switches (pointer, delivery set, claims resumed); the rollback to
// version 1 is the same protocol; retire is refused while targeted or inside the rollback
// window (OB809) and allowed after; drop_retired_projection deletes the retired version's rows.
func TestCutoverBlockedSwitchRollbackRetire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	q1 := cvQuartet(t, f.Admin, 1)
	q2 := projectionfix.RegisterSet2(t, f.Reg)
	if err := pgcall.ActivateDeliverySet(ctx, f.Reg, q2); consumerfix.SQLState(err) != "OB808" {
		t.Fatalf("direct activation of a set retargeting to the shadow: %v, want OB808", err)
	}
	a := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-co-a", 1)
	b := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-co-b", 1)
	kernelfix.Append(t, f.Admin, kernelfix.Metering, "agg-co", 1)
	for _, id := range []string{a, b} { // the active projector's receipts
		testfix.Must(t, projectionfix.Receipt(t, f, 1, "", id))
	}

	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
	testfix.Must(t, projectionfix.Receipt(t, f, 2, build.BuildToken, a)) // b is missing
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, f.Proj, kernelfix.DestCoreOps, "cutover operations_timeline@2"))

	if _, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, build.BuildToken, q2); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("cutover with the pre-freeze token: %v, want OB001", err)
	}
	if _, err := pgcall.CutoverProjection(ctx, f.Disp, build.BuildID, fz.BuildToken, q2); consumerfix.SQLState(err) != "42501" {
		t.Fatalf("dispatcher cuts over: %v, want 42501", err)
	}
	before := cvState(t, f)
	blocked, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if blocked.Result != pgcall.CutoverBlocked || len(blocked.Reasons) != 1 || blocked.Reasons[0] != "missingReceipts=1" {
		t.Fatalf("cutover with a missing shadow receipt: %+v, want blocked [missingReceipts=1]", blocked)
	}
	if after := cvState(t, f); after != before {
		t.Fatalf("a blocked cutover changed state:\n  %s\n  %s", before, after)
	}
	proof, err := pgcall.ReadReadinessProof(ctx, f.Auditor, blocked.ProofID)
	testfix.Must(t, err)
	pd := cvCanonical(t, f, proof, blocked.ProofSHA256)
	if pd["documentType"] != "CutoverReadinessProof@1" || pd["result"] != "Blocked" || pd["boundarySha256"] != fz.BoundarySHA256 ||
		pd["fromVersion"] != float64(1) || pd["toVersion"] != float64(2) ||
		pd["guards"].(map[string]any)["missingReceipts"] != float64(1) || pd["guards"].(map[string]any)["checkedBoundaryEvents"] != float64(2) {
		t.Fatalf("blocked proof %s", proof)
	}
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateBlocked || p.Remaining != 1 {
		t.Fatalf("progress after the blocked cutover: %+v", p)
	}

	// Complete the shadow: b, and a later event dual-applied to the old and the new version.
	testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, b))
	later := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-co-later", 1)
	testfix.Must(t, projectionfix.Receipt(t, f, 1, "", later))
	testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, later))
	sw, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if sw.Result != pgcall.CutoverSwitched || len(sw.Reasons) != 0 {
		t.Fatalf("cutover of the complete shadow: %+v", sw)
	}
	if got := cvState(t, f); got != "operations_timeline@1:frozen:- operations_timeline@2:active:- set=2 paused=" {
		t.Fatalf("after the switch: %s", got)
	}
	proof, err = pgcall.ReadReadinessProof(ctx, f.Auditor, sw.ProofID)
	testfix.Must(t, err)
	pd = cvCanonical(t, f, proof, sw.ProofSHA256)
	if pd["result"] != "Switched" || pd["guards"].(map[string]any)["checkedLaterEvents"] != float64(1) || len(pd["reasons"].([]any)) != 0 {
		t.Fatalf("switched proof %s", proof)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM outbox.destination_claim_pause_log WHERE action = 'resume' AND reason = 'cutover ' || $1`, sw.ProofID); n != 1 {
		t.Fatalf("%d resume rows naming the proof, want 1", n)
	}
	func() { // claims of core_operations resumed (rolled back: leases would hold the rollback)
		tx, err := f.Disp.Begin(ctx)
		testfix.Must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		if got := kernelfix.Claim(t, tx, kernelfix.WorkerA, 10, kernelfix.LongLease, kernelfix.DestCoreOps); len(got) != 3 {
			t.Fatalf("claims after the switch: %d deliveries, want 3", len(got))
		}
	}()
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateSwitched {
		t.Fatalf("progress after the switch: %+v", p)
	}
	if _, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("cutover of a switched build: %v, want OB001", err)
	}
	if _, err := testdb.Conn(t, f.Dsn, "outbox_owner").Exec(ctx, `DELETE FROM outbox.cutover_readiness_proofs`); consumerfix.SQLState(err) != "OB202" {
		t.Fatalf("proof delete: %v, want OB202", err)
	}
	// the pointer moves only through cutover_projection
	if err := pgcall.ActivateDeliverySet(ctx, f.Reg, q1); consumerfix.SQLState(err) != "OB808" {
		t.Fatalf("direct activation back to set 1: %v, want OB808", err)
	}
	for _, v := range []int{1, 2} {
		if err := pgcall.RetireProjectionVersion(ctx, f.Reg, "operations_timeline", v); consumerfix.SQLState(err) != "OB809" ||
			!errors.Is(err, pgcall.ErrProjectionVersionInUse) {
			t.Fatalf("retire @%d (active / rollback target): %v, want OB809", v, err)
		}
	}

	// Rollback (R-PV-3): version 1, kept current without a token, is the candidate.
	rb, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 1)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, rb.BuildID, rb.BuildToken)
	rfz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, rb.BuildID, rb.BuildToken)
	testfix.Must(t, err)
	if err := pgcall.ActivateDeliverySet(ctx, f.Reg, q2); err != nil { // already active: no-op
		t.Fatal(err)
	}
	back, err := pgcall.CutoverProjection(ctx, f.Proj, rb.BuildID, rfz.BuildToken, q1)
	testfix.Must(t, err)
	if back.Result != pgcall.CutoverSwitched {
		t.Fatalf("rollback: %+v", back)
	}
	if got := cvState(t, f); got != "operations_timeline@1:active:- operations_timeline@2:frozen:- set=1 paused=" {
		t.Fatalf("after the rollback: %s", got)
	}
	proof, err = pgcall.ReadReadinessProof(ctx, f.Auditor, back.ProofID)
	testfix.Must(t, err)
	if pd = cvCanonical(t, f, proof, back.ProofSHA256); pd["direction"] != "rollback" || pd["fromVersion"] != float64(2) || pd["toVersion"] != float64(1) {
		t.Fatalf("rollback proof %s", proof)
	}

	// Retire: @2 is the rollback target inside its window; with the window closed it retires.
	if err := pgcall.RetireProjectionVersion(ctx, f.Reg, "operations_timeline", 2); consumerfix.SQLState(err) != "OB809" {
		t.Fatalf("retire @2 inside the rollback window: %v, want OB809", err)
	}
	if _, err := pgcall.DropRetiredProjection(ctx, f.Reg, "operations_timeline", 2); consumerfix.SQLState(err) != "OB802" {
		t.Fatalf("drop of a frozen version: %v, want OB802", err)
	}
	if _, err := f.Admin.Exec(ctx, `UPDATE outbox.kernel_settings SET value = 0 WHERE name = 'projection_rollback_window_seconds'`); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.RetireProjectionVersion(ctx, f.Proj, "operations_timeline", 2); consumerfix.SQLState(err) != "42501" {
		t.Fatalf("projector retires: %v, want 42501", err)
	}
	testfix.Must(t, pgcall.RetireProjectionVersion(ctx, f.Reg, "operations_timeline", 2))
	testfix.Must(t, pgcall.RetireProjectionVersion(ctx, f.Reg, "operations_timeline", 2))
	if err := projectionfix.Receipt(t, f, 2, "", a); consumerfix.SQLState(err) != "OB802" {
		t.Fatalf("receipt for the retired version: %v, want OB802", err)
	}
	v1 := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 1`)
	dropped, err := pgcall.DropRetiredProjection(ctx, f.Reg, "operations_timeline", 2)
	testfix.Must(t, err)
	if dropped != 3 || consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 2`) != 0 {
		t.Fatalf("dropped %d rows, want the 3 receipts of @2", dropped)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 1`); n != v1 || n != 3 {
		t.Fatalf("%d receipts of @1 after the drop, want %d", n, v1)
	}
	if again, err := pgcall.DropRetiredProjection(ctx, f.Reg, "operations_timeline", 2); err != nil || again != 0 {
		t.Fatalf("second drop: %d, %v", again, err)
	}
	if _, err := pgcall.DropRetiredProjection(ctx, f.Reg, "operations_timeline", 1); consumerfix.SQLState(err) != "OB802" {
		t.Fatalf("drop of the active version: %v, want OB802", err)
	}
	// the receipts' guard still refuses every other delete
	if _, err := testdb.Conn(t, f.Dsn, "outbox_owner").Exec(ctx, `DELETE FROM inbox.inbox_receipts WHERE projection_version = 1`); consumerfix.SQLState(err) != "OB202" {
		t.Fatalf("direct receipt delete: %v, want OB202", err)
	}
}

// R-PV-2 (c): one cutover of a projection at a time. While a first cutover's transaction is open
// (its call has returned: the barrier), a second one is OB804 at once; after it ends the second
// proceeds.
func TestCutoverConcurrentOB804(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	q2 := projectionfix.RegisterSet2(t, f.Reg)
	cc := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-cc", 1)
	testfix.Must(t, projectionfix.Receipt(t, f, 1, "", cc)) // the projector's inbox is this database (else OB810)
	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)

	first := testdb.Conn(t, f.Dsn, "outbox_projector")
	tx, err := first.Begin(ctx)
	testfix.Must(t, err)
	r1, err := pgcall.CutoverProjection(ctx, tx, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if r1.Result != pgcall.CutoverBlocked {
		t.Fatalf("first cutover: %+v (the shadow has no receipt)", r1)
	}
	if _, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2); consumerfix.SQLState(err) != "OB804" ||
		!errors.Is(err, pgcall.ErrCutoverInProgress) {
		t.Fatalf("concurrent cutover: %v, want OB804", err)
	}
	testfix.Must(t, tx.Rollback(ctx))
	r2, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if r2.Result != pgcall.CutoverBlocked || r2.ProofID == r1.ProofID {
		t.Fatalf("cutover after the first ended: %+v", r2)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM outbox.cutover_readiness_proofs`); n != 1 {
		t.Fatalf("%d proofs, want 1 (the rolled-back one is gone)", n)
	}
}

// R-PV-2 (c), R-PV-3: cutover refuses a delivery set that does not make the shadow the target
// (22023) and an unknown quartet (OB101); leases in flight and open gaps block it (refused, not
// waited for: the proof names them); a shadow with a frozen build may be retired (its build is
// abandoned, its token dead) and drop_retired_projection deletes its receipts, progress and gaps.
func TestCutoverRefusalsLeasesGapsAndDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	q1 := cvQuartet(t, f.Admin, 1)
	q2 := projectionfix.RegisterSet2(t, f.Reg)
	x := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-rl", 1)
	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, x))
	observe := func(aggregate string, rev int64) string {
		o, err := pgcall.ObserveRevision(ctx, f.Cons, pgcall.ObserveRevisionParams{ConsumerName: "operations_projector",
			ProjectionName: "operations_timeline", ProjectionVersion: 2, AggregateID: aggregate, AggregateRevision: rev,
			BuildToken: fz.BuildToken})
		testfix.Must(t, err)
		return o
	}
	if observe("run-rl", 1) != pgcall.RevisionApply || observe("run-rl-gap", 2) != pgcall.RevisionGap {
		t.Fatal("fixture: revisions")
	}
	lease := kernelfix.ClaimOne(t, f.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	if lease.EventID != x {
		t.Fatalf("leased %s, want %s", lease.EventID, x)
	}

	if _, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q1); consumerfix.SQLState(err) != "22023" {
		t.Fatalf("cutover activating a set that targets @1: %v, want 22023", err)
	}
	bad := q2
	bad.DefinitionDigest = strings.Repeat("0", 64)
	if _, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, bad); consumerfix.SQLState(err) != "OB101" {
		t.Fatalf("cutover with an unregistered quartet: %v, want OB101", err)
	}
	before := cvState(t, f)
	r, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if r.Result != pgcall.CutoverBlocked || strings.Join(r.Reasons, " ") != "leasesInFlight=1 openGaps=1" {
		t.Fatalf("cutover with a lease in flight and an open gap: %+v", r)
	}
	if after := cvState(t, f); after != before {
		t.Fatalf("a blocked cutover changed state:\n  %s\n  %s", before, after)
	}

	// Retire the shadow (nothing targets it): its frozen build is abandoned, then drop its rows.
	testfix.Must(t, pgcall.RetireProjectionVersion(ctx, f.Reg, "operations_timeline", 2))
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateAbandoned {
		t.Fatalf("progress of the retired version's build: %+v", p)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, build.BuildID, fz.BuildToken, 5); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("claim after retire: %v, want OB001", err)
	}
	if _, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2); consumerfix.SQLState(err) != "OB802" {
		t.Fatalf("build of a retired version: %v, want OB802", err)
	}
	var rows [3]int
	for i, tbl := range []string{"inbox.inbox_receipts", "inbox.inbox_revision_progress", "inbox.inbox_revision_gaps"} {
		rows[i] = consumerfix.Count(t, f.Admin, `SELECT count(*) FROM `+tbl+` WHERE projection_version = 2`)
	}
	dropped, err := pgcall.DropRetiredProjection(ctx, f.Reg, "operations_timeline", 2)
	testfix.Must(t, err)
	if rows[0] != 1 || rows[1] < 1 || rows[2] < 1 || dropped != int64(rows[0]+rows[1]+rows[2]) {
		t.Fatalf("dropped %d rows; the version had receipts/progress/gaps %v", dropped, rows)
	}
	for _, tbl := range []string{"inbox.inbox_receipts", "inbox.inbox_revision_progress", "inbox.inbox_revision_gaps"} {
		if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM `+tbl+` WHERE projection_version = 2`); n != 0 {
			t.Fatalf("%s keeps %d rows of the dropped version", tbl, n)
		}
	}
	if got := projectionfix.Versions(t, f.Admin); got != "operations_timeline@1:active:unknown operations_timeline@2:retired:"+strings.Repeat("c", 64) {
		t.Fatalf("registry after drop: %s (registry rows stay)", got)
	}
}

// R-PV-3, R-RT-2: after a forward cutover the former version, once untargeted and outside its
// window, retires; drop_retired_projection deletes its revision progress but keeps the receipt
// that acknowledged a live delivery (evidence), and the ack still names it.
func TestCutoverDropKeepsAcknowledgedReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	q2 := projectionfix.RegisterSet2(t, f.Reg)
	x := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-ack", 1)
	c := kernelfix.ClaimOne(t, f.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	if c.EventID != x || c.RequiredProjectionVersion == nil || *c.RequiredProjectionVersion != 1 {
		t.Fatalf("claimed %+v", c)
	}
	ack, rc := kernelfix.ValidAck(t, c)
	if _, err := pgcall.ObserveRevision(ctx, f.Cons, pgcall.ObserveRevisionParams{ConsumerName: c.ConsumerName,
		ProjectionName: "operations_timeline", ProjectionVersion: 1, AggregateID: "run-ack", AggregateRevision: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.RecordReceipt(ctx, f.Cons, pgcall.RecordReceiptParams{ConsumerName: c.ConsumerName,
		ProjectionName: "operations_timeline", ProjectionVersion: 1, EventEnvelope: c.EventEnvelope, Receipt: rc}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.AckDelivery(ctx, f.Disp, kernelfix.FenceOf(c), ack, rc); err != nil {
		t.Fatal(err)
	}

	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, x))
	if r, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2); err != nil || r.Result != pgcall.CutoverSwitched {
		t.Fatalf("cutover: %+v, %v", r, err)
	}
	if _, err := f.Admin.Exec(ctx, `UPDATE outbox.kernel_settings SET value = 0 WHERE name = 'projection_rollback_window_seconds'`); err != nil {
		t.Fatal(err)
	}
	testfix.Must(t, pgcall.RetireProjectionVersion(ctx, f.Reg, "operations_timeline", 1))
	dropped, err := pgcall.DropRetiredProjection(ctx, f.Reg, "operations_timeline", 1)
	testfix.Must(t, err)
	if dropped != 1 || consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_revision_progress WHERE projection_version = 1`) != 0 {
		t.Fatalf("dropped %d rows, want the one progress row of @1", dropped)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_receipts r JOIN outbox.outbox_deliveries d
		ON d.destination = r.destination AND d.event_id = r.event_id AND d.ack_receipt_ref = r.receipt_ref
		WHERE r.projection_version = 1 AND r.event_id = $1::uuid`, x); n != 1 {
		t.Fatalf("%d acknowledged receipts of @1 left, want 1 (evidence is never dropped)", n)
	}
}
