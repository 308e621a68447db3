package tests

// Projection versions, slice R-PV-2/R-PV-3 (SPEC §11b, §13; sql/034_projection_cutover.sql,
// docs/projection-versions.md): claim pauses, the freeze (CutoverCandidateBoundary@1, token
// rotation, OB803 at the boundary), candidate_progress, the fenced cutover (a Blocked proof
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
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/receipt"
)

// cvQuartet reads the registered quartet of a delivery-set version.
func cvQuartet(t *testing.T, db pgcall.DBTX, version int) pgcall.Quartet {
	t.Helper()
	var q pgcall.Quartet
	must(t, db.QueryRow(context.Background(), `SELECT delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest
		FROM outbox.delivery_set_versions WHERE delivery_set_version = $1`, version).Scan(&q.DeliverySetVersion,
		&q.DefinitionSchemaVersion, &q.DigestAlgorithmVersion, &q.DefinitionDigest))
	return q
}

// cvRegisterSet2 registers delivery-set version 2: the reference release with every
// operations_timeline member targeting projectionVersion 2 (registered, not active).
func cvRegisterSet2(t *testing.T, reg pgcall.DBTX) pgcall.Quartet {
	t.Helper()
	doc := mutateRelease(t, func(m map[string]any) {
		m["deliverySetVersion"] = 2
		for _, x := range members(m) {
			pt := x.(map[string]any)["projectionTarget"].(map[string]any)
			if pt["projectionName"] == "operations_timeline" {
				pt["projectionVersion"] = 2
			}
		}
	})
	q, err := pgcall.RegisterDeliverySet(context.Background(), reg, doc, "v2-operations-timeline-2")
	must(t, err)
	return q
}

// cvReceipt records the operations_projector receipt of event id under operations_timeline@version
// (token: the build token of a shadow, "" for an active or frozen version).
func cvReceipt(t *testing.T, f pvFixture, version int, token, id string) error {
	t.Helper()
	ctx := context.Background()
	var raw string
	must(t, f.admin.QueryRow(ctx, `SELECT envelope::text FROM outbox.event_source WHERE event_id = $1::uuid`, id).Scan(&raw))
	c, err := canon.Canonicalize(json.RawMessage(raw))
	must(t, err)
	sha, err := canon.SHA256Hex(c)
	must(t, err)
	var env map[string]any
	must(t, json.Unmarshal(c, &env))
	doc, err := receipt.Build(receipt.OperationsProjection, receipt.Params{Destination: dxDestCoreOps,
		ConsumerName: "operations_projector", EventID: id, EventEnvelopeSHA256: sha,
		ProjectionName: "operations_timeline", ProjectionVersion: version,
		EventType: env["eventType"].(string), EventSchemaVersion: env["eventSchemaVersion"].(string)})
	must(t, err)
	_, err = pgcall.RecordReceipt(ctx, f.cons, pgcall.RecordReceiptParams{ConsumerName: "operations_projector",
		ProjectionName: "operations_timeline", ProjectionVersion: version, EventEnvelope: c, Receipt: doc.Receipt,
		BuildToken: token})
	return err
}

// cvDrain claims every source of a build until it is done: an empty batch (building) or OB803
// (frozen: the boundary is handed out). Returns the number of sources handed out.
func cvDrain(t *testing.T, f pvFixture, build, token string) int {
	t.Helper()
	n := 0
	for i := 0; i < 100; i++ {
		batch, err := pgcall.ClaimRebuildSources(context.Background(), f.proj, build, token, 2)
		if errors.Is(err, pgcall.ErrOutsideCutoverBoundary) {
			return n
		}
		must(t, err)
		if len(batch) == 0 {
			return n
		}
		n += len(batch)
	}
	t.Fatal("the claims do not end")
	return n
}

func cvProgress(t *testing.T, f pvFixture, build string) pgcall.CandidateProgress {
	t.Helper()
	p, err := pgcall.CandidateProgressOf(context.Background(), f.auditor, build)
	must(t, err)
	return p
}

