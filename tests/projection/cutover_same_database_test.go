package projection

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
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

func TestCutoverAcrossDatabasesRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("receipt of the projection here", func(t *testing.T) {
		t.Parallel()
		f := projectionfix.Setup(t)
		q2 := projectionfix.RegisterSet2(t, f.Reg)
		a := kernelfix.Append(t, f.Admin, kernelfix.RunCreated, "run-ob810-a", 1)
		build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
		testfix.Must(t, err)
		projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
		fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
		testfix.Must(t, err)

		before := cvState(t, f)
		_, err = pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
		if consumerfix.SQLState(err) != "OB810" || !errors.Is(err, pgcall.ErrCutoverAcrossDatabases) {
			t.Fatalf("cutover with no receipt and no binding of operations_projector here: %v, want OB810", err)
		}
		if after := cvState(t, f); after != before {
			t.Fatalf("OB810 changed state:\n  %s\n  %s", before, after)
		}
		if n := consumerfix.Count(t, f.Admin, `SELECT count(*) FROM outbox.cutover_readiness_proofs`); n != 0 {
			t.Fatalf("OB810 wrote %d readiness proofs, want 0", n)
		}
		if p := cvProgress(t, f, build.BuildID); p.State == pgcall.CandidateSwitched || p.State == pgcall.CandidateBlocked {
			t.Fatalf("progress after OB810: %+v, want the build still frozen", p)
		}

		// the shadow's receipt in this inbox: the same call reaches its guards (b: v1 missing is
		// not a guard; the shadow has its receipt, so the switch goes through)
		testfix.Must(t, projectionfix.Receipt(t, f, 2, fz.BuildToken, a))
		sw, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
		testfix.Must(t, err)
		if sw.Result != pgcall.CutoverSwitched {
			t.Fatalf("cutover after the shadow's receipt landed here: %+v, want switched", sw)
		}
	})

	t.Run("consumer bound here, nothing to receive", func(t *testing.T) {
		t.Parallel()
		f := projectionfix.Setup(t)
		q2 := projectionfix.RegisterSet2(t, f.Reg)
		build, err := pgcall.StartShadowBuild(ctx, f.Proj, "operations_timeline", 2)
		testfix.Must(t, err)
		projectionfix.Drain(t, f, build.BuildID, build.BuildToken)
		fz, err := pgcall.FreezeCutoverCandidate(ctx, f.Proj, build.BuildID, build.BuildToken)
		testfix.Must(t, err)
		if _, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2); consumerfix.SQLState(err) != "OB810" {
			t.Fatalf("empty projection, consumer unbound: %v, want OB810", err)
		}
		role, _ := kernelfix.Login(t, f.Admin, f.Dsn, "outbox_consumer")
		testfix.Must(t, pgcall.BindConsumerRole(ctx, f.Reg, "operations_projector", role))
		sw, err := pgcall.CutoverProjection(ctx, f.Proj, build.BuildID, fz.BuildToken, q2)
		testfix.Must(t, err)
		if sw.Result != pgcall.CutoverSwitched {
			t.Fatalf("cutover of an empty projection whose consumer is bound here: %+v, want switched", sw)
		}
		if got := cvState(t, f); got != "operations_timeline@1:frozen:- operations_timeline@2:active:- set=2 paused=" {
			t.Fatalf("after the switch: %s", got)
		}
	})
}
