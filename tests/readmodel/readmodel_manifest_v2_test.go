package readmodel

// CompletenessProofManifest@2 (sql/037_completeness_manifest_v2.sql; issue 24 item 5): the
// receipt anti-join is taken against each projection's active version, the manifest records the
// versions, a proof of version 1 stays verifiable, and search_exact_id follows the active pointer.

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// m2Versions is the manifest's projectionVersions array.
func m2Versions(t *testing.T, m rmManifest) string {
	t.Helper()
	var d struct {
		ManifestSchemaVersion int             `json:"manifestSchemaVersion"`
		ProjectionVersions    json.RawMessage `json:"projectionVersions"`
		Parts                 []struct {
			ReceiptEvidence string `json:"receiptEvidence"`
		} `json:"parts"`
	}
	testfix.Must(t, json.Unmarshal(m.Raw, &d))
	if d.ManifestSchemaVersion != 2 || len(d.Parts) != 1 || d.Parts[0].ReceiptEvidence != "active_version_receipts" {
		t.Fatalf("manifest is not a @2 producer proof: %s", m.Raw)
	}
	return string(d.ProjectionVersions)
}

// m2Index writes the projector's exact-id index rows of one event under a version (the reference
// projector writes them in its apply transaction; here the operation differs per version so a
// search shows which version answered).
func m2Index(t *testing.T, db *pgx.Conn, version int, event, runID, op string) {
	t.Helper()
	_, err := db.Exec(context.Background(), `INSERT INTO inbox.projection_exact_ids
		(consumer_name, projection_name, projection_version, id_kind, id_value, event_id, operation_id)
		VALUES ('operations_projector', 'operations_timeline', $1, 'eventId', $2::text, $2::uuid, $4),
		       ('operations_projector', 'operations_timeline', $1, 'runId', $3, $2::uuid, $4)`, version, event, runID, op)
	testfix.Must(t, err)
}

