package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const rmComplete, rmPartial = "complete_for_supported_scope", "partial_source_gap"

var rmGuardNames = []string{"archiveIntegrity", "nonTerminalDeliveries", "openQuarantine", "openRevisionGaps",
	"receiptAntiJoin", "unsupportedSchemas"}

// rmExpect takes a proof of scope and asserts the refinement both ways (status complete iff
// every guard is evaluated and 0), the wanted status, exactly the wanted non-zero guards, and
// that the fresh proof re-checks as verified_current.
func rmExpect(t *testing.T, b rmBundle, label, scope, status string, nonZero ...string) (pgcall.CompletenessSnapshot, rmManifest) {
	t.Helper()
	s := rmTake(t, b.aud, scope)
	m := rmRead(t, b.aud, s)
	if (m.Status == rmComplete) != rmAllZero(m) {
		t.Fatalf("%s: refinement broken: status %s, guards %s", label, m.Status, m.Raw)
	}
	if m.Status != status {
		t.Fatalf("%s: status %s, want %s: %s", label, m.Status, status, m.Raw)
	}
	want := map[string]bool{}
	for _, g := range nonZero {
		want[g] = true
	}
	for _, g := range rmGuardNames {
		if n := rmGuardCount(t, m, g); (n > 0) != want[g] {
			t.Fatalf("%s: guard %s = %d, want non-zero %v", label, g, n, want[g])
		}
	}
	if f := rmCheck(t, b.aud, s.ManifestID); f != "verified_current" {
		t.Fatalf("%s: a fresh proof re-checks as %s", label, f)
	}
	return s, m
}

// R-OP-2: proof/guard refinement both ways. For each state one guard (or a known set of them)
// becomes non-zero: the proof is complete_for_supported_scope exactly when every guard is 0,
// and each guard counts exactly its own condition. A scope filter leaves out what is outside it.
func TestCompletenessRefinement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	rmExpect(t, b, "empty database", `{}`, rmComplete)

	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-rf-1", 1) // core_operations: a projection target
	rmExpect(t, b, "run pending", `{}`, rmPartial, "nonTerminalDeliveries", "receiptAntiJoin")
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-rf-1", 1) // metering: no projection
	rmExpect(t, b, "metering pending", `{"destinations":["metering_input_processor"]}`, rmPartial, "nonTerminalDeliveries")
	rmDrain(t, b)
	_, m := rmExpect(t, b, "drained", `{}`, rmComplete)
	if m.MemberCount != 2 || len(m.KindSets) != 2 {
		t.Fatalf("members %d, kind sets %d; want 2, 2", m.MemberCount, len(m.KindSets))
	}

	// A non-retryable quarantine of a metering delivery (unsupported schema).
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-rf-2", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "unsupported_schema", "unsupported_schema", nil); err != nil {
		t.Fatal(err)
	}
	rmExpect(t, b, "quarantined unsupported", `{}`, rmPartial, "openQuarantine", "unsupportedSchemas")
	// Out of the scope: the core_operations part is complete on its own.
	rmExpect(t, b, "scope core_operations", `{"destinations":["core_operations"]}`, rmComplete)
	rmExpect(t, b, "scope run.created", `{"eventTypes":["run.created@2.0"]}`, rmComplete)

	// Another quarantine reason: open quarantine, not an unsupported schema.
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-rf-3", 1)
	c = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	rmExpect(t, b, "quarantined rejected", `{"eventTypes":["execution.attempt-eligibility.finalized@1"]}`, rmPartial,
		"openQuarantine", "unsupportedSchemas") // the earlier unsupported one is still in this scope

	// An open revision gap at the projector (its consumer answered awaiting_revision).
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-rf-2", 1)
	c = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	if _, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "awaiting_revision", nil); err != nil {
		t.Fatal(err)
	}
	rmExpect(t, b, "revision gap", `{"destinations":["core_operations"]}`, rmPartial,
		"nonTerminalDeliveries", "receiptAntiJoin", "openRevisionGaps")
}

// R-OP-2, R-RT-3: archived members stay members (location is not identity): a proof taken before
// an archive run still verifies after it; an archive that fails verification (the retention
// hook reports it) makes the proof partial and the earlier proof stale.
func TestCompletenessArchiveHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	for i := 0; i < 3; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-ar-"+testfix.NewUUID(), 1)
	}
	rmDrain(t, b)
	before, _ := rmExpect(t, b, "before archive", `{}`, rmComplete)
	ret := testdb.Conn(t, b.Dsn, "outbox_retention")
	r, err := pgcall.ArchiveEvents(ctx, ret, 0, 100)
	if err != nil || r.Archived != 3 {
		t.Fatalf("archive: %+v %v", r, err)
	}
	if f := rmCheck(t, b.aud, before.ManifestID); f != "verified_current" {
		t.Fatalf("archiving changed the proof: %s", f)
	}
	after, _ := rmExpect(t, b, "after archive", `{}`, rmComplete)
	if after.ManifestSHA256 != before.ManifestSHA256 {
		t.Fatalf("same member set and guards, different manifest digests")
	}
	tx, err := b.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM outbox.archived_deliveries WHERE event_id = (SELECT min(event_id::text)::uuid FROM outbox.archived_events)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rmExpect(t, b, "archive tampered", `{}`, rmPartial, "archiveIntegrity")
	if f := rmCheck(t, b.aud, before.ManifestID); f != "stale/source_changed" {
		t.Fatalf("proof after a failing archive: %s", f)
	}
}

