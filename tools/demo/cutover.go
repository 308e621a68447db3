package main

// The projection cutover part of the demo (SPEC §11b; issue 24): in a database of its own where
// the operations projector's inbox sits beside the outbox (a cutover across databases is refused),
// producers keep appending while operations_timeline v1 is served online, v2 is rebuilt from the
// kernel's history (consumer.Rebuild), frozen, caught up and kept current by dual-apply
// (Config.DualApply); the cutover switches to v2 with a readiness proof, and the rollback returns
// to v1 by the same protocol. Both versions' content digests are printed at every step.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/wire"
)

const cutoverRole = "pgoutbox_demo_cutover_projector"

type cutoverDemo struct {
	url    string
	pool   *pgxpool.Pool
	conns  map[string]*pgx.Conn // kernel role -> session
	v1, v2 reference.Spec
	// receipts: the receipt kinds, loaded once from the database (the kits built below share it)
	receipts *receipt.Catalog
}

func (c *cutoverDemo) as(role string) *pgx.Conn { return c.conns[role] }

func runCutoverDemo(ctx context.Context, server string) error {
	step("projection cutover: operations_timeline v1 -> v2 while producers run, and back")
	url, err := reference.FreshDatabase(ctx, server, "pgoutbox_demo_cutover")
	if err != nil {
		return err
	}
	c := &cutoverDemo{url: url, conns: map[string]*pgx.Conn{}}
	for _, r := range []string{"", "outbox_registrar", "outbox_producer", "outbox_dispatcher", "outbox_projector", "outbox_auditor"} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if r != "" {
			if _, err := conn.Exec(ctx, "SET ROLE "+r); err != nil {
				return err
			}
		}
		c.conns[r] = conn
	}
	admin, reg := c.as(""), c.as("outbox_registrar")
	receipts, err := receipt.LoadCatalog(ctx, reg)
	if err != nil {
		return err
	}
	c.receipts = receipts
	if err := ensureRole(ctx, admin, cutoverRole, "outbox_consumer"); err != nil {
		return err
	}
	doc, err := reference.LoadRelease()
	if err != nil {
		return err
	}
	q1, err := pgcall.RegisterDeliverySet(ctx, reg, doc, reference.SourceRelease)
	if err != nil {
		return err
	}
	if err := pgcall.ActivateDeliverySet(ctx, reg, q1); err != nil {
		return err
	}
	if err := pgcall.BindConsumerRole(ctx, reg, reference.OperationsProjector, cutoverRole); err != nil {
		return err
	}
	c.v1, _ = reference.Lookup(reference.OperationsProjector)
	c.v2 = c.v1
	c.v2.Schema, c.v2.ProjectionVersion = "refconsumer_operations_v2", 2
	if _, err := pgcall.RegisterProjectionVersion(ctx, reg, reference.ProjectionName, 2, "unknown"); err != nil {
		return err
	}
	for _, s := range []reference.Spec{c.v1, c.v2} {
		if err := s.Install(ctx, admin, cutoverRole); err != nil {
			return err
		}
		if _, err := admin.Exec(ctx, `GRANT USAGE ON SCHEMA `+s.Schema+` TO outbox_owner; GRANT SELECT ON `+s.Schema+`.projection_rows TO outbox_owner`); err != nil {
			return err
		}
		if _, err := pgcall.RegisterProjectionRows(ctx, reg, reference.ProjectionName, s.ProjectionVersion, s.Schema+".projection_rows"); err != nil {
			return err
		}
	}
	if c.pool, err = pgxpool.New(ctx, url); err != nil {
		return err
	}
	defer c.pool.Close()
	fmt.Printf("  database %s: outbox and the operations projector's inbox side by side; v1 in %s, v2 in %s\n",
		redact(url), c.v1.Schema, c.v2.Schema)

	// producers keep appending until told to stop
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var produced int
	var produceErr error
	prod, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer prod.Close(context.WithoutCancel(ctx))
	if _, err := prod.Exec(ctx, "SET ROLE outbox_producer"); err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for r := 1; r <= 400; r++ { // a business run (13 events) every 60 ms until stopped
			select {
			case <-stop:
				return
			case <-time.After(60 * time.Millisecond):
			}
			p := scenario.Producer{Conn: prod, Prefix: "cut", Committed: func(ids []string) { produced += len(ids) }}
			if err := p.Runs(ctx, r, r+1); err != nil {
				produceErr = err
				return
			}
		}
	}()
	stopProducers := func() error {
		close(stop)
		wg.Wait()
		return produceErr
	}

	online := c.kit(c.v1, nil, "")
	n := 0
	for i := 0; i < 10; i++ { // serve v1 while the producers append
		time.Sleep(50 * time.Millisecond)
		m, err := c.drain(ctx, online)
		if err != nil {
			return err
		}
		n += m
	}
	fmt.Printf("  v1 online: %d deliveries applied while the producers run\n", n)

	build, err := pgcall.StartShadowBuild(ctx, c.as("outbox_projector"), reference.ProjectionName, 2)
	if err != nil {
		return err
	}
	st, err := c.rebuild(ctx, c.v2, build.BuildID, build.BuildToken)
	if err != nil {
		return err
	}
	fmt.Printf("  v2 shadow build %s: %d events rebuilt from history (%d sources claimed)\n", build.BuildID[:8], st.Applied, st.Claimed)
	if n, err = c.drain(ctx, online); err != nil {
		return err
	}
	fmt.Printf("  v1 online meanwhile: %d more deliveries\n", n)
	fz, err := pgcall.FreezeCutoverCandidate(ctx, c.as("outbox_projector"), build.BuildID, build.BuildToken)
	if err != nil {
		return err
	}
	if st, err = c.rebuild(ctx, c.v2, build.BuildID, fz.BuildToken); err != nil {
		return err
	}
	fmt.Printf("  frozen: boundary %s..., caught up %d more; the old token is void\n", fz.BoundarySHA256[:16], st.Applied)
	dual := c.kit(c.v1, &c.v2, fz.BuildToken)
	if n, err = c.drain(ctx, dual); err != nil {
		return err
	}
	fmt.Printf("  dual-apply: %d deliveries applied to v1 (acknowledging) and v2 in one inbox transaction each\n", n)
	dualApplied := n
	if err := stopProducers(); err != nil {
		return err
	}
	if dualApplied == 0 {
		// a slow machine: the producers finished before the freeze; two more business runs
		// after the boundary, so the dual-apply is shown, not skipped
		late := scenario.Producer{Conn: prod, Prefix: "cut-late", Committed: func(ids []string) { produced += len(ids) }}
		if err := late.Runs(ctx, 1, 3); err != nil {
			return err
		}
	}
	if n, err = c.settle(ctx, dual); err != nil {
		return err
	}
	dualApplied += n
	fmt.Printf("  producers stopped after %d events; %d more dual-applied\n", produced, n)
	if dualApplied == 0 {
		return errors.New("cutover demo: no delivery after the boundary was dual-applied")
	}
	if err := c.digests(ctx, "before the switch"); err != nil {
		return err
	}

	doc2, err := release.RetargetProjection(doc, 2, reference.ProjectionName, 2)
	if err != nil {
		return err
	}
	q2, err := pgcall.RegisterDeliverySet(ctx, reg, doc2, "demo-operations-timeline-v2")
	if err != nil {
		return err
	}
	if err := c.cutover(ctx, build.BuildID, fz.BuildToken, q2); err != nil {
		return err
	}

	// after the switch: deliveries target v2; v1 is frozen, kept current through the rollback window
	swapped := c.kit(c.v2, &c.v1, "")
	if err := (scenario.Producer{Conn: prod, Prefix: "after"}).Runs(ctx, 1, 3); err != nil {
		return err
	}
	if n, err = c.settle(ctx, swapped); err != nil {
		return err
	}
	fmt.Printf("  after the switch: %d deliveries target v2, dual-applied to the frozen v1\n", n)
	if err := c.digests(ctx, "after the switch"); err != nil {
		return err
	}

	// rollback: the same protocol towards the frozen v1
	back, err := pgcall.StartShadowBuild(ctx, c.as("outbox_projector"), reference.ProjectionName, 1)
	if err != nil {
		return err
	}
	// v1 holds every event already (dual-applied): the rollback build hands its sources out and
	// the kit finds each receipt in place, writing nothing
	if _, err := c.rebuild(ctx, c.v1, back.BuildID, back.BuildToken); err != nil {
		return err
	}
	bfz, err := pgcall.FreezeCutoverCandidate(ctx, c.as("outbox_projector"), back.BuildID, back.BuildToken)
	if err != nil {
		return err
	}
	if _, err := c.rebuild(ctx, c.v1, back.BuildID, bfz.BuildToken); err != nil {
		return err
	}
	if err := c.cutover(ctx, back.BuildID, bfz.BuildToken, q1); err != nil {
		return err
	}
	return c.digests(ctx, "after the rollback")
}

