package projection

// R-PV-2 (b), R-PV-3 (issue 24 item 2): the consumer kit dual-applies during a cutover. The
// reference operations projector serves version 1 online; version 2 is rebuilt from history
// (consumer.Rebuild), frozen, caught up; events appended after the freeze are delivered to a kit
// with DualApply (version 2, the build token): one inbox transaction applies each to both
// versions, with both receipts; the cutover then switches; deliveries now target version 2 and a
// kit configured the other way round (version 2, DualApply version 1 frozen, no token) keeps
// the rollback target current. Both versions have one content digest throughout.

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/readmodelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/readmodel"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/wire"
)

// daDrain delivers every core_operations delivery to kit (newest first, awaiting ones again
// after the others) and acknowledges them; returns how many were applied.
func daDrain(t *testing.T, disp pgcall.DBTX, kit *consumer.Consumer) int {
	t.Helper()
	ctx := context.Background()
	applied := 0
	for round := 0; round < 50; round++ {
		cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "pv-dual", Destinations: []string{"core_operations"},
			BatchSize: 1000, Lease: time.Minute})
		testfix.Must(t, err)
		if len(cs) == 0 {
			return applied
		}
		todo := make([]pgcall.ClaimedDelivery, 0, len(cs))
		for i := len(cs) - 1; i >= 0; i-- {
			todo = append(todo, cs[i])
		}
		for progress := true; progress && len(todo) > 0; {
			progress = false
			var left []pgcall.ClaimedDelivery
			for _, c := range todo {
				res := consumerfix.Deliver(t, kit, consumerfix.FromClaim(t, c))
				if res.Status != wire.Acknowledged {
					left = append(left, c)
					continue
				}
				f := pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}
				if _, err := pgcall.AckDelivery(ctx, disp, f, res.Ack, res.Receipt); err != nil {
					t.Fatal(err)
				}
				applied++
				progress = true
			}
			todo = left
		}
		if len(todo) > 0 {
			t.Fatalf("%d deliveries not applied (first: %s)", len(todo), todo[0].EventID)
		}
	}
	t.Fatal("deliveries do not end")
	return applied
}

// daWorld is one database that is producer, dispatcher and the reference operations projector's
// inbox, with operations_timeline v1 (active) and v2 (registered shadow) each in a schema of its
// own and registered for projection digests.
type daWorld struct {
	*consumerfix.Bundle
	admin, producer, disp, reg, projector, aud *pgx.Conn
	v1, v2                                     reference.Spec
}