// R-OP-2: no scalar position, max id, count or time stands in for set equality. A producer
// transaction that began before the proof appends an event OLDER than every member (smaller
// event id, earlier occurredAt, earlier created_at) and commits after the proof: the proof
// turns stale - also once that event is delivered (member sets differ, counts alone do not).
func TestCompletenessOlderEventTurnsStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	late := testdb.Conn(t, b.Dsn, "")
	tx, err := late.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	old := testfix.Envelope(kernelfix.Metering, "1", "att-old", 1)
	old["eventId"] = "00000000-0000-4000-8000-000000000001"
	old["occurredAt"] = "2001-01-01T00:00:00.000000Z"
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_producer`); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(old)
	if _, err := pgcall.AppendEvent(ctx, tx, pgcall.AppendParams{Event: raw}); err != nil {
		t.Fatal(err)
	}
	// Barrier: the late transaction holds its append uncommitted while others go on.
	for i := 0; i < 3; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-new-"+testfix.NewUUID(), 1)
	}
	rmDrain(t, b)
	s, m := rmExpect(t, b, "before the late commit", `{}`, rmComplete)
	for _, mb := range m.Members {
		if mb.EventID <= old["eventId"].(string) {
			t.Fatalf("fixture: member %s is not newer than the late event", mb.EventID)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var createdBefore bool
	if err := b.Admin.QueryRow(ctx, `SELECT (SELECT created_at FROM outbox.outbox_events WHERE event_id = $1::uuid)
		< (SELECT min(created_at) FROM outbox.outbox_events WHERE event_id <> $1::uuid)`, old["eventId"]).Scan(&createdBefore); err != nil {
		t.Fatal(err)
	}
	if !createdBefore {
		t.Fatalf("fixture: the late event is not older by created_at")
	}
	if f := rmCheck(t, b.aud, s.ManifestID); f != "stale/source_changed" {
		t.Fatalf("after an older event committed: %s, want stale/source_changed", f)
	}
	rmDrain(t, b)
	if f := rmCheck(t, b.aud, s.ManifestID); f != "stale/source_changed" {
		t.Fatalf("after the older event was delivered: %s, want stale/source_changed", f)
	}
	s2, m2 := rmExpect(t, b, "new proof", `{}`, rmComplete)
	if s2.ManifestSHA256 == s.ManifestSHA256 || m2.Members[0].EventID != old["eventId"] {
		t.Fatalf("the new proof does not contain the older event first")
	}
}

// R-OP-2: a verified proof turns stale after any new in-scope event, a new gap, a quarantine or
// a lost receipt; an event outside the scope leaves it verified_current.
func TestCompletenessStaleReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-st-0", 1)
	rmDrain(t, b)
	fresh := func(label string) pgcall.CompletenessSnapshot {
		t.Helper()
		rmDrain(t, b)
		s, _ := rmExpect(t, b, label, `{"destinations":["core_operations"]}`, rmComplete)
		return s
	}
	wantStale := func(label string, s pgcall.CompletenessSnapshot) {
		t.Helper()
		if f := rmCheck(t, b.aud, s.ManifestID); f != "stale/source_changed" {
			t.Fatalf("%s: %s, want stale/source_changed", label, f)
		}
	}
	// out of scope: still verified
	s := fresh("base")
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-st-1", 1)
	if f := rmCheck(t, b.aud, s.ManifestID); f != "verified_current" {
		t.Fatalf("an out-of-scope event changed the proof: %s", f)
	}
	// new in-scope event
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-st-1", 1)
	wantStale("new event", s)
	// new gap
	s = fresh("before gap")
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-st-2", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	s2 := rmTake(t, b.aud, `{"destinations":["core_operations"]}`)
	if _, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "awaiting_revision", nil); err != nil {
		t.Fatal(err)
	}
	wantStale("new gap", s2)
	wantStale("new gap (complete proof)", s)
	// quarantine
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE status = 'pending'`); err != nil {
		t.Fatal(err)
	}
	c = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoreOps)
	s3 := rmTake(t, b.aud, `{"destinations":["core_operations"]}`)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "unsupported_schema", "unsupported_schema", nil); err != nil {
		t.Fatal(err)
	}
	wantStale("quarantine", s3)
	// a lost receipt: the acknowledged delivery's receipt evidence disappears (e.g. a restore)
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-st-3", 1)
	rmDrain(t, b)
	s4 := rmTake(t, b.aud, `{"eventTypes":["run.created@2.0"],"destinations":["core_operations"]}`)
	tx, err := b.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SET LOCAL session_replication_role = replica`,
		`UPDATE outbox.outbox_deliveries SET status = 'pending', delivered_at = NULL, ack_receipt_digest = NULL,
		        ack_receipt_ref = NULL, ack_receipt_kind = NULL
		  WHERE destination = 'core_operations' AND aggregate_id = 'run-st-3'`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wantStale("lost receipt", s4)
}

// R-OP-2: a proof spanning a delivery-set switch binds each event to its own quartet.
func TestCompletenessDeliverySetSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	e1 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-sw-1", 1)
	if _, err := b.Admin.Exec(ctx, "SET ROLE outbox_registrar"); err != nil {
		t.Fatal(err)
	}
	q2, err := pgcall.RegisterDeliverySet(ctx, b.Admin, kernelfix.MutateRelease(t, func(m map[string]any) { m["deliverySetVersion"] = 2 }), "v2")
	if err == nil {
		err = pgcall.ActivateDeliverySet(ctx, b.Admin, q2)
	}
	if _, rerr := b.Admin.Exec(ctx, "RESET ROLE"); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	e2 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-sw-2", 1)
	rmDrain(t, b)
	_, m := rmExpect(t, b, "across the switch", `{}`, rmComplete)
	got := map[string]int{}
	digests := map[int]string{}
	for _, mb := range m.Members {
		got[mb.EventID] = mb.DeliverySet.Version
		digests[mb.DeliverySet.Version] = mb.DeliverySet.DefinitionDigest
	}
	if got[e1] != 1 || got[e2] != 2 || digests[2] != q2.DefinitionDigest || digests[1] == digests[2] {
		t.Fatalf("members not bound to their own quartets: %v %v", got, digests)
	}
}

// R-OP-2: a tampered manifest is detected by its digest (unverified/definition_mismatch; the
// outsider's recomputation differs too); manifests are immutable for every role (OB202);
// OB501 outside REPEATABLE READ; the dispatcher role may not call the read model (42501);
// the same state and scope give the same manifest_sha256 (deterministic).
func TestCompletenessManifestIntegrity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-tm-1", 1)
	rmDrain(t, b)
	s, m := rmExpect(t, b, "base", `{}`, rmComplete)
	s2 := rmTake(t, b.aud, `{}`)
	if s2.ManifestSHA256 != s.ManifestSHA256 || s2.ManifestID == s.ManifestID {
		t.Fatalf("not deterministic: %s vs %s", s.ManifestSHA256, s2.ManifestSHA256)
	}
	if s3 := rmTake(t, b.aud, `{"eventTypes":["execution.attempt-eligibility.finalized@1","execution.attempt-eligibility.finalized@1"]}`); s3.Status != rmComplete {
		t.Fatalf("duplicate literal in scope: %+v", s3)
	}
	// OB501 outside REPEATABLE READ
	_, err := pgcall.TakeCompletenessSnapshot(ctx, b.aud, json.RawMessage(`{}`))
	if !errors.Is(err, pgcall.ErrSnapshotIsolation) {
		t.Fatalf("READ COMMITTED snapshot: %v, want OB501", err)
	}
	// malformed scopes
	for _, sc := range []string{`[]`, `{"eventTypes":"x"}`, `{"eventTypes":[]}`, `{"foo":[]}`, `{"destinations":["Core"]}`, `{"eventTypes":["run.*"]}`} {
		tx, _ := b.aud.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		_, err := pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(sc))
		_ = tx.Rollback(ctx)
		kernelfix.WantState(t, err, "22023")
	}
	// the dispatcher may not call the read model
	for _, q := range []string{`SELECT outbox.check_completeness('` + s.ManifestID + `')`,
		`SELECT outbox.read_manifest('` + s.ManifestID + `')`, `SELECT outbox.search_exact_id('runId', 'x')`} {
		_, err := b.Disp.Exec(ctx, q)
		kernelfix.WantState(t, err, "42501")
	}
	// immutable, the owner included
	for _, q := range []string{`UPDATE outbox.completeness_manifests SET status = 'unknown'`, `DELETE FROM outbox.completeness_manifests`,
		`TRUNCATE outbox.completeness_manifests`} {
		_, err := b.Admin.Exec(ctx, q)
		kernelfix.WantState(t, err, "OB202")
	}
	// tampered (triggers bypassed by a superuser): one member digest changed
	tampered := strings.Replace(string(m.Raw), m.Members[0].EventEnvelopeSHA256, strings.Repeat("0", 64), 1)
	tx, err := b.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox.completeness_manifests SET document = $2 WHERE manifest_id = $1::uuid`, s.ManifestID, tampered); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if f := rmCheck(t, b.aud, s.ManifestID); f != "unverified/definition_mismatch" {
		t.Fatalf("tampered manifest: %s", f)
	}
	raw, _ := pgcall.ReadManifest(ctx, b.aud, s.ManifestID)
	if rmSHA(raw) == s.ManifestSHA256 {
		t.Fatalf("the outsider's digest of the tampered document still matches")
	}
	if f := rmCheck(t, b.aud, s2.ManifestID); f != "verified_current" {
		t.Fatalf("the untouched twin: %s", f)
	}
	if f := rmCheck(t, b.aud, testfix.NewUUID()); f != "unverified/no_completed_snapshot" {
		t.Fatalf("unknown id: %s", f)
	}
}