func (c *cutoverDemo) kit(primary reference.Spec, dual *reference.Spec, token string) *consumer.Consumer {
	cfg := primary.Config(c.pool)
	cfg.Role = cutoverRole
	cfg.Logger, cfg.Catalog = quietLogger(), c.receipts
	if dual != nil {
		cfg.DualApply = &consumer.DualTarget{ProjectionVersion: dual.ProjectionVersion, Apply: dual.Config(c.pool).Apply, BuildToken: token}
	}
	k, err := consumer.New(context.Background(), cfg) // the catalog is loaded: no database call
	if err != nil {
		panic(err) // a programming error of the demo
	}
	return k
}

func (c *cutoverDemo) rebuild(ctx context.Context, spec reference.Spec, buildID, token string) (consumer.RebuildStats, error) {
	cfg := spec.Config(c.pool)
	cfg.Role, cfg.BuildToken, cfg.Logger, cfg.Catalog = cutoverRole, token, quietLogger(), c.receipts
	k, err := consumer.New(ctx, cfg)
	if err != nil {
		return consumer.RebuildStats{}, err
	}
	return k.Rebuild(ctx, c.as("outbox_projector"), buildID, 100)
}

// drain hands every due core_operations delivery to k (as the dispatcher does, in-process) and
// records its answer; deliveries waiting for an earlier revision are handed over again after the
// others. It returns the number acknowledged.
func (c *cutoverDemo) drain(ctx context.Context, k *consumer.Consumer) (int, error) {
	disp := c.as("outbox_dispatcher")
	acked := 0
	last := ""
	for round := 0; round < 100; round++ {
		cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "demo-cutover", Destinations: []string{"core_operations"},
			BatchSize: 500, Lease: time.Minute})
		if err != nil || len(cs) == 0 {
			return acked, err
		}
		todo := cs
		for progress := true; progress && len(todo) > 0; {
			progress = false
			var left []pgcall.ClaimedDelivery
			last = ""
			for _, cl := range todo {
				d, code := dispatcher.Verify(cl) // what the dispatcher sends
				if code != "" {
					return acked, fmt.Errorf("event %s: %s", cl.EventID, code)
				}
				res, err := k.Deliver(ctx, d)
				if err != nil {
					return acked, err
				}
				f := pgcall.Fence{Destination: cl.Destination, EventID: cl.EventID, AttemptID: cl.AttemptID, LeaseToken: cl.LeaseToken}
				switch res.Status {
				case wire.Acknowledged:
					if _, err := pgcall.AckDelivery(ctx, disp, f, res.Ack, res.Receipt); err != nil {
						return acked, err
					}
					acked++
					progress = true
				case wire.NonRetryable:
					if err := pgcall.QuarantineDelivery(ctx, disp, f, res.Code, res.Code, nil); err != nil {
						return acked, err
					}
					progress = true
				default:
					left = append(left, cl)
					last = res.Code + "/" + res.Ref
				}
			}
			todo = left
		}
		// waiting for an earlier revision a producer has not committed yet: back to pending
		for _, cl := range todo {
			f := pgcall.Fence{Destination: cl.Destination, EventID: cl.EventID, AttemptID: cl.AttemptID, LeaseToken: cl.LeaseToken}
			ref := "revision_gap"
			if _, err := pgcall.RetryDelivery(ctx, disp, f, consumer.CodeAwaitingRevision, &ref); err != nil {
				return acked, fmt.Errorf("retry (%s): %w", last, err)
			}
		}
		if len(todo) == len(cs) {
			return acked, nil // nothing more can be applied now
		}
	}
	return acked, errors.New("deliveries do not end")
}