// R-OP-2, R-OP-3, R-PV-2, R-PV-3: before the cutover the proof is complete against version 1 and
// says so; a blocked cutover changes neither the proof nor the search; after the switch the same
// acknowledged deliveries (still frozen to version 1) count only through version 2's receipts,
// the new proof records version 2, the old proof is stale, a version-1 manifest of the same
// state still re-derives; a missing active-version receipt is a receipt anti-join entry; the
// search answers from version 2's index only.
func TestCompletenessManifestV2FollowsActiveVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	q2 := projectionfix.RegisterSet2(t, f.Reg)
	a := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-m2-a", 1)
	b := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-m2-b", 1)
	for _, id := range []string{a, b} {
		testfix.Must(t, projectionfix.Receipt(t, f, 1, "", id))
	}
	m2Index(t, f.Admin, 1, a, "run-m2-a", "op-v1-a")
	m2Index(t, f.Admin, 1, b, "run-m2-b", "op-v1-b")
	rmDrain(t, rmBundle{Bundle: f.Bundle, aud: f.Auditor})

	s1 := rmTake(t, f.Auditor, `{}`)
	m1 := rmRead(t, f.Auditor, s1)
	if s1.Status != rmComplete {
		t.Fatalf("before the cutover: %s %s", s1.Status, m1.Raw)
	}
	if got := m2Versions(t, m1); got != `[{"activeVersion":1,"projectionName":"operations_timeline"}]` {
		t.Fatalf("projectionVersions before the cutover: %s", got)
	}
	sc := kernelfix.CompileContractSchemas(t)["CompletenessProofManifest@2"]
	if sc == nil {
		t.Fatal("no CompletenessProofManifest@2 schema")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(m1.Raw))
	testfix.Must(t, err)
	if err := sc.Validate(doc); err != nil {
		t.Fatalf("the @2 manifest does not follow its schema: %v", err)
	}
	hit := func(want string) {
		t.Helper()
		hs := rmSearch(t, f.Auditor, "runId", "run-m2-a")
		if len(hs) != 1 || hs[0].Result != "matched" || hs[0].OperationID == nil || *hs[0].OperationID != want {
			t.Fatalf("search runId run-m2-a: %+v, want matched %s", hs, want)
		}
		hs = rmSearch(t, f.Auditor, "eventId", a)
		if len(hs) != 1 || hs[0].OperationID == nil || *hs[0].OperationID != want {
			t.Fatalf("search eventId %s: %+v, want its operation %s", a, hs, want)
		}
	}
	hit("op-v1-a")
	rmNoMatch(t, f.Auditor, "runId", "run-m2-none", "not_found")

	// The shadow has a only: the cutover is blocked and nothing the proof reads changes.
	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
	testfix.Must(t, projectionfix.Receipt(t, f, 2, build.BuildToken, a))
	m2Index(t, f.Admin, 2, a, "run-m2-a", "op-v2-a")
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	blocked, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if blocked.Result != pgcall.CutoverBlocked {
		t.Fatalf("cutover with b missing in the shadow: %+v", blocked)
	}
	if got := rmCheck(t, f.Auditor, s1.ManifestID); got != "verified_current" {
		t.Fatalf("proof after the blocked cutover: %s, want verified_current", got)
	}
	hit("op-v1-a") // the shadow's index rows never answer

	// Switch: a and b are frozen to version 1 (acknowledged there); version 2 has both receipts.
	testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, b))
	m2Index(t, f.Admin, 2, b, "run-m2-b", "op-v2-b")
	sw, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if sw.Result != pgcall.CutoverSwitched {
		t.Fatalf("cutover of the complete shadow: %+v", sw)
	}
	if got := rmCheck(t, f.Auditor, s1.ManifestID); got != "stale/source_changed" {
		t.Fatalf("the version-1 proof after the switch: %s, want stale/source_changed", got)
	}
	s2 := rmTake(t, f.Auditor, `{}`)
	m2 := rmRead(t, f.Auditor, s2)
	if s2.Status != rmComplete || rmGuardCount(t, m2, "receiptAntiJoin") != 0 {
		t.Fatalf("after the switch: %s %s", s2.Status, m2.Raw)
	}
	if got := m2Versions(t, m2); got != `[{"activeVersion":2,"projectionName":"operations_timeline"}]` {
		t.Fatalf("projectionVersions after the switch: %s", got)
	}
	hit("op-v2-a")
	rmNoMatch(t, f.Auditor, "runId", "run-m2-none", "not_found")

	// A proof of manifest version 1 (taken before migration 037) is re-derived in its own shape.
	var v1doc, v1sha string
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT document, manifest_sha256 FROM outbox._completeness_document('{}', 1)`).Scan(&v1doc, &v1sha))
	if !bytes.Contains([]byte(v1doc), []byte(`,"manifestSchemaVersion":1,`)) || bytes.Contains([]byte(v1doc), []byte(`projectionVersions`)) {
		t.Fatalf("version-1 document: %s", v1doc)
	}
	var v1id string
	testfix.Must(t, f.Admin.QueryRow(ctx, `INSERT INTO outbox.completeness_manifests (manifest_sha256, source_filter, status, member_count, document)
		VALUES ($1, '{}', 'complete_for_supported_scope', 2, $2) RETURNING manifest_id::text`, v1sha, v1doc).Scan(&v1id))
	if got := rmCheck(t, f.Auditor, v1id); got != "verified_current" {
		t.Fatalf("stored version-1 proof: %s, want verified_current", got)
	}

	// The active version's receipt of b is lost (a superuser bypassing the guard): b's delivery is
	// still acknowledged at version 1, yet the @2 anti-join names it; the search is inconclusive.
	_, err = f.Admin.Exec(ctx, `SET session_replication_role = replica;
		DELETE FROM inbox.inbox_receipts WHERE projection_version = 2 AND event_id = '`+b+`';
		RESET session_replication_role`)
	testfix.Must(t, err)
	if got := rmCheck(t, f.Auditor, s2.ManifestID); got != "stale/source_changed" {
		t.Fatalf("proof after the lost receipt: %s, want stale/source_changed", got)
	}
	s3 := rmTake(t, f.Auditor, `{}`)
	m3 := rmRead(t, f.Auditor, s3)
	if s3.Status != rmPartial || rmGuardCount(t, m3, "receiptAntiJoin") != 1 {
		t.Fatalf("with version 2's receipt of b missing: %s %s", s3.Status, m3.Raw)
	}
	if got := rmCheck(t, f.Auditor, v1id); got != "verified_current" {
		t.Fatalf("the version-1 view (acknowledged deliveries) of the same state: %s", got)
	}
	rmNoMatch(t, f.Auditor, "runId", "run-m2-none", "inconclusive/source_gap")
}
