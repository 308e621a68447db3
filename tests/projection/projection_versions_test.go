package projection

// Projection versions, slice R-PV-1 (SPEC §11b, §13; sql/031_projection_versions.sql,
// docs/projection-versions.md): the registry (insert-or-compare, OB801), the versions the
// migration and a delivery-set activation register, shadow builds (OB802 for an active or
// unregistered version, abandon-and-rotate on a second start), claim_rebuild_sources (every
// retained and archived event and every accepted observation exactly once, in the documented
// order, across batches and concurrent claimers; OB001 for a stale token) and the inbox's
// version check (a shadow needs its live build token; unregistered → OB802; active unchanged).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// R-PV-1: insert-or-compare; the first version of a projection is active, later ones shadow;
// another digest for a registered version is OB801 ('unknown' included); out-of-form input is
// 22023; only outbox_registrar may register; rows keep their identity (OB202) and every
// registration leaves a history row.
func TestProjectionVersionRegisterInsertOrCompare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	d1, d2 := strings.Repeat("a", 64), strings.Repeat("b", 64)

	if got := projectionfix.Versions(t, admin); got != "" {
		t.Fatalf("fresh database (no active delivery set) registers %q, want nothing", got)
	}
	steps := []struct {
		name    string
		version int
		digest  string
		want    string
		state   string
	}{
		{"timeline", 1, d1, pgcall.ProjectionVersionRegistered, ""},
		{"timeline", 1, d1, pgcall.ProjectionVersionExisting, ""},
		{"timeline", 1, d2, "", "OB801"},
		{"timeline", 1, pgcall.UnknownSemanticDigest, "", "OB801"},
		{"timeline", 2, d2, pgcall.ProjectionVersionRegistered, ""},
		{"timeline", 3, pgcall.UnknownSemanticDigest, pgcall.ProjectionVersionRegistered, ""},
		{"timeline", 3, pgcall.UnknownSemanticDigest, pgcall.ProjectionVersionExisting, ""},
		{"timeline", 3, d1, "", "OB801"},
		{"other", 7, d1, pgcall.ProjectionVersionRegistered, ""},
		{"Bad Name", 1, d1, "", "22023"},
		{"timeline", 0, d1, "", "22023"},
		{"timeline", 4, "ABC", "", "22023"},
		{"timeline", 4, strings.Repeat("A", 64), "", "22023"},
	}
	for i, s := range steps {
		got, err := pgcall.RegisterProjectionVersion(ctx, reg, s.name, s.version, s.digest)
		if st := consumerfix.SQLState(err); st != s.state || got != s.want {
			t.Fatalf("step %d (%s@%d %s): %q, %v; want %q / SQLSTATE %q", i, s.name, s.version, s.digest, got, err, s.want, s.state)
		}
		if s.state == "OB801" && !errors.Is(err, pgcall.ErrProjectionVersionConflict) {
			t.Fatalf("step %d: OB801 is not ErrProjectionVersionConflict: %v", i, err)
		}
	}
	want := "other@7:active:" + d1 + " timeline@1:active:" + d1 + " timeline@2:shadow:" + d2 + " timeline@3:shadow:unknown"
	if got := projectionfix.Versions(t, admin); got != want {
		t.Fatalf("registry\n  %s\nwant\n  %s", got, want)
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM outbox.projection_version_history`); n != 4 {
		t.Fatalf("%d history rows, want one per registration (4)", n)
	}

	// Only the registrar registers.
	for _, role := range []string{"outbox_consumer", "outbox_projector", "outbox_dispatcher", "outbox_auditor"} {
		_, err := pgcall.RegisterProjectionVersion(ctx, testdb.Conn(t, dsn, role), "timeline", 9, d1)
		if consumerfix.SQLState(err) != "42501" {
			t.Errorf("%s registers: %v, want 42501", role, err)
		}
	}
	// Identity and history are immutable, for the owner too.
	owner := testdb.Conn(t, dsn, "outbox_owner")
	for _, q := range []string{
		`UPDATE outbox.projection_versions SET semantic_definition_sha256 = 'unknown' WHERE projection_name = 'timeline' AND projection_version = 1`,
		`UPDATE outbox.projection_versions SET projection_version = 5 WHERE projection_name = 'timeline' AND projection_version = 2`,
		`DELETE FROM outbox.projection_versions WHERE projection_name = 'other'`,
		`TRUNCATE outbox.projection_versions CASCADE`,
		`UPDATE outbox.projection_version_history SET state = 'retired'`,
		`DELETE FROM outbox.projection_version_history`,
	} {
		if _, err := owner.Exec(ctx, q); consumerfix.SQLState(err) != "OB202" {
			t.Errorf("%s: %v, want OB202", q, err)
		}
	}
}

// R-PV-1: the migration registers, as active with semantic digest 'unknown', the versions the
// active delivery set targets when it runs (the reference release: operations_timeline@1),
// and nothing for a database without an active set; a later activation that introduces a
// projection registers it, and leaves a projection that already has versions alone.
func TestProjectionVersionMigrationRegistersActiveTargets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, active := range []bool{true, false} {
		conn, err := pgx.Connect(ctx, kernelfix.FreshDatabase(t))
		testfix.Must(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		m, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
		testfix.Must(t, err)
		testfix.Must(t, m.LoadMigrations(migrate.FS()))
		testfix.Must(t, m.MigrateTo(ctx, 30))
		if active {
			testfix.ActivateReference(t, conn)
		}
		testfix.Must(t, m.MigrateTo(ctx, 31))
		want := ""
		if active {
			want = "operations_timeline@1:active:unknown"
		}
		if got := projectionfix.Versions(t, conn); got != want {
			t.Fatalf("active set %v: migration registered %q, want %q", active, got, want)
		}
		if !active {
			// The first activation after the migration registers the set's targets.
			testfix.ActivateReference(t, conn)
			if got := projectionfix.Versions(t, conn); got != "operations_timeline@1:active:unknown" {
				t.Fatalf("activation registered %q", got)
			}
		}
	}

	// On head: a projection that already has a version is not registered again by activation;
	// since R-PV-2 an activation that would retarget it (here from the active @3 to @1) is
	// refused outright (OB808) and the registry stays untouched.
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	consumerfix.RegisterProjectionVersion(t, reg, "operations_timeline", 3)
	q, err := pgcall.RegisterDeliverySet(ctx, reg, testfix.ReferenceRelease(t), "oceanway-first-release")
	testfix.Must(t, err)
	if err := pgcall.ActivateDeliverySet(ctx, reg, q); consumerfix.SQLState(err) != "OB808" || !errors.Is(err, pgcall.ErrRetargetOutsideCutover) {
		t.Fatalf("activation retargeting operations_timeline@3 to @1: %v, want OB808", err)
	}
	if got := projectionfix.Versions(t, admin); got != "operations_timeline@3:active:unknown" {
		t.Fatalf("activation over an existing projection: %q, want it untouched", got)
	}
}

// R-PV-1: a build starts only on a registered shadow version (OB802 for the active one and for
// an unregistered one); a second start abandons the live build (its token: OB001) and rotates.
func TestProjectionVersionStartShadowBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	for _, v := range []int{1, 9} {
		if _, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", v); consumerfix.SQLState(err) != "OB802" ||
			!errors.Is(err, pgcall.ErrProjectionNotRegistered) {
			t.Fatalf("start on operations_timeline@%d: %v, want OB802", v, err)
		}
	}
	if _, err := pgcall.StartShadowBuild(ctx, f.Reg, "operations_timeline", 2); consumerfix.SQLState(err) != "42501" {
		t.Fatalf("registrar starts a build: %v, want 42501", err)
	}
	b1, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, b1.BuildID, b1.BuildToken, 1); err != nil {
		t.Fatalf("claim with the live token: %v", err)
	}
	b2, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	if b2.BuildID == b1.BuildID || b2.BuildToken == b1.BuildToken {
		t.Fatalf("second start did not rotate: %+v %+v", b1, b2)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, b1.BuildID, b1.BuildToken, 1); !errors.Is(err, pgcall.ErrFencingRejected) {
		t.Fatalf("claim with the abandoned build's token: %v, want OB001", err)
	}
	var states string
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT string_agg(state || ':' || (ended_at IS NOT NULL), ' ' ORDER BY started_at) FROM outbox.projection_builds`).Scan(&states))
	if states != "abandoned:true building:false" {
		t.Fatalf("builds %q", states)
	}
	var live string
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT live_build_token::text FROM outbox.projection_versions WHERE projection_name = 'operations_timeline' AND projection_version = 2`).Scan(&live))
	if live != b2.BuildToken {
		t.Fatalf("version's live token %s, want the new build's %s", live, b2.BuildToken)
	}
	// An abandoned build is terminal, for the owner too.
	if _, err := testdb.Conn(t, f.Dsn, "outbox_owner").Exec(ctx, `UPDATE outbox.projection_builds SET state = 'building', ended_at = NULL WHERE build_id = $1::uuid`, b1.BuildID); consumerfix.SQLState(err) != "OB202" {
		t.Fatalf("revive an abandoned build: %v, want OB202", err)
	}
}

// pvSource is a source as claim_rebuild_sources hands it out.
type pvSource struct{ kind, id string }

// pvExpected is the documented order computed independently from the tables:
// (created_at | accepted_at, kind, id) over hot events, archived events and accepted observations.
func pvExpected(t *testing.T, db pgcall.DBTX) []pvSource {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT k, id::text FROM (
		SELECT 'event' AS k, event_id AS id, created_at AS at FROM outbox.outbox_events
		UNION ALL SELECT 'event', event_id, created_at FROM outbox.archived_events
		UNION ALL SELECT 'observation', observation_id, accepted_at FROM intake.observations) s
		ORDER BY at, k, id`)
	testfix.Must(t, err)
	defer rows.Close()
	var out []pvSource
	for rows.Next() {
		var s pvSource
		testfix.Must(t, rows.Scan(&s.kind, &s.id))
		out = append(out, s)
	}
	testfix.Must(t, rows.Err())
	return out
}

