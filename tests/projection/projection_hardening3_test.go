package projection

// Hardening, third round (issue 38; SPEC R-SEC-3, R-PV-2, R-PV-3): the projection-version tables
// hold against the owner's plain DML. The active pointer, build states, readiness proofs,
// boundaries, version history and the build ledger move only through their functions (a
// statement-level guard that reads the call stack); the legitimate path (build, freeze) still
// works in the same database.

import (
	"context"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

func TestOwnerDMLOnProjectionTablesRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := projectionfix.Setup(t)
	kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-h3", 1)
	build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
	testfix.Must(t, err)
	projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	before := func() string {
		var s string
		testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT string_agg(projection_name || '@' || projection_version || '=' || state, ',' ORDER BY 1)
			FROM outbox.projection_versions`).Scan(&s))
		return s
	}
	versions := before()
	owner := testdb.Conn(t, f.Dsn, "outbox_owner")
	sha := strings.Repeat("d", 64)
	for what, stmts := range map[string][]string{
		"the active pointer moved by two UPDATEs": {
			`UPDATE outbox.projection_versions SET state = 'frozen' WHERE projection_name = 'operations_timeline' AND state = 'active'`,
			`UPDATE outbox.projection_versions SET state = 'active', live_build_id = NULL, live_build_token = NULL WHERE projection_name = 'operations_timeline' AND projection_version = 2`},
		"a version registered directly": {`INSERT INTO outbox.projection_versions (projection_name, projection_version, semantic_definition_sha256, state)
			VALUES ('operations_timeline', 9, '` + sha + `', 'shadow')`},
		"a switched build revived": {`UPDATE outbox.projection_builds SET state = 'building' WHERE state = 'switched'`},
		"a build's token replaced": {`UPDATE outbox.projection_builds SET build_token = gen_random_uuid() WHERE build_id = '` + build.BuildID + `'`},
		"a made-up Switched proof": {`INSERT INTO outbox.cutover_readiness_proofs SELECT * FROM outbox.cutover_readiness_proofs WHERE false`},
		"a made-up boundary":       {`INSERT INTO outbox.cutover_boundaries SELECT * FROM outbox.cutover_boundaries WHERE false`},
		"boundary members":         {`INSERT INTO outbox.cutover_boundary_members SELECT * FROM outbox.cutover_boundary_members WHERE false`},
		"version history":          {`INSERT INTO outbox.projection_version_history (projection_name, projection_version, state, changed_by) VALUES ('operations_timeline', 2, 'active', 'x')`},
		"the build ledger":         {`INSERT INTO outbox.projection_build_sources SELECT * FROM outbox.projection_build_sources WHERE false`},
	} {
		tx, err := owner.Begin(ctx)
		testfix.Must(t, err)
		var st string
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				st = consumerfix.SQLState(err)
				break
			}
		}
		_ = tx.Rollback(ctx)
		if st != "OB202" {
			t.Fatalf("owner: %s: %q, want OB202", what, st)
		}
	}
	if got := before(); got != versions {
		t.Fatalf("versions changed: %s -> %s", versions, got)
	}
	// the functions still move them: the frozen build's token works, the old one is dead
	if _, err := pgcall.ClaimRebuildSources(ctx, f.Proj, build.BuildID, fz.BuildToken, 5); err != nil {
		t.Fatalf("claim with the frozen build's token: %v", err)
	}
}