// settle drains with k until no core_operations delivery is pending or leased (retried ones come
// back after their backoff), within a minute.
func (c *cutoverDemo) settle(ctx context.Context, k *consumer.Consumer) (int, error) {
	total := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		n, err := c.drain(ctx, k)
		total += n
		if err != nil {
			return total, err
		}
		var open int
		if err := c.as("").QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_deliveries
			WHERE destination = 'core_operations' AND status IN ('pending', 'leased')`).Scan(&open); err != nil {
			return total, err
		}
		if open == 0 {
			return total, nil
		}
	}
	return total, errors.New("core_operations deliveries still open after a minute")
}

func (c *cutoverDemo) cutover(ctx context.Context, buildID, token string, q pgcall.Quartet) error {
	proj := c.as("outbox_projector")
	if err := pgcall.PauseDestinationClaims(ctx, proj, "core_operations", "demo cutover"); err != nil {
		return err
	}
	r, err := pgcall.CutoverProjection(ctx, proj, buildID, token, q)
	if err != nil {
		return err
	}
	doc, err := pgcall.ReadReadinessProof(ctx, c.as("outbox_auditor"), r.ProofID)
	if err != nil {
		return err
	}
	var p struct {
		Result      string         `json:"result"`
		Direction   string         `json:"direction"`
		FromVersion int            `json:"fromVersion"`
		ToVersion   int            `json:"toVersion"`
		Guards      map[string]any `json:"guards"`
	}
	if err := json.Unmarshal(doc, &p); err != nil {
		return err
	}
	fmt.Printf("  cutover %s: %s v%d -> v%d, CutoverReadinessProof@1 %s (sha256 %s...), delivery set %d active; guards %v\n",
		p.Direction, r.Result, p.FromVersion, p.ToVersion, r.ProofID[:8], r.ProofSHA256[:16], q.DeliverySetVersion, p.Guards)
	if r.Result != pgcall.CutoverSwitched {
		return fmt.Errorf("cutover blocked: %v", r.Reasons)
	}
	return nil
}

func (c *cutoverDemo) digests(ctx context.Context, when string) error {
	cmp, err := pgcall.CompareProjectionVersions(ctx, c.as("outbox_auditor"), reference.ProjectionName, 1, 2)
	if err != nil {
		return err
	}
	fmt.Printf("  %-22s v1 %s... v2 %s... (%d rows each): same %t, receipt anti-join %d\n", when+":",
		cmp.DigestA[:16], cmp.DigestB[:16], cmp.RowsA, cmp.Same, cmp.AntiJoin)
	if !cmp.Same || cmp.AntiJoin != 0 {
		return fmt.Errorf("versions differ %s: %v", when, cmp.SampleDifferences)
	}
	return nil
}

// quietLogger drops the kit's informational lines (the demo prints its own summary).
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
