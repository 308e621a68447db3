package tests

// R-PV-2, §11b OB810 (sql/038_cutover_same_database.sql): the cutover works only when the
// projector's inbox shares the outbox's database. A boundary whose consumer is neither bound here
// (inbox.consumer_roles) nor has any receipt of the projection in this inbox is refused with OB810
// before anything is written (no proof, no pointer move, no pause change); a receipt of the
// projection, or a binding, lets the same call through to its guards.

import (
	"context"
	"errors"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

func TestCutoverAcrossDatabasesRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("receipt of the projection here", func(t *testing.T) {
		t.Parallel()
		f := pvSetup(t)
		q2 := cvRegisterSet2(t, f.reg)
		a := dxAppend(t, f.admin, dxRunCreated, "run-ob810-a", 1)
		build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
		must(t, err)
		cvDrain(t, f, build.BuildID, build.BuildToken)
		fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
		must(t, err)

		before := cvState(t, f)
		_, err = pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
		if ckSQLState(err) != "OB810" || !errors.Is(err, pgcall.ErrCutoverAcrossDatabases) {
			t.Fatalf("cutover with no receipt and no binding of operations_projector here: %v, want OB810", err)
		}
		if after := cvState(t, f); after != before {
			t.Fatalf("OB810 changed state:\n  %s\n  %s", before, after)
		}
		if n := ckCount(t, f.admin, `SELECT count(*) FROM outbox.cutover_readiness_proofs`); n != 0 {
			t.Fatalf("OB810 wrote %d readiness proofs, want 0", n)
		}
		if p := cvProgress(t, f, build.BuildID); p.State == pgcall.CandidateSwitched || p.State == pgcall.CandidateBlocked {
			t.Fatalf("progress after OB810: %+v, want the build still frozen", p)
		}

		// the shadow's receipt in this inbox: the same call reaches its guards (b: v1 missing is
		// not a guard; the shadow has its receipt, so the switch goes through)
		must(t, cvReceipt(t, f, 2, fz.BuildToken, a))
		sw, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
		must(t, err)
		if sw.Result != pgcall.CutoverSwitched {
			t.Fatalf("cutover after the shadow's receipt landed here: %+v, want switched", sw)
		}
	})

	t.Run("consumer bound here, nothing to receive", func(t *testing.T) {
		t.Parallel()
		f := pvSetup(t)
		q2 := cvRegisterSet2(t, f.reg)
		build, err := pgcall.StartShadowBuild(ctx, f.proj, "operations_timeline", 2)
		must(t, err)
		cvDrain(t, f, build.BuildID, build.BuildToken)
		fz, err := pgcall.FreezeCutoverCandidate(ctx, f.proj, build.BuildID, build.BuildToken)
		must(t, err)
		if _, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2); ckSQLState(err) != "OB810" {
			t.Fatalf("empty projection, consumer unbound: %v, want OB810", err)
		}
		role, _ := shLogin(t, f.admin, f.dsn, "outbox_consumer")
		must(t, pgcall.BindConsumerRole(ctx, f.reg, "operations_projector", role))
		sw, err := pgcall.CutoverProjection(ctx, f.proj, build.BuildID, fz.BuildToken, q2)
		must(t, err)
		if sw.Result != pgcall.CutoverSwitched {
			t.Fatalf("cutover of an empty projection whose consumer is bound here: %+v, want switched", sw)
		}
		if got := cvState(t, f); got != "operations_timeline@1:frozen:- operations_timeline@2:active:- set=2 paused=" {
			t.Fatalf("after the switch: %s", got)
		}
	})
}
