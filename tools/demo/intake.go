package main

// The observation intake part of the demo (SPEC §11a; issue 22 item 6): the reference release's
// observation schemas and projector, two edge workloads sending request attempts and error
// occurrences through the Go client (package intake), a replayed submission, a conflicting one
// (the same id from the other workload), an over-quota burst, the reference observation
// projector draining them, and what the intake reports: outcomes, health windows, the
// observations' completeness proof.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/intake"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/readmodel"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
)

const (
	demoEdgeRole     = "pgoutbox_demo_edge"
	demoEdgeWorkload = "wp-demo-api-edge"
	demoWorkerRole   = "pgoutbox_demo_worker_edge"
	demoWorkerWL     = "wp-demo-worker-edge"
	demoPolicy       = "edge-errors-2026-01"
	demoEdgeQuota    = 40 // accepted per minute: the burst below goes over it
)

func (d *demo) runIntakeDemo(ctx context.Context) error {
	step("observation intake")
	admin, err := pgx.Connect(ctx, d.producerURL)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	for _, r := range []string{demoEdgeRole, demoWorkerRole} {
		if err := ensureRole(ctx, admin, r, "outbox_intake"); err != nil {
			return err
		}
	}
	projRole := consumerRole(reference.ObservationProjectorConsumer)
	if err := ensureRole(ctx, admin, projRole, "outbox_consumer"); err != nil {
		return err
	}
	if err := reference.InstallObservationLog(ctx, admin, "", projRole); err != nil {
		return err
	}
	reg, err := d.connectAs(ctx, "outbox_registrar")
	if err != nil {
		return err
	}
	defer reg.Close(ctx)
	rel, err := reference.LoadObservations()
	if err != nil {
		return err
	}
	if _, err := release.RegisterObservations(ctx, reg, rel); err != nil {
		return err
	}
	for _, w := range []pgcall.RegisterWorkloadParams{
		{DBRole: demoEdgeRole, WorkloadPrincipalID: demoEdgeWorkload, Service: "api-edge", Environment: "demo",
			MaxPerMinute: demoEdgeQuota, MaxBodyBytes: 16384, DeploymentID: "demo-1"},
		{DBRole: demoWorkerRole, WorkloadPrincipalID: demoWorkerWL, Service: "worker-edge", Environment: "demo",
			MaxPerMinute: 6000, MaxBodyBytes: 16384},
	} {
		if err := pgcall.RegisterWorkload(ctx, reg, w); err != nil {
			return err
		}
	}
	if err := pgcall.RegisterNormalizationPolicy(ctx, reg, demoEdgeWorkload, demoPolicy, []string{"upstream_timeout", "validation_failed"}); err != nil {
		return err
	}
	if err := pgcall.BindConsumerRole(ctx, reg, reference.ObservationProjectorConsumer, projRole); err != nil {
		return err
	}
	fmt.Printf("  registered %d observation schemas, projector %s, workloads %s (quota %d/min) and %s\n",
		len(rel.ObservationSchemas), reference.ObservationProjectorConsumer, demoEdgeWorkload, demoEdgeQuota, demoWorkerWL)

	edge, err := d.workloadClient(ctx, demoEdgeRole, demoEdgeWorkload)
	if err != nil {
		return err
	}
	defer func() { edge.c.Close(ctx); edge.pool.Close() }()
	worker, err := d.workloadClient(ctx, demoWorkerRole, demoWorkerWL)
	if err != nil {
		return err
	}
	defer func() { worker.c.Close(ctx); worker.pool.Close() }()

	var subs []intake.Submission
	for i := 0; i < 24; i++ {
		outcome, extra := "accepted", ""
		if i%8 == 7 {
			outcome, extra = "failed", `,"normalizedCode":"upstream_timeout","errorNormalizationPolicyVersion":"`+demoPolicy+`"`
		}
		subs = append(subs, intake.Submission{ObservationType: "request_attempt", ObservationSchemaVersion: 1,
			SourceClaimedObservedAt: time.Now().Add(-time.Second),
			Body: json.RawMessage(fmt.Sprintf(`{"requestId":"req-%04d","surface":"public_api","requestKind":"run_create","outcome":%q,"submissionState":"committed","httpStatusClass":"2xx","durationMs":%d%s}`,
				i, outcome, 20+i, extra))})
	}
	subs = append(subs, intake.Submission{ObservationType: "error_occurrence", ObservationSchemaVersion: 1,
		Body: json.RawMessage(`{"errorId":"err-0001","requestId":"req-0007","layer":"edge","phase":"admission","normalizedCode":"upstream_timeout","errorNormalizationPolicyVersion":"` + demoPolicy + `","severity":"error","certainty":"certain","retryDisposition":"retryable","compensationDisposition":"none","messageTemplateKey":"edge.upstream.timeout"}`)},
		intake.Submission{ObservationType: "error_occurrence", ObservationSchemaVersion: 1, // a code outside the workload's policy: OB702
			Body: json.RawMessage(`{"errorId":"err-0002","layer":"edge","phase":"admission","normalizedCode":"made_up_code","errorNormalizationPolicyVersion":"` + demoPolicy + `","severity":"error","certainty":"certain","retryDisposition":"unknown","compensationDisposition":"none","messageTemplateKey":"edge.unknown"}`)})
	first, err := edge.c.AcceptMany(ctx, subs)
	if err != nil {
		return err
	}
	tally := map[string]int{}
	count := func(os []intake.Outcome) {
		for _, o := range os {
			k := o.Outcome
			if o.SQLState != "" {
				k += " " + o.SQLState
			}
			tally[k]++
		}
	}
	count(first)
	// the same submission again (a client retry after a lost answer): accepted_existing
	replay := subs[0]
	replay.ObservationID = first[0].ObservationID
	again, err := edge.c.AcceptMany(ctx, []intake.Submission{replay})
	if err != nil {
		return err
	}
	count(again)
	// the same id from the other workload: conflict (OB701), nothing of the first revealed
	clash := replay
	clash.Body = json.RawMessage(`{"requestId":"req-other","surface":"private_api","requestKind":"job_poll","outcome":"accepted","submissionState":"committed"}`)
	conflict, err := worker.c.AcceptMany(ctx, []intake.Submission{clash})
	if err != nil {
		return err
	}
	count(conflict)
	// a burst over the edge's quota (more than a whole minute's quota, so some are refused even
	// when a new minute began): the rest of the minute is refused with retryAfterSeconds
	var burst []intake.Submission
	for i := 0; i < demoEdgeQuota+5; i++ {
		burst = append(burst, intake.Submission{ObservationType: "request_attempt", ObservationSchemaVersion: 1,
			Body: json.RawMessage(fmt.Sprintf(`{"requestId":"burst-%04d","surface":"public_api","requestKind":"run_read","outcome":"accepted","submissionState":"not_submitted"}`, i))})
	}
	over, err := edge.c.AcceptMany(ctx, burst)
	if err != nil {
		return err
	}
	count(over)
	retry := time.Duration(0)
	for _, o := range over {
		if d, ok := o.RetryAfter(); ok {
			retry = d
		}
	}
	// what the edge could not send (its own counting, like client discard reports)
	now := time.Now()
	if err := pgcall.RecordSendFailures(ctx, edge.pool, 2, now.Add(-time.Minute), now, "queue_full"); err != nil {
		return err
	}
	var keys []string
	for k := range tally {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-34s %d\n", k, tally[k])
	}
	if retry > 0 {
		fmt.Printf("  quota: the edge was told to retry after %s\n", retry)
	}
	if tally["accepted_existing"] != 1 || tally["conflict OB701"] != 1 || tally["rejected OB703"] == 0 || tally["rejected OB702"] != 1 {
		return fmt.Errorf("intake outcomes %v: want one replay, one conflict, one OB702 and quota refusals", tally)
	}

	// the reference observation projector drains what was accepted
	claimer, err := d.connectAs(ctx, "outbox_observation_projector")
	if err != nil {
		return err
	}
	defer claimer.Close(ctx)
	inbox, err := d.connectAs(ctx, projRole)
	if err != nil {
		return err
	}
	defer inbox.Close(ctx)
	p := &reference.ObservationProjector{Claimer: claimer, Inbox: inbox, Worker: "demo-observation-projector"}
	projected := 0
	for {
		n, err := p.RunOnce(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		projected += n
	}
	fmt.Printf("  observation projector: %d observations projected into %s.observation_log\n", projected, reference.ObservationSchema)

	aud, err := d.connectAs(ctx, "outbox_auditor")
	if err != nil {
		return err
	}
	defer aud.Close(ctx)
	hs, err := readmodel.LoadIntake(ctx, aud, time.Now())
	if err != nil {
		return err
	}
	for _, h := range hs {
		fmt.Printf("  health %-20s %-9s accepted %3d, send failures %d, rejections %d\n", h.WorkloadPrincipalID, h.Worst, h.Accepted, h.SendFailures, h.IntakeRejections)
	}
	var snap pgcall.CompletenessSnapshot
	if err := pgx.BeginTxFunc(ctx, aud, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		snap, err = pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{"sourceKind":"observation"}`))
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("  observation proof  %s (manifest %s)\n", snap.Status, snap.ManifestSHA256[:16])
	if snap.Status != "complete_for_supported_scope" {
		return fmt.Errorf("observation proof %s after the projector drained", snap.Status)
	}
	hits, err := pgcall.SearchExactID(ctx, aud, "observationId", first[0].ObservationID)
	if err != nil {
		return err
	}
	if len(hits) == 1 && hits[0].Reason != nil {
		fmt.Printf("  search observationId: %s (%s; an intake never answers not_found)\n", hits[0].Result, *hits[0].Reason)
	}
	return nil
}

type workloadClient struct {
	pool *pgxpool.Pool
	c    *intake.Client
}

// workloadClient is a pool whose sessions run as the workload role, and the intake client on it.
func (d *demo) workloadClient(ctx context.Context, role, workload string) (*workloadClient, error) {
	cfg, err := pgxpool.ParseConfig(d.producerURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c, err := intake.New(pool, intake.Options{Workload: workload})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &workloadClient{pool: pool, c: c}, nil
}