func daSetup(t *testing.T) *daWorld {
	t.Helper()
	ctx := context.Background()
	b := consumerfix.Setup(t)
	w := &daWorld{Bundle: b, admin: testdb.Conn(t, b.Dsn, "")}
	testfix.ActivateReference(t, w.admin)
	w.producer = testdb.Conn(t, b.Dsn, "outbox_producer")
	w.disp = testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	w.reg = testdb.Conn(t, b.Dsn, "outbox_registrar")
	w.projector = testdb.Conn(t, b.Dsn, "outbox_projector")
	w.aud = testdb.Conn(t, b.Dsn, "outbox_auditor")
	w.v1 = consumerfix.Spec(t, reference.OperationsProjector)
	w.v2 = w.v1
	w.v2.Schema, w.v2.ProjectionVersion = "refconsumer_operations_v2", 2
	testfix.Must(t, w.v2.Install(ctx, b.Pool, consumerfix.Role))
	if _, err := pgcall.RegisterProjectionVersion(ctx, w.reg, reference.ProjectionName, 2, "unknown"); err != nil {
		t.Fatal(err)
	}
	for v, schema := range map[int]string{1: w.v1.Schema, 2: w.v2.Schema} {
		if _, err := w.admin.Exec(ctx, `GRANT USAGE ON SCHEMA `+schema+` TO outbox_owner; GRANT SELECT ON `+schema+`.projection_rows TO outbox_owner`); err != nil {
			t.Fatal(err)
		}
		if _, err := pgcall.RegisterProjectionRows(ctx, w.reg, reference.ProjectionName, v, schema+".projection_rows"); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// kit is the reference operations projector serving primary, dual-applying to dual when its
// Schema is set (token: the shadow's build token, "" for a frozen version).
func (w *daWorld) kit(t *testing.T, primary, dual reference.Spec, token string) *consumer.Consumer {
	t.Helper()
	cfg := primary.Config(w.Pool)
	cfg.Role = consumerfix.Role
	if dual.Schema != "" {
		cfg.DualApply = &consumer.DualTarget{ProjectionVersion: dual.ProjectionVersion, Apply: dual.Config(w.Pool).Apply, BuildToken: token}
	}
	c, err := consumer.New(context.Background(), cfg)
	testfix.Must(t, err)
	return c
}

// rebuild applies the build's rebuild sources to v2 through the kit (consumer.Rebuild).
func (w *daWorld) rebuild(t *testing.T, buildID, token string) consumer.RebuildStats {
	t.Helper()
	cfg := w.v2.Config(w.Pool)
	cfg.Role, cfg.BuildToken = consumerfix.Role, token
	r, err := consumer.New(context.Background(), cfg)
	testfix.Must(t, err)
	st, err := r.Rebuild(context.Background(), w.projector, buildID, 5)
	testfix.Must(t, err)
	return st
}

// same asserts that v1 and v2 have one content digest, rows, and no receipt anti-join (R-PV-4).
func (w *daWorld) same(t *testing.T, when string) {
	t.Helper()
	c, err := pgcall.CompareProjectionVersions(context.Background(), w.aud, reference.ProjectionName, 1, 2)
	testfix.Must(t, err)
	if !c.Same || c.RowsA == 0 || c.AntiJoin != 0 {
		t.Fatalf("%s: %+v", when, c)
	}
}

func TestProjectionDualApplyCutover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := daSetup(t)
	admin, producer, disp, reg, projector, aud := w.admin, w.producer, w.disp, w.reg, w.projector, w.aud
	produce := func(from, to int) {
		t.Helper()
		if err := (scenario.Producer{Conn: producer, Prefix: "da"}).Runs(ctx, from, to); err != nil {
			t.Fatal(err)
		}
	}
	v1, v2 := w.v1, w.v2
	kit := func(primary, dual reference.Spec, token string) *consumer.Consumer {
		t.Helper()
		return w.kit(t, primary, dual, token)
	}
	same := func(when string) {
		t.Helper()
		w.same(t, when)
	}

	// version 1 online
	produce(1, 4)
	daDrain(t, disp, kit(v1, reference.Spec{}, ""))

	// version 2: rebuild, freeze, catch up
	build, err := pgcall.StartShadowBuild(ctx, projector, reference.ProjectionName, 2)
	testfix.Must(t, err)
	rebuild := func(token string) consumer.RebuildStats {
		t.Helper()
		return w.rebuild(t, build.BuildID, token)
	}
	rebuild(build.BuildToken)
	produce(4, 5) // appended before the freeze: part of the boundary, still to be delivered to v1
	fz, err := pgcall.FreezeCutoverCandidate(ctx, projector, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	if st := rebuild(fz.BuildToken); st.Applied == 0 {
		t.Fatalf("catching up with the boundary applied nothing: %+v", st)
	}

	// after the freeze: deliveries (still version 1's) are dual-applied to the shadow
	produce(5, 7)
	dual := kit(v1, v2, fz.BuildToken)
	if n := daDrain(t, disp, dual); n == 0 {
		t.Fatal("nothing delivered after the freeze")
	}
	same("before the switch")

	q2 := projectionfix.RegisterSet2(t, reg)
	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, projector, "core_operations", "cutover operations_timeline@2"))
	sw, err := pgcall.CutoverProjection(ctx, projector, build.BuildID, fz.BuildToken, q2)
	testfix.Must(t, err)
	if sw.Result != pgcall.CutoverSwitched {
		t.Fatalf("cutover: %+v", sw)
	}

	// the status page lists the proof (R-PV-5)
	rows, err := pgcall.ConsoleReadinessProofs(ctx, aud, 10)
	testfix.Must(t, err)
	if len(rows) != 1 || rows[0].ProofID != sw.ProofID || rows[0].Result != "switched" || rows[0].FromVersion != 1 || rows[0].ToVersion != 2 {
		t.Fatalf("readiness proofs listed: %+v", rows)
	}
	srv := httptest.NewServer(&readmodel.Server{DB: aud, Gauges: readmodel.NewGauges()})
	defer srv.Close()
	if code, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/status"); code != 200 || !strings.Contains(page, `<td class="rp-result">switched</td>`) || !strings.Contains(page, sw.ProofID) {
		t.Fatalf("status page without the readiness proof: %d", code)
	}
	if _, err := pgcall.ConsoleReadinessProofs(ctx, disp, 10); consumerfix.SQLState(err) != "42501" {
		t.Fatalf("the dispatcher listing readiness proofs: %v, want 42501", err)
	}

	// after the switch: deliveries target version 2; the old kit (v1 + shadow token) is refused,
	// the kit the other way round keeps version 1 (frozen, the rollback target) current
	produce(7, 9)
	var eventID, raw string
	var target int
	testfix.Must(t, admin.QueryRow(ctx, `SELECT d.event_id::text, e.envelope::text, d.required_projection_version
		FROM outbox.outbox_deliveries d JOIN outbox.event_source e ON e.event_id = d.event_id
		WHERE d.destination = 'core_operations' AND d.status = 'pending' ORDER BY d.created_at LIMIT 1`).Scan(&eventID, &raw, &target))
	if target != 2 {
		t.Fatalf("a delivery after the switch targets version %d, want 2", target)
	}
	canonical, sum, err := canon.CanonicalizeDigest([]byte(raw))
	testfix.Must(t, err)
	d := wire.Delivery{Destination: "core_operations", ConsumerName: reference.OperationsProjector, EventID: eventID,
		Envelope: canonical, EnvelopeDigestAlgorithmVersion: canon.Algorithm, EnvelopeSHA256: sum,
		RequiredProjectionName: reference.ProjectionName, RequiredProjectionVersion: 2}
	if res := consumerfix.Deliver(t, dual, d); res.Status == wire.Acknowledged {
		t.Fatal("a kit still holding the shadow's token acknowledged after the switch")
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE event_id = $1::uuid`, eventID); n != 0 {
		t.Fatalf("the refused delivery left %d receipts", n)
	}
	back := kit(v2, v1, "")
	if n := daDrain(t, disp, back); n == 0 {
		t.Fatal("nothing delivered after the switch")
	}
	same("after the switch, with the rollback target dual-applied")
}