// R-PV-1: claim_rebuild_sources hands out every retained and every archived event and every
// accepted observation exactly once, in (source time, kind, id) order across batches, with the
// database's envelope digests; the delivery tables are untouched; an empty batch once done;
// unknown build or token → OB001; batch outside 1..1000 → 22023; other roles may not claim.
func TestProjectionVersionClaimRebuildSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	for i := 0; i < 3; i++ {
		f.RtDelivered(t)
	}
	if r := kernelfix.Archive(t, f.Ret, 0, 100); r.Archived != 3 {
		t.Fatalf("archived %d, want 3", r.Archived)
	}
	for i := 0; i < 4; i++ {
		kernelfix.Append(t, f.Admin, kernelfix.Metering, "agg-pv-"+testfix.NewUUID(), 1)
	}
	intakefix.AcceptN(t, f.Ik.EdgeA, 3)
	kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-pv-"+testfix.NewUUID(), 1)
	want := pvExpected(t, f.Admin)
	if len(want) != 11 || consumerfix.Count(t, f.Admin, `SELECT count(*) FROM outbox.archived_events`) != 3 {
		t.Fatalf("fixture: %d sources", len(want))
	}
	deliveries := func() string {
		var s string
		testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT coalesce(string_agg(to_jsonb(d)::text, E'\n' ORDER BY destination, event_id), '') FROM outbox.outbox_deliveries d`).Scan(&s))
		return s
	}
	before := deliveries()

	b, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	for _, n := range []int{0, 1001} {
		if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, b.BuildID, b.BuildToken, n); consumerfix.SQLState(err) != "22023" {
			t.Fatalf("batch %d: %v, want 22023", n, err)
		}
	}
	for _, bad := range [][2]string{{b.BuildID, testfix.NewUUID()}, {testfix.NewUUID(), b.BuildToken}} {
		if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, bad[0], bad[1], 5); consumerfix.SQLState(err) != "OB001" {
			t.Fatalf("claim %v: %v, want OB001", bad, err)
		}
	}
	for _, role := range []string{"outbox_dispatcher", "outbox_consumer", "outbox_registrar"} {
		if _, err := pgcall.ClaimRebuildSources(ctx, testdb.Conn(t, f.Dsn, role), b.BuildID, b.BuildToken, 5); consumerfix.SQLState(err) != "42501" {
			t.Fatalf("%s claims: %v, want 42501", role, err)
		}
	}

	var got []pvSource
	var sizes []int
	for {
		batch, err := pgcall.ClaimRebuildSources(ctx, f.Proj, b.BuildID, b.BuildToken, 3)
		testfix.Must(t, err)
		sizes = append(sizes, len(batch))
		if len(batch) == 0 {
			break
		}
		for _, s := range batch {
			got = append(got, pvSource{s.Kind, s.ID})
			c, err := canon.Canonicalize(s.Envelope)
			testfix.Must(t, err)
			sha, err := canon.SHA256Hex(c)
			testfix.Must(t, err)
			if sha != s.EnvelopeSHA256 {
				t.Errorf("%s %s: envelope digest %s, the envelope's is %s", s.Kind, s.ID, s.EnvelopeSHA256, sha)
			}
			idKey := "eventId"
			if s.Kind == pgcall.RebuildSourceObservation {
				idKey = "observationId"
			}
			var m map[string]any
			testfix.Must(t, json.Unmarshal(s.Envelope, &m))
			if m[idKey] != s.ID {
				t.Errorf("%s %s: envelope names %s %v", s.Kind, s.ID, idKey, m[idKey])
			}
		}
		if len(sizes) > 10 {
			t.Fatal("the claims do not end")
		}
	}
	if fmt.Sprint(sizes) != "[3 3 3 2 0]" {
		t.Fatalf("batch sizes %v, want [3 3 3 2 0]", sizes)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handed out\n  %v\nwant (documented order)\n  %v", got, want)
	}
	var archived int
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT count(*) FROM outbox.projection_build_sources s JOIN outbox.archived_events a ON a.event_id = s.source_id
		WHERE s.build_id = $1::uuid AND s.source_kind = 'event'`, b.BuildID).Scan(&archived))
	if archived != 3 {
		t.Fatalf("%d archived events handed out, want 3", archived)
	}
	if deliveries() != before {
		t.Fatal("claim_rebuild_sources changed the delivery tables")
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT sources_claimed::int FROM outbox.projection_builds WHERE build_id = $1::uuid`, b.BuildID); n != len(want) {
		t.Fatalf("build counts %d sources, want %d", n, len(want))
	}

	// New sources after the build caught up are handed out next, once; the ledger is append-only.
	late := kernelfix.Append(t, f.Admin, kernelfix.Metering, "agg-pv-late", 1)
	batch, err := pgcall.ClaimRebuildSources(ctx, f.Proj, b.BuildID, b.BuildToken, 1000)
	testfix.Must(t, err)
	if len(batch) != 1 || batch[0].ID != late {
		t.Fatalf("after a new append: %+v, want only %s", batch, late)
	}
	if _, err := testdb.Conn(t, f.Dsn, "outbox_owner").Exec(ctx, `DELETE FROM outbox.projection_build_sources`); consumerfix.SQLState(err) != "OB202" {
		t.Fatalf("ledger delete: %v, want OB202", err)
	}

	// A new build (rotation) starts over: every source again, in the same order.
	b2, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	all, err := pgcall.ClaimRebuildSources(ctx, f.Proj, b2.BuildID, b2.BuildToken, 1000)
	testfix.Must(t, err)
	if len(all) != len(want)+1 {
		t.Fatalf("new build: %d sources, want %d", len(all), len(want)+1)
	}
}

// R-PV-1: concurrent claimers of one build never get the same source. Scripted first: A claims
// inside an open transaction, B's claim waits on the build row, and after A commits B gets the
// next sources (none of A's); then two claimers race in loops until the build is drained.
func TestProjectionVersionConcurrentClaimers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	for i := 0; i < 40; i++ {
		kernelfix.Append(t, f.Admin, kernelfix.Metering, fmt.Sprintf("agg-cc-%d", i), 1)
	}
	intakefix.AcceptN(t, f.Ik.EdgeA, 10)
	want := pvExpected(t, f.Admin)
	b, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)

	a := testdb.Conn(t, f.Dsn, "outbox_projector")
	c := testdb.Conn(t, f.Dsn, "outbox_projector")
	var cPID int
	testfix.Must(t, c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&cPID))
	tx, err := a.Begin(ctx)
	testfix.Must(t, err)
	first, err := pgcall.ClaimRebuildSources(ctx, tx, b.BuildID, b.BuildToken, 5)
	testfix.Must(t, err)
	type res struct {
		s   []pgcall.RebuildSource
		err error
	}
	done := make(chan res, 1)
	go func() {
		s, err := pgcall.ClaimRebuildSources(ctx, c, b.BuildID, b.BuildToken, 5)
		done <- res{s, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for consumerfix.Count(t, f.Admin, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, cPID) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second claimer never waited for the first")
		}
		time.Sleep(10 * time.Millisecond)
	}
	testfix.Must(t, tx.Commit(ctx))
	second := <-done
	testfix.Must(t, second.err)
	if len(first) != 5 || len(second.s) != 5 {
		t.Fatalf("scripted claims: %d and %d sources", len(first), len(second.s))
	}
	seen := map[pvSource]int{}
	for _, s := range append(append([]pgcall.RebuildSource{}, first...), second.s...) {
		seen[pvSource{s.Kind, s.ID}]++
	}
	for i, s := range want[:10] {
		if seen[s] != 1 {
			t.Fatalf("scripted claims: source %d (%v) handed out %d times", i, s, seen[s])
		}
	}

	// Two claimers racing until the build is drained.
	results := make(chan []pgcall.RebuildSource, 100)
	errs := make(chan error, 2)
	for _, conn := range []*pgx.Conn{a, c} {
		go func(conn *pgx.Conn) {
			for {
				batch, err := pgcall.ClaimRebuildSources(ctx, conn, b.BuildID, b.BuildToken, 3)
				if err != nil {
					errs <- err
					return
				}
				if len(batch) == 0 {
					errs <- nil
					return
				}
				results <- batch
			}
		}(conn)
	}
	for i := 0; i < 2; i++ {
		testfix.Must(t, <-errs)
	}
	close(results)
	for batch := range results {
		for _, s := range batch {
			seen[pvSource{s.Kind, s.ID}]++
		}
	}
	var dup []string
	for s, n := range seen {
		if n != 1 {
			dup = append(dup, fmt.Sprintf("%v×%d", s, n))
		}
	}
	sort.Strings(dup)
	if len(dup) > 0 || len(seen) != len(want) {
		t.Fatalf("%d distinct sources of %d; handed out more than once: %v", len(seen), len(want), dup)
	}
}

// pvOpsReceipt builds an operations_projection receipt of a fresh run.created envelope for
// operations_timeline@version.
func pvOpsReceipt(t *testing.T, version int, aggregate string) (json.RawMessage, receipt.Document, string) {
	t.Helper()
	env := testfix.Envelope(kernelfix.RunCreated, "2.0", aggregate, 1)
	raw, _ := json.Marshal(env)
	c, err := canon.Canonicalize(raw)
	testfix.Must(t, err)
	sha, err := canon.SHA256Hex(c)
	testfix.Must(t, err)
	doc, err := testdb.Receipts(t).Build(reference.OperationsProjectionKind, receipt.Params{Destination: kernelfix.DestCoreOps,
		ConsumerName: "operations_projector", EventID: env["eventId"].(string), EventEnvelopeSHA256: sha,
		ProjectionName: "operations_timeline", ProjectionVersion: version,
		EventType: kernelfix.RunCreated, EventSchemaVersion: "2.0"})
	testfix.Must(t, err)
	return c, doc, env["eventId"].(string)
}

// R-PV-1: the inbox functions check the version. A shadow receipt or revision without the live
// build token is OB001 (and a stale or foreign token), with it it is recorded under the shadow
// version; an unregistered version is OB802; the active version takes receipts exactly as
// before (no token; a token for it is OB001); a token without projection is 22023; after a
// rotation only the new token writes, and the shadow's receipt is then 'existing'.
func TestProjectionVersionInboxChecksVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	cons := f.Cons
	b, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	record := func(version int, env json.RawMessage, doc receipt.Document, token string) (pgcall.RecordReceiptResult, error) {
		return pgcall.RecordReceipt(ctx, cons, pgcall.RecordReceiptParams{ConsumerName: "operations_projector",
			ProjectionName: "operations_timeline", ProjectionVersion: version, EventEnvelope: env, Receipt: doc.Receipt,
			BuildToken: token})
	}
	observe := func(version int, aggregate, token string) (string, error) {
		return pgcall.ObserveRevision(ctx, cons, pgcall.ObserveRevisionParams{ConsumerName: "operations_projector",
			ProjectionName: "operations_timeline", ProjectionVersion: version, AggregateID: aggregate, AggregateRevision: 1,
			BuildToken: token})
	}

	env2, doc2, _ := pvOpsReceipt(t, 2, "run-shadow")
	for _, tok := range []string{"", testfix.NewUUID()} {
		if _, err := record(2, env2, doc2, tok); consumerfix.SQLState(err) != "OB001" || !errors.Is(err, pgcall.ErrFencingRejected) {
			t.Fatalf("shadow receipt with token %q: %v, want OB001", tok, err)
		}
		if _, err := observe(2, "run-shadow", tok); consumerfix.SQLState(err) != "OB001" {
			t.Fatalf("shadow revision with token %q: %v, want OB001", tok, err)
		}
	}
	if o, err := observe(2, "run-shadow", b.BuildToken); err != nil || o != pgcall.RevisionApply {
		t.Fatalf("shadow revision with the live token: %q, %v", o, err)
	}
	if r, err := record(2, env2, doc2, b.BuildToken); err != nil || r.Outcome != pgcall.ReceiptNew || r.Digest != doc2.Digest {
		t.Fatalf("shadow receipt with the live token: %+v, %v", r, err)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_name = 'operations_timeline' AND projection_version = 2`); n != 1 {
		t.Fatalf("%d receipts under the shadow version, want 1", n)
	}
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_revision_progress WHERE projection_version = 2 AND aggregate_id = 'run-shadow'`); n != 1 {
		t.Fatalf("%d progress rows under the shadow version, want 1", n)
	}

	// Unregistered version: OB802, with or without a token.
	env9, doc9, _ := pvOpsReceipt(t, 9, "run-nine")
	for _, tok := range []string{"", b.BuildToken} {
		if _, err := record(9, env9, doc9, tok); consumerfix.SQLState(err) != "OB802" || !errors.Is(err, pgcall.ErrProjectionNotRegistered) {
			t.Fatalf("unregistered version receipt (token %q): %v, want OB802", tok, err)
		}
		if _, err := observe(9, "run-nine", tok); consumerfix.SQLState(err) != "OB802" {
			t.Fatalf("unregistered version revision (token %q): %v, want OB802", tok, err)
		}
	}

	// The active version: unchanged (no token), a token is refused.
	env1, doc1, id1 := pvOpsReceipt(t, 1, "run-active")
	if _, err := record(1, env1, doc1, b.BuildToken); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("active version receipt with a build token: %v, want OB001", err)
	}
	if _, err := observe(1, "run-active", b.BuildToken); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("active version revision with a build token: %v, want OB001", err)
	}
	if o, err := observe(1, "run-active", ""); err != nil || o != pgcall.RevisionApply {
		t.Fatalf("active version revision: %q, %v", o, err)
	}
	if r, err := record(1, env1, doc1, ""); err != nil || r.Outcome != pgcall.ReceiptNew || r.Ref != doc1.Ref || r.Digest != doc1.Digest {
		t.Fatalf("active version receipt: %+v, %v (want the Go document's ref/digest)", r, err)
	}
	var stored string
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT receipt_document FROM inbox.inbox_receipts WHERE projection_version = 1 AND event_id = $1::uuid`, id1).Scan(&stored))
	if stored != string(doc1.Receipt) {
		t.Fatalf("active receipt stored\n  %s\nwant\n  %s", stored, doc1.Receipt)
	}

	// No projection: no version, and a token is 22023.
	menv, _, mdoc := consumerfix.EnvelopeAndReceipt(t, receipt.Fields{"consumerOutcome": "pv"})
	if _, err := pgcall.RecordReceipt(ctx, cons, pgcall.RecordReceiptParams{ConsumerName: consumerfix.Metering, EventEnvelope: menv,
		Receipt: mdoc.Receipt, BuildToken: b.BuildToken}); consumerfix.SQLState(err) != "22023" {
		t.Fatalf("token without projection: %v, want 22023", err)
	}
	if r, err := consumerfix.Record(ctx, cons, consumerfix.Metering, "", 0, menv, mdoc.Receipt); err != nil || r.Outcome != pgcall.ReceiptNew {
		t.Fatalf("receipt without projection: %+v, %v", r, err)
	}

	// Rotation: the old token is dead for writes; the new one meets the shadow's receipt as existing.
	b2, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	if _, err := record(2, env2, doc2, b.BuildToken); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("stale token after rotation: %v, want OB001", err)
	}
	if r, err := record(2, env2, doc2, b2.BuildToken); err != nil || r.Outcome != pgcall.ReceiptExisting || r.Digest != doc2.Digest {
		t.Fatalf("new build, same receipt: %+v, %v", r, err)
	}
	if o, err := observe(2, "run-shadow", b2.BuildToken); err != nil || o != pgcall.RevisionDuplicate {
		t.Fatalf("new build, same revision: %q, %v", o, err)
	}
}