// cvState is what a blocked cutover must leave unchanged: the registry, the active delivery set,
// the claim pauses.
func cvState(t *testing.T, f pvFixture) string {
	t.Helper()
	var s string
	must(t, f.admin.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(projection_name || '@' || projection_version || ':' || state || ':' || coalesce(live_build_token::text, '-'), ' '
		   ORDER BY projection_name, projection_version) FROM outbox.projection_versions)
		|| ' set=' || (SELECT delivery_set_version FROM outbox.delivery_set_versions WHERE status = 'active')
		|| ' paused=' || coalesce((SELECT string_agg(destination, ',' ORDER BY destination) FROM outbox.destination_claim_pauses), '')`).Scan(&s))
	return s
}

// cvCanonical asserts that a stored document is canonical RFC 8785 text (the database's own
// canonicalizer and the Go one agree) with the given sha256.
func cvCanonical(t *testing.T, f pvFixture, doc json.RawMessage, sha string) map[string]any {
	t.Helper()
	var again string
	must(t, f.admin.QueryRow(context.Background(), `SELECT outbox.jcs_canonicalize($1::json)`, string(doc)).Scan(&again))
	if again != string(doc) {
		t.Fatalf("document is not canonical:\n  %s\n  %s", doc, again)
	}
	c, err := canon.Canonicalize(doc)
	must(t, err)
	if string(c) != string(doc) {
		t.Fatalf("Go canonical form differs:\n  %s\n  %s", doc, c)
	}
	if got := sha256Hex(string(doc)); got != sha {
		t.Fatalf("document sha256 %s, returned %s", got, sha)
	}
	var m map[string]any
	must(t, json.Unmarshal(doc, &m))
	return m
}

// R-PV-2 (c): a paused destination's pending deliveries are not claimed, the others are; resume
// restores; pause and resume are idempotent and audited; only the projector and the operator
// may pause.
func TestCutoverPauseDestinationClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := pvSetup(t)
	ops := dxAppend(t, f.admin, dxRunCreated, "run-pause", 1)
	met := dxAppend(t, f.admin, dxMetering, "agg-pause", 1)

	must(t, pgcall.PauseDestinationClaims(ctx, f.proj, dxDestCoreOps, "cutover runbook"))
	must(t, pgcall.PauseDestinationClaims(ctx, testdb.Conn(t, f.dsn, "outbox_operator"), dxDestCoreOps, "again"))
	got := dxClaim(t, f.disp, dxWorkerA, 10, dxLongLease, dxDestCoreOps, dxDestMetering)
	if len(got) != 1 || got[0].EventID != met {
		t.Fatalf("claim with core_operations paused: %+v, want only the metering delivery %s", got, met)
	}
	if got := dxClaim(t, f.disp, dxWorkerA, 10, dxLongLease, dxDestCoreOps); len(got) != 0 {
		t.Fatalf("claim of the paused destination alone: %+v", got)
	}
	must(t, pgcall.ResumeDestinationClaims(ctx, f.proj, dxDestCoreOps))
	must(t, pgcall.ResumeDestinationClaims(ctx, f.proj, dxDestCoreOps))
	got = dxClaim(t, f.disp, dxWorkerA, 10, dxLongLease, dxDestCoreOps)
	if len(got) != 1 || got[0].EventID != ops {
		t.Fatalf("claim after resume: %+v, want %s", got, ops)
	}
	var log string
	must(t, f.admin.QueryRow(ctx, `SELECT string_agg(destination || ':' || action || ':' || coalesce(reason, '-'), ' ' ORDER BY log_id)
		FROM outbox.destination_claim_pause_log`).Scan(&log))
	if log != "core_operations:pause:cutover runbook core_operations:resume:-" {
		t.Fatalf("pause log %q (one row per effective change)", log)
	}
	// An expired lease of a paused destination is still recovered (to pending), not re-claimed.
	if _, err := f.admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET lease_expires_at = now() - interval '1 minute'
		WHERE destination = $1 AND event_id = $2::uuid`, dxDestCoreOps, ops); err != nil {
		t.Fatal(err)
	}
	must(t, pgcall.PauseDestinationClaims(ctx, f.proj, dxDestCoreOps, "second pause"))
	if got := dxClaim(t, f.disp, dxWorkerA, 10, dxLongLease, dxDestCoreOps); len(got) != 0 {
		t.Fatalf("claim of the paused destination with an expired lease: %+v", got)
	}
	if n := ckCount(t, f.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid AND status = 'pending'`, dxDestCoreOps, ops); n != 1 {
		t.Fatal("the expired lease of the paused destination was not recovered to pending")
	}
	must(t, pgcall.ResumeDestinationClaims(ctx, testdb.Conn(t, f.dsn, "outbox_operator"), dxDestCoreOps))
	if got := dxClaim(t, f.disp, dxWorkerA, 10, dxLongLease, dxDestCoreOps); len(got) != 1 || got[0].EventID != ops {
		t.Fatalf("claim after the second resume: %+v", got)
	}
	must(t, f.admin.QueryRow(ctx, `SELECT string_agg(action, ' ' ORDER BY log_id) FROM outbox.destination_claim_pause_log`).Scan(&log))
	if log != "pause resume pause resume" {
		t.Fatalf("pause log %q (one row per effective change)", log)
	}
	if err := pgcall.PauseDestinationClaims(ctx, f.proj, "no_such_destination", "x"); ckSQLState(err) != "22023" {
		t.Fatalf("unknown destination: %v, want 22023", err)
	}
	if err := pgcall.PauseDestinationClaims(ctx, f.proj, dxDestCoreOps, ""); ckSQLState(err) != "22023" {
		t.Fatalf("empty reason: %v, want 22023", err)
	}
	for _, role := range []string{"outbox_dispatcher", "outbox_consumer", "outbox_registrar", "outbox_auditor"} {
		if err := pgcall.PauseDestinationClaims(ctx, testdb.Conn(t, f.dsn, role), dxDestCoreOps, "x"); ckSQLState(err) != "42501" {
			t.Fatalf("%s pauses: %v, want 42501", role, err)
		}
	}
	if _, err := testdb.Conn(t, f.dsn, "outbox_owner").Exec(ctx, `DELETE FROM outbox.destination_claim_pause_log`); ckSQLState(err) != "OB202" {
		t.Fatalf("pause log delete: %v, want OB202", err)
	}
}

// R-PV-2 (a): the freeze writes an immutable canonical CutoverCandidateBoundary@1 over the exact
// member set (per-kind set digests the test recomputes), rotates the token (old: OB001), and the
// frozen build's claims hand out only the members it lacks, then OB803 (a later event is never
// handed out); candidate_progress moves building -> frozen -> catching_up -> ready.
func TestCutoverFreezeBoundary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := pvSetup(t)
	a := dxAppend(t, f.admin, dxRunCreated, "run-fz-a", 1)
	bID := dxAppend(t, f.admin, dxRunCreated, "run-fz-b", 1)
	m := dxAppend(t, f.admin, dxMetering, "agg-fz", 1)
	build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
	must(t, err)
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateBuilding || p.Remaining != 3 || p.Built != 0 {
		t.Fatalf("progress before claims: %+v", p)
	}
	first, err := pgcall.ClaimRebuildSources(ctx, f.proj, build.BuildID, build.BuildToken, 1)
	must(t, err)
	if len(first) != 1 || first[0].ID != a {
		t.Fatalf("first claim %+v", first)
	}
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
	must(t, err)
	if fz.BuildToken == build.BuildToken {
		t.Fatal("freeze did not rotate the token")
	}
	if _, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, fz.BuildToken); ckSQLState(err) != "OB001" {
		t.Fatalf("second freeze: %v, want OB001", err)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, f.proj, build.BuildID, build.BuildToken, 5); !errors.Is(err, pgcall.ErrFencingRejected) {
		t.Fatalf("claim with the pre-freeze token: %v, want OB001", err)
	}
	if err := cvReceipt(t, f, 2, build.BuildToken, a); ckSQLState(err) != "OB001" {
		t.Fatalf("shadow receipt with the pre-freeze token: %v, want OB001", err)
	}
	if _, err := pgcall.FreezeCutoverCandidate(ctx, f.reg, build.BuildID, fz.BuildToken); ckSQLState(err) != "42501" {
		t.Fatalf("registrar freezes: %v, want 42501", err)
	}

	doc, err := pgcall.ReadCutoverBoundary(ctx, f.auditor, fz.BoundaryID)
	must(t, err)
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
	fc, err := canon.Canonicalize(mustJSON(t, filter))
	must(t, err)
	if d["sourceFilterSha256"] != sha256Hex(string(fc)) || filter["observations"] != false {
		t.Fatalf("source filter %v / %v", filter, d["sourceFilterSha256"])
	}
	var types []string
	for _, x := range filter["eventTypes"].([]any) {
		types = append(types, x.(map[string]any)["eventType"].(string))
	}
	if len(types) != 9 || !sort.StringsAreSorted(types) || !containsString(types, dxRunCreated) || containsString(types, dxMetering) {
		t.Fatalf("filter event types %v: want the 9 operations_timeline pairs in order", types)
	}
	// the per-kind set digests, recomputed from the events themselves
	ids := []string{a, bID, m}
	sort.Strings(ids)
	var lines strings.Builder
	for _, id := range ids {
		var sha string
		must(t, f.admin.QueryRow(ctx, `SELECT event_envelope_sha256 FROM outbox.outbox_events WHERE event_id = $1::uuid`, id).Scan(&sha))
		lines.WriteString(id + " " + sha + "\n")
	}
	members := d["members"].(map[string]any)
	ev, ob := members["event"].(map[string]any), members["observation"].(map[string]any)
	if ev["count"] != float64(3) || ev["setSha256"] != sha256Hex(lines.String()) || ob["count"] != float64(0) || ob["setSha256"] != sha256Hex("") {
		t.Fatalf("member digests %v, want 3 events with %s", members, sha256Hex(lines.String()))
	}
	if _, err := testdb.Conn(t, f.dsn, "outbox_owner").Exec(ctx, `UPDATE outbox.cutover_boundaries SET document = '{}'`); ckSQLState(err) != "OB202" {
		t.Fatalf("boundary update: %v, want OB202", err)
	}

	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateFrozen || p.Remaining != 2+2 {
		t.Fatalf("progress after freeze: %+v, want frozen with 2 members to hand out and 2 receipts missing", p)
	}
	late := dxAppend(t, f.admin, dxRunCreated, "run-fz-late", 1)
	if n := cvDrain(t, f, build.BuildID, fz.BuildToken); n != 2 {
		t.Fatalf("frozen build handed out %d sources, want the 2 members it lacked", n)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, f.proj, build.BuildID, fz.BuildToken, 5); ckSQLState(err) != "OB803" {
		t.Fatalf("claim past the boundary: %v, want OB803", err)
	}
	if n := ckCount(t, f.admin, `SELECT count(*) FROM outbox.projection_build_sources WHERE build_id = $1::uuid AND source_id = $2::uuid`, build.BuildID, late); n != 0 {
		t.Fatal("an event after the boundary was handed out")
	}
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateCatchingUp || p.Remaining != 3 || p.Built != 3 {
		t.Fatalf("progress after the catch-up: %+v, want catching_up, 3 receipts missing (a, b, the later event)", p)
	}
	for _, id := range []string{a, bID, late} {
		must(t, cvReceipt(t, f, 2, fz.BuildToken, id))
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
	f := pvSetup(t)
	q1 := cvQuartet(t, f.admin, 1)
	q2 := cvRegisterSet2(t, f.reg)
	if err := pgcall.ActivateDeliverySet(ctx, f.reg, q2); ckSQLState(err) != "OB808" {
		t.Fatalf("direct activation of a set retargeting to the shadow: %v, want OB808", err)
	}
	a := dxAppend(t, f.admin, dxRunCreated, "run-co-a", 1)
	b := dxAppend(t, f.admin, dxRunCreated, "run-co-b", 1)
	dxAppend(t, f.admin, dxMetering, "agg-co", 1)
	for _, id := range []string{a, b} { // the active projector's receipts
		must(t, cvReceipt(t, f, 1, "", id))
	}

	build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
	must(t, err)
	cvDrain(t, f, build.BuildID, build.BuildToken)
	must(t, cvReceipt(t, f, 2, build.BuildToken, a)) // b is missing
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
	must(t, err)
	must(t, pgcall.PauseDestinationClaims(ctx, f.proj, dxDestCoreOps, "cutover operations_timeline@2"))

	if _, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, build.BuildToken, q2); ckSQLState(err) != "OB001" {
		t.Fatalf("cutover with the pre-freeze token: %v, want OB001", err)
	}
	if _, err := pgcall.CutoverProjection(ctx, f.disp, build.BuildID, fz.BuildToken, q2); ckSQLState(err) != "42501" {
		t.Fatalf("dispatcher cuts over: %v, want 42501", err)
	}
	before := cvState(t, f)
	blocked, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
	must(t, err)
	if blocked.Result != pgcall.CutoverBlocked || len(blocked.Reasons) != 1 || blocked.Reasons[0] != "missingReceipts=1" {
		t.Fatalf("cutover with a missing shadow receipt: %+v, want blocked [missingReceipts=1]", blocked)
	}
	if after := cvState(t, f); after != before {
		t.Fatalf("a blocked cutover changed state:\n  %s\n  %s", before, after)
	}
	proof, err := pgcall.ReadReadinessProof(ctx, f.auditor, blocked.ProofID)
	must(t, err)
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
	must(t, cvReceipt(t, f, 2, fz.BuildToken, b))
	later := dxAppend(t, f.admin, dxRunCreated, "run-co-later", 1)
	must(t, cvReceipt(t, f, 1, "", later))
	must(t, cvReceipt(t, f, 2, fz.BuildToken, later))
	sw, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
	must(t, err)
	if sw.Result != pgcall.CutoverSwitched || len(sw.Reasons) != 0 {
		t.Fatalf("cutover of the complete shadow: %+v", sw)
	}
	if got := cvState(t, f); got != "operations_timeline@1:frozen:- operations_timeline@2:active:- set=2 paused=" {
		t.Fatalf("after the switch: %s", got)
	}
	proof, err = pgcall.ReadReadinessProof(ctx, f.auditor, sw.ProofID)
	must(t, err)
	pd = cvCanonical(t, f, proof, sw.ProofSHA256)
	if pd["result"] != "Switched" || pd["guards"].(map[string]any)["checkedLaterEvents"] != float64(1) || len(pd["reasons"].([]any)) != 0 {
		t.Fatalf("switched proof %s", proof)
	}
	if n := ckCount(t, f.admin, `SELECT count(*) FROM outbox.destination_claim_pause_log WHERE action = 'resume' AND reason = 'cutover ' || $1`, sw.ProofID); n != 1 {
		t.Fatalf("%d resume rows naming the proof, want 1", n)
	}
	func() { // claims of core_operations resumed (rolled back: leases would hold the rollback)
		tx, err := f.disp.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		if got := dxClaim(t, tx, dxWorkerA, 10, dxLongLease, dxDestCoreOps); len(got) != 3 {
			t.Fatalf("claims after the switch: %d deliveries, want 3", len(got))
		}
	}()
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateSwitched {
		t.Fatalf("progress after the switch: %+v", p)
	}
	if _, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2); ckSQLState(err) != "OB001" {
		t.Fatalf("cutover of a switched build: %v, want OB001", err)
	}
	if _, err := testdb.Conn(t, f.dsn, "outbox_owner").Exec(ctx, `DELETE FROM outbox.cutover_readiness_proofs`); ckSQLState(err) != "OB202" {
		t.Fatalf("proof delete: %v, want OB202", err)
	}
	// the pointer moves only through cutover_projection
	if err := pgcall.ActivateDeliverySet(ctx, f.reg, q1); ckSQLState(err) != "OB808" {
		t.Fatalf("direct activation back to set 1: %v, want OB808", err)
	}
	for _, v := range []int{1, 2} {
		if err := pgcall.RetireProjectionVersion(ctx, f.reg, "operations_timeline", v); ckSQLState(err) != "OB809" ||
			!errors.Is(err, pgcall.ErrProjectionVersionInUse) {
			t.Fatalf("retire @%d (active / rollback target): %v, want OB809", v, err)
		}
	}

	// Rollback (R-PV-3): version 1, kept current without a token, is the candidate.
	rb, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 1)
	must(t, err)
	cvDrain(t, f, rb.BuildID, rb.BuildToken)
	rfz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, rb.BuildID, rb.BuildToken)
	must(t, err)
	if err := pgcall.ActivateDeliverySet(ctx, f.reg, q2); err != nil { // already active: no-op
		t.Fatal(err)
	}
	back, err := pgcall.CutoverProjection(ctx, f.proj, rb.BuildID, rfz.BuildToken, q1)
	must(t, err)
	if back.Result != pgcall.CutoverSwitched {
		t.Fatalf("rollback: %+v", back)
	}
	if got := cvState(t, f); got != "operations_timeline@1:active:- operations_timeline@2:frozen:- set=1 paused=" {
		t.Fatalf("after the rollback: %s", got)
	}
	proof, err = pgcall.ReadReadinessProof(ctx, f.auditor, back.ProofID)
	must(t, err)
	if pd = cvCanonical(t, f, proof, back.ProofSHA256); pd["direction"] != "rollback" || pd["fromVersion"] != float64(2) || pd["toVersion"] != float64(1) {
		t.Fatalf("rollback proof %s", proof)
	}

	// Retire: @2 is the rollback target inside its window; with the window closed it retires.
	if err := pgcall.RetireProjectionVersion(ctx, f.reg, "operations_timeline", 2); ckSQLState(err) != "OB809" {
		t.Fatalf("retire @2 inside the rollback window: %v, want OB809", err)
	}
	if _, err := pgcall.DropRetiredProjection(ctx, f.reg, "operations_timeline", 2); ckSQLState(err) != "OB802" {
		t.Fatalf("drop of a frozen version: %v, want OB802", err)
	}
	if _, err := f.admin.Exec(ctx, `UPDATE outbox.kernel_settings SET value = 0 WHERE name = 'projection_rollback_window_seconds'`); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.RetireProjectionVersion(ctx, f.proj, "operations_timeline", 2); ckSQLState(err) != "42501" {
		t.Fatalf("projector retires: %v, want 42501", err)
	}
	must(t, pgcall.RetireProjectionVersion(ctx, f.reg, "operations_timeline", 2))
	must(t, pgcall.RetireProjectionVersion(ctx, f.reg, "operations_timeline", 2))
	if err := cvReceipt(t, f, 2, "", a); ckSQLState(err) != "OB802" {
		t.Fatalf("receipt for the retired version: %v, want OB802", err)
	}
	v1 := ckCount(t, f.admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 1`)
	dropped, err := pgcall.DropRetiredProjection(ctx, f.reg, "operations_timeline", 2)
	must(t, err)
	if dropped != 3 || ckCount(t, f.admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 2`) != 0 {
		t.Fatalf("dropped %d rows, want the 3 receipts of @2", dropped)
	}
	if n := ckCount(t, f.admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 1`); n != v1 || n != 3 {
		t.Fatalf("%d receipts of @1 after the drop, want %d", n, v1)
	}
	if again, err := pgcall.DropRetiredProjection(ctx, f.reg, "operations_timeline", 2); err != nil || again != 0 {
		t.Fatalf("second drop: %d, %v", again, err)
	}
	if _, err := pgcall.DropRetiredProjection(ctx, f.reg, "operations_timeline", 1); ckSQLState(err) != "OB802" {
		t.Fatalf("drop of the active version: %v, want OB802", err)
	}
	// the receipts' guard still refuses every other delete
	if _, err := testdb.Conn(t, f.dsn, "outbox_owner").Exec(ctx, `DELETE FROM inbox.inbox_receipts WHERE projection_version = 1`); ckSQLState(err) != "OB202" {
		t.Fatalf("direct receipt delete: %v, want OB202", err)
	}
}

