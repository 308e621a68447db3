package projection

// R-PV-4 (issue 24 item 3): an online-built projection version equals its rebuild. The
// reference operations projector builds version 1 online from the delivery path, in an arrival
// order unlike the append order (deliveries handed over newest first: wallet-first
// reservations, later revisions before earlier ones); version 2 is then rebuilt as a shadow
// from the kernel's history alone (outbox.claim_rebuild_sources, consumer.Rebuild with the
// build token) into its own tables; both have one content digest.

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/wire"
)

func TestProjectionRebuildEqualsOnline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := consumerfix.Setup(t)
	admin := testdb.Conn(t, b.Dsn, "")
	testfix.ActivateReference(t, admin)
	producer := testdb.Conn(t, b.Dsn, "outbox_producer")
	// runs only: the scenario's deliberately conflicting second run.created of an operation is
	// decided by arrival (the first one wins, the other is refused), so it is left out here
	if err := (scenario.Producer{Conn: producer, Prefix: "pv"}).Runs(ctx, 1, 7); err != nil {
		t.Fatal(err)
	}
	disp := testdb.Conn(t, b.Dsn, "outbox_dispatcher")

	// version 1, online: every core_operations delivery, newest first, until none is left
	online := b.Kit(t, reference.OperationsProjector, nil)
	applied, refused := 0, 0
	for round := 0; round < 50; round++ {
		cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "pv-online", Destinations: []string{"core_operations"},
			BatchSize: 1000, Lease: time.Minute})
		testfix.Must(t, err)
		if len(cs) == 0 {
			break
		}
		// newest first; one awaiting an earlier revision is handed over again after the others
		todo := make([]pgcall.ClaimedDelivery, 0, len(cs))
		for i := len(cs) - 1; i >= 0; i-- {
			todo = append(todo, cs[i])
		}
		// and every reservation before any run, so the wallet-first path is taken whatever
		// order the claim returned (its order among equal created_at values is the event id's)
		sort.SliceStable(todo, func(i, j int) bool {
			return todo[i].EventType == "wallet.reserved@2.0" && todo[j].EventType != "wallet.reserved@2.0"
		})
		for progress := true; progress && len(todo) > 0; {
			progress = false
			var left []pgcall.ClaimedDelivery
			for _, c := range todo {
				res := consumerfix.Deliver(t, online, consumerfix.FromClaim(t, c))
				f := pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}
				switch res.Status {
				case wire.Acknowledged:
					if _, err := pgcall.AckDelivery(ctx, disp, f, res.Ack, res.Receipt); err != nil {
						t.Fatal(err)
					}
					applied++
					progress = true
				case wire.NonRetryable:
					testfix.Must(t, pgcall.QuarantineDelivery(ctx, disp, f, res.Code, res.Code, nil))
					refused++
					progress = true
				default:
					left = append(left, c)
				}
			}
			todo = left
		}
		if len(todo) > 0 {
			t.Fatalf("%d deliveries wait for a revision no delivery brings", len(todo))
		}
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND status IN ('pending', 'leased')`); n != 0 {
		t.Fatalf("%d core_operations deliveries still open after the online build", n)
	}
	if applied == 0 {
		t.Fatal("the online build applied nothing")
	}

	// version 2, rebuilt as a shadow into its own schema
	reg := testdb.Conn(t, b.Dsn, "outbox_registrar")
	spec := consumerfix.Spec(t, reference.OperationsProjector)
	if _, err := pgcall.RegisterProjectionVersion(ctx, reg, reference.ProjectionName, 2, "unknown"); err != nil {
		t.Fatal(err)
	}
	v2 := spec
	v2.Schema, v2.ProjectionVersion = "refconsumer_operations_v2", 2
	testfix.Must(t, v2.Install(ctx, b.Pool, consumerfix.Role))
	for v, schema := range map[int]string{1: spec.Schema, 2: v2.Schema} {
		if _, err := admin.Exec(ctx, `GRANT USAGE ON SCHEMA `+schema+` TO outbox_owner; GRANT SELECT ON `+schema+`.projection_rows TO outbox_owner`); err != nil {
			t.Fatal(err)
		}
		if _, err := pgcall.RegisterProjectionRows(ctx, reg, reference.ProjectionName, v, schema+".projection_rows"); err != nil {
			t.Fatal(err)
		}
	}
	projector := testdb.Conn(t, b.Dsn, "outbox_projector")
	build, err := pgcall.StartShadowBuild(ctx, projector, reference.ProjectionName, 2)
	testfix.Must(t, err)
	cfg := v2.Config(b.Pool)
	cfg.Role, cfg.BuildToken = consumerfix.Role, build.BuildToken
	rebuilder, err := consumer.New(context.Background(), cfg)
	testfix.Must(t, err)
	st, err := rebuilder.Rebuild(ctx, projector, build.BuildID, 7)
	testfix.Must(t, err)
	if st.Applied != applied || len(st.Refused) != refused || st.Waiting != 0 {
		t.Fatalf("rebuild %+v; online applied %d, refused %d", st, applied, refused)
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND status IN ('pending', 'leased')`); n != 0 {
		t.Fatalf("the rebuild touched the delivery machinery: %d open deliveries", n)
	}

	// the arrival orders really differed: online, reservations arrived before their runs
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM refconsumer_operations.pending_unlinked_reservations WHERE linked_at IS NOT NULL`); n == 0 {
		t.Fatal("no wallet-first reservation online: the test does not vary the arrival order")
	}
	aud := testdb.Conn(t, b.Dsn, "outbox_auditor")
	c, err := pgcall.CompareProjectionVersions(ctx, aud, reference.ProjectionName, 1, 2)
	testfix.Must(t, err)
	if !c.Same || c.RowsA == 0 || c.RowsA != c.RowsB || c.AntiJoin != 0 || len(c.SampleDifferences) != 0 {
		t.Fatalf("online v1 vs rebuilt v2: %+v", c)
	}
	// a rebuild kit without the token is refused by the inbox (OB001), and one for the active
	// version cannot carry a token
	if _, err := consumer.New(context.Background(), func() consumer.Config {
		c := v2.Config(b.Pool)
		c.BuildToken = build.BuildToken
		c.ProjectionName = ""
		c.ProjectionVersion = 0
		return c
	}()); err == nil {
		t.Fatal("a BuildToken kit without a projection was accepted")
	}
}
