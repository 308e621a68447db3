package intake

// The reference observation projector end to end (SPEC R-OB-4, issue 22 items 3 and 4): the
// reference release's observation schemas and projector, observations of both reference types
// from a workload, the projector's claim → apply with receipt → ack loop, the log it writes, the
// observations' proof complete afterwards and the purge then allowed.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
)

func TestReferenceObservationProjector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 100000, MaxBodyBytes: 16384, ReferenceSchemas: true})
	rel, err := reference.LoadObservations()
	testfix.Must(t, err)
	if _, err := release.RegisterObservations(ctx, b.Reg, rel); err != nil {
		t.Fatal(err)
	}
	testfix.Must(t, pgcall.RegisterNormalizationPolicy(ctx, b.Reg, intakefix.WorkloadB, "edge-errors-1", []string{"upstream_timeout", "validation_failed"}))

	role, url := kernelfix.Login(t, b.Admin, b.Dsn, "outbox_consumer")
	testfix.Must(t, pgcall.BindConsumerRole(ctx, b.Reg, reference.ObservationProjectorConsumer, role))
	testfix.Must(t, reference.InstallObservationLog(ctx, b.Admin, "", role))
	inbox, err := pgx.Connect(ctx, url)
	testfix.Must(t, err)
	defer inbox.Close(ctx)
	p := &reference.ObservationProjector{Claimer: testdb.Conn(t, b.Dsn, "outbox_observation_projector"), Inbox: inbox, Batch: 7}

	var docs []json.RawMessage
	for i := 0; i < 10; i++ {
		docs = append(docs, intakefix.JSON(t, map[string]any{
			"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
			"body": map[string]any{"requestId": "req-" + testfix.NewUUID()[:8], "surface": "public_api", "requestKind": "run_create",
				"outcome": "accepted", "submissionState": "committed", "httpStatusClass": "2xx", "durationMs": 31},
		}))
	}
	docs = append(docs, intakefix.JSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
		"body": map[string]any{"requestId": "req-f", "surface": "public_api", "requestKind": "run_create", "outcome": "failed",
			"submissionState": "unknown", "normalizedCode": "upstream_timeout", "errorNormalizationPolicyVersion": "edge-errors-1"},
	}), intakefix.JSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "error_occurrence", "observationSchemaVersion": 1,
		"body": map[string]any{"errorId": "err-1", "requestId": "req-f", "layer": "edge", "phase": "admission",
			"normalizedCode": "upstream_timeout", "errorNormalizationPolicyVersion": "edge-errors-1", "severity": "error",
			"certainty": "certain", "retryDisposition": "retryable", "compensationDisposition": "none",
			"messageTemplateKey": "edge.upstream.timeout"},
	}))
	for i, o := range intakefix.Accept(t, b.EdgeB, docs...) {
		if o.Outcome != "accepted_new" {
			t.Fatalf("reference submission %d: %+v", i, o)
		}
	}
	// the reference schemas are closed: an unknown member and a code outside the policy are OB702
	bad := intakefix.Accept(t, b.EdgeB, intakefix.JSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "error_occurrence", "observationSchemaVersion": 1,
		"body": map[string]any{"errorId": "err-2", "layer": "edge", "phase": "admission", "normalizedCode": "not_in_policy",
			"errorNormalizationPolicyVersion": "edge-errors-1", "severity": "error", "certainty": "certain",
			"retryDisposition": "retryable", "compensationDisposition": "none", "messageTemplateKey": "k"},
	}), intakefix.JSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
		"body": map[string]any{"requestId": "r", "surface": "public_api", "requestKind": "k", "outcome": "accepted",
			"submissionState": "committed", "tenantName": "acme"},
	}))
	for _, o := range bad {
		intakefix.Want(t, o, "rejected", "OB702")
	}

	total := 0
	for {
		n, err := p.RunOnce(ctx)
		testfix.Must(t, err)
		if n == 0 {
			break
		}
		total += n
	}
	if total != len(docs) {
		t.Fatalf("projected %d, want %d", total, len(docs))
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM refconsumer_observations.observation_log`); n != len(docs) {
		t.Fatalf("%d log rows, want %d", n, len(docs))
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM refconsumer_observations.observation_log
		WHERE workload_principal_id = $1 AND observation_type = 'request_attempt' AND outcome = 'failed' AND normalized_code = 'upstream_timeout'`, intakefix.WorkloadB); n != 1 {
		t.Fatalf("failed request attempt logged %d times", n)
	}
	var s pgcall.CompletenessSnapshot
	testfix.Must(t, pgx.BeginTxFunc(ctx, b.Auditor, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		s, err = pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{"sourceKind":"observation"}`))
		return err
	}))
	if s.Status != "complete_for_supported_scope" {
		t.Fatalf("observation proof after the projector drained: %s", s.Status)
	}
	run, err := pgcall.PurgeObservationPayloads(ctx, b.Ret, 0, 100)
	testfix.Must(t, err)
	if run.Purged != len(docs) || run.Skipped != 0 {
		t.Fatalf("purge after projection: %+v", run)
	}
	if n, err := p.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("projector after purge: %d %v", n, err)
	}
}