// R-PV-2 (c): one cutover of a projection at a time. While a first cutover's transaction is open
// (its call has returned: the barrier), a second one is OB804 at once; after it ends the second
// proceeds.
func TestCutoverConcurrentOB804(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := pvSetup(t)
	q2 := cvRegisterSet2(t, f.reg)
	cc := dxAppend(t, f.admin, dxRunCreated, "run-cc", 1)
	must(t, cvReceipt(t, f, 1, "", cc)) // the projector's inbox is this database (else OB810)
	build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
	must(t, err)
	cvDrain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
	must(t, err)

	first := testdb.Conn(t, f.dsn, "outbox_projector")
	tx, err := first.Begin(ctx)
	must(t, err)
	r1, err := pgcall.CutoverProjection(ctx, tx, build.BuildID, fz.BuildToken, q2)
	must(t, err)
	if r1.Result != pgcall.CutoverBlocked {
		t.Fatalf("first cutover: %+v (the shadow has no receipt)", r1)
	}
	if _, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2); ckSQLState(err) != "OB804" ||
		!errors.Is(err, pgcall.ErrCutoverInProgress) {
		t.Fatalf("concurrent cutover: %v, want OB804", err)
	}
	must(t, tx.Rollback(ctx))
	r2, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
	must(t, err)
	if r2.Result != pgcall.CutoverBlocked || r2.ProofID == r1.ProofID {
		t.Fatalf("cutover after the first ended: %+v", r2)
	}
	if n := ckCount(t, f.admin, `SELECT count(*) FROM outbox.cutover_readiness_proofs`); n != 1 {
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
	f := pvSetup(t)
	q1 := cvQuartet(t, f.admin, 1)
	q2 := cvRegisterSet2(t, f.reg)
	x := dxAppend(t, f.admin, dxRunCreated, "run-rl", 1)
	build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
	must(t, err)
	cvDrain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
	must(t, err)
	must(t, cvReceipt(t, f, 2, fz.BuildToken, x))
	observe := func(aggregate string, rev int64) string {
		o, err := pgcall.ObserveRevision(ctx, f.cons, pgcall.ObserveRevisionParams{ConsumerName: "operations_projector",
			ProjectionName: "operations_timeline", ProjectionVersion: 2, AggregateID: aggregate, AggregateRevision: rev,
			BuildToken: fz.BuildToken})
		must(t, err)
		return o
	}
	if observe("run-rl", 1) != pgcall.RevisionApply || observe("run-rl-gap", 2) != pgcall.RevisionGap {
		t.Fatal("fixture: revisions")
	}
	lease := dxClaimOne(t, f.disp, dxWorkerA, dxLongLease, dxDestCoreOps)
	if lease.EventID != x {
		t.Fatalf("leased %s, want %s", lease.EventID, x)
	}

	if _, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q1); ckSQLState(err) != "22023" {
		t.Fatalf("cutover activating a set that targets @1: %v, want 22023", err)
	}
	bad := q2
	bad.DefinitionDigest = strings.Repeat("0", 64)
	if _, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, bad); ckSQLState(err) != "OB101" {
		t.Fatalf("cutover with an unregistered quartet: %v, want OB101", err)
	}
	before := cvState(t, f)
	r, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
	must(t, err)
	if r.Result != pgcall.CutoverBlocked || strings.Join(r.Reasons, " ") != "leasesInFlight=1 openGaps=1" {
		t.Fatalf("cutover with a lease in flight and an open gap: %+v", r)
	}
	if after := cvState(t, f); after != before {
		t.Fatalf("a blocked cutover changed state:\n  %s\n  %s", before, after)
	}

	// Retire the shadow (nothing targets it): its frozen build is abandoned, then drop its rows.
	must(t, pgcall.RetireProjectionVersion(ctx, f.reg, "operations_timeline", 2))
	if p := cvProgress(t, f, build.BuildID); p.State != pgcall.CandidateAbandoned {
		t.Fatalf("progress of the retired version's build: %+v", p)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, f.proj, build.BuildID, fz.BuildToken, 5); ckSQLState(err) != "OB001" {
		t.Fatalf("claim after retire: %v, want OB001", err)
	}
	if _, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2); ckSQLState(err) != "OB802" {
		t.Fatalf("build of a retired version: %v, want OB802", err)
	}
	var rows [3]int
	for i, tbl := range []string{"inbox.inbox_receipts", "inbox.inbox_revision_progress", "inbox.inbox_revision_gaps"} {
		rows[i] = ckCount(t, f.admin, `SELECT count(*) FROM `+tbl+` WHERE projection_version = 2`)
	}
	dropped, err := pgcall.DropRetiredProjection(ctx, f.reg, "operations_timeline", 2)
	must(t, err)
	if rows[0] != 1 || rows[1] < 1 || rows[2] < 1 || dropped != int64(rows[0]+rows[1]+rows[2]) {
		t.Fatalf("dropped %d rows; the version had receipts/progress/gaps %v", dropped, rows)
	}
	for _, tbl := range []string{"inbox.inbox_receipts", "inbox.inbox_revision_progress", "inbox.inbox_revision_gaps"} {
		if n := ckCount(t, f.admin, `SELECT count(*) FROM `+tbl+` WHERE projection_version = 2`); n != 0 {
			t.Fatalf("%s keeps %d rows of the dropped version", tbl, n)
		}
	}
	if got := pvVersions(t, f.admin); got != "operations_timeline@1:active:unknown operations_timeline@2:retired:"+strings.Repeat("c", 64) {
		t.Fatalf("registry after drop: %s (registry rows stay)", got)
	}
}