// R-PV-1 fencing: a shadow receipt holds its version row FOR SHARE until it commits, so a
// restart (start_shadow_build's rotation) waits for it and a receipt under the old token never
// commits after the rotation.
func TestProjectionVersionRotationWaitsForShadowReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	b, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	env, doc, _ := pvOpsReceipt(t, 2, "run-fence")
	tx, err := f.Cons.Begin(ctx)
	testfix.Must(t, err)
	if _, err := pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{ConsumerName: "operations_projector",
		ProjectionName: "operations_timeline", ProjectionVersion: 2, EventEnvelope: env, Receipt: doc.Receipt,
		BuildToken: b.BuildToken}); err != nil {
		t.Fatal(err)
	}
	starter := testdb.Conn(t, f.Dsn, "outbox_projector")
	var pid int
	testfix.Must(t, starter.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	done := make(chan error, 1)
	go func() {
		_, err := pgcall.StartShadowBuild(ctx, starter, "operations_timeline", 2)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for consumerfix.Count(t, f.Admin, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, pid) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the rotation did not wait for the shadow receipt in flight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	testfix.Must(t, tx.Commit(ctx))
	testfix.Must(t, <-done)
	if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE projection_version = 2`); n != 1 {
		t.Fatalf("%d shadow receipts, want the one committed before the rotation", n)
	}
}