// R-PV-3, R-RT-2: after a forward cutover the former version, once untargeted and outside its
// window, retires; drop_retired_projection deletes its revision progress but keeps the receipt
// that acknowledged a live delivery (evidence), and the ack still names it.
func TestCutoverDropKeepsAcknowledgedReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := pvSetup(t)
	q2 := cvRegisterSet2(t, f.reg)
	x := dxAppend(t, f.admin, dxRunCreated, "run-ack", 1)
	c := dxClaimOne(t, f.disp, dxWorkerA, dxLongLease, dxDestCoreOps)
	if c.EventID != x || c.RequiredProjectionVersion == nil || *c.RequiredProjectionVersion != 1 {
		t.Fatalf("claimed %+v", c)
	}
	ack, rc := validAck(t, c)
	if _, err := pgcall.ObserveRevision(ctx, f.cons, pgcall.ObserveRevisionParams{ConsumerName: c.ConsumerName,
		ProjectionName: "operations_timeline", ProjectionVersion: 1, AggregateID: "run-ack", AggregateRevision: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.RecordReceipt(ctx, f.cons, pgcall.RecordReceiptParams{ConsumerName: c.ConsumerName,
		ProjectionName: "operations_timeline", ProjectionVersion: 1, EventEnvelope: c.EventEnvelope, Receipt: rc}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.AckDelivery(ctx, f.disp, fenceOf(c), ack, rc); err != nil {
		t.Fatal(err)
	}

	build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
	must(t, err)
	cvDrain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
	must(t, err)
	must(t, cvReceipt(t, f, 2, fz.BuildToken, x))
	if r, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2); err != nil || r.Result != pgcall.CutoverSwitched {
		t.Fatalf("cutover: %+v, %v", r, err)
	}
	if _, err := f.admin.Exec(ctx, `UPDATE outbox.kernel_settings SET value = 0 WHERE name = 'projection_rollback_window_seconds'`); err != nil {
		t.Fatal(err)
	}
	must(t, pgcall.RetireProjectionVersion(ctx, f.reg, "operations_timeline", 1))
	dropped, err := pgcall.DropRetiredProjection(ctx, f.reg, "operations_timeline", 1)
	must(t, err)
	if dropped != 1 || ckCount(t, f.admin, `SELECT count(*) FROM inbox.inbox_revision_progress WHERE projection_version = 1`) != 0 {
		t.Fatalf("dropped %d rows, want the one progress row of @1", dropped)
	}
	if n := ckCount(t, f.admin, `SELECT count(*) FROM inbox.inbox_receipts r JOIN outbox.outbox_deliveries d
		ON d.destination = r.destination AND d.event_id = r.event_id AND d.ack_receipt_ref = r.receipt_ref
		WHERE r.projection_version = 1 AND r.event_id = $1::uuid`, x); n != 1 {
		t.Fatalf("%d acknowledged receipts of @1 left, want 1 (evidence is never dropped)", n)
	}
}
