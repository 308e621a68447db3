package tests

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
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
)

func TestReferenceObservationProjector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := ikSetup(t, ikOpts{maxPerMinute: 100000, maxBodyBytes: 16384, referenceSchemas: true})
	rel, err := reference.LoadObservations()
	must(t, err)
	if _, err := release.RegisterObservations(ctx, b.reg, rel); err != nil {
		t.Fatal(err)
	}
	must(t, pgcall.RegisterNormalizationPolicy(ctx, b.reg, ikWorkloadB, "edge-errors-1", []string{"upstream_timeout", "validation_failed"}))

	role, url := shLogin(t, b.admin, b.dsn, "outbox_consumer")
	must(t, pgcall.BindConsumerRole(ctx, b.reg, reference.ObservationProjectorConsumer, role))
	must(t, reference.InstallObservationLog(ctx, b.admin, "", role))
	inbox, err := pgx.Connect(ctx, url)
	must(t, err)
	defer inbox.Close(ctx)
	p := &reference.ObservationProjector{Claimer: testdb.Conn(t, b.dsn, "outbox_observation_projector"), Inbox: inbox, Batch: 7}

	var docs []json.RawMessage
	for i := 0; i < 10; i++ {
		docs = append(docs, ikJSON(t, map[string]any{
			"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
			"body": map[string]any{"requestId": "req-" + testfix.NewUUID()[:8], "surface": "public_api", "requestKind": "run_create",
				"outcome": "accepted", "submissionState": "committed", "httpStatusClass": "2xx", "durationMs": 31},
		}))
	}
	docs = append(docs, ikJSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
		"body": map[string]any{"requestId": "req-f", "surface": "public_api", "requestKind": "run_create", "outcome": "failed",
			"submissionState": "unknown", "normalizedCode": "upstream_timeout", "errorNormalizationPolicyVersion": "edge-errors-1"},
	}), ikJSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "error_occurrence", "observationSchemaVersion": 1,
		"body": map[string]any{"errorId": "err-1", "requestId": "req-f", "layer": "edge", "phase": "admission",
			"normalizedCode": "upstream_timeout", "errorNormalizationPolicyVersion": "edge-errors-1", "severity": "error",
			"certainty": "certain", "retryDisposition": "retryable", "compensationDisposition": "none",
			"messageTemplateKey": "edge.upstream.timeout"},
	}))
	for i, o := range ikAccept(t, b.edgeB, docs...) {
		if o.Outcome != "accepted_new" {
			t.Fatalf("reference submission %d: %+v", i, o)
		}
	}
	// the reference schemas are closed: an unknown member and a code outside the policy are OB702
	bad := ikAccept(t, b.edgeB, ikJSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "error_occurrence", "observationSchemaVersion": 1,
		"body": map[string]any{"errorId": "err-2", "layer": "edge", "phase": "admission", "normalizedCode": "not_in_policy",
			"errorNormalizationPolicyVersion": "edge-errors-1", "severity": "error", "certainty": "certain",
			"retryDisposition": "retryable", "compensationDisposition": "none", "messageTemplateKey": "k"},
	}), ikJSON(t, map[string]any{
		"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
		"body": map[string]any{"requestId": "r", "surface": "public_api", "requestKind": "k", "outcome": "accepted",
			"submissionState": "committed", "tenantName": "acme"},
	}))
	for _, o := range bad {
		ikWant(t, o, "rejected", "OB702")
	}

	total := 0
	for {
		n, err := p.RunOnce(ctx)
		must(t, err)
		if n == 0 {
			break
		}
		total += n
	}
	if total != len(docs) {
		t.Fatalf("projected %d, want %d", total, len(docs))
	}
	if n := ikCount(t, b.admin, `SELECT count(*) FROM refconsumer_observations.observation_log`); n != len(docs) {
		t.Fatalf("%d log rows, want %d", n, len(docs))
	}
	if n := ikCount(t, b.admin, `SELECT count(*) FROM refconsumer_observations.observation_log
		WHERE workload_principal_id = $1 AND observation_type = 'request_attempt' AND outcome = 'failed' AND normalized_code = 'upstream_timeout'`, ikWorkloadB); n != 1 {
		t.Fatalf("failed request attempt logged %d times", n)
	}
	var s pgcall.CompletenessSnapshot
	must(t, pgx.BeginTxFunc(ctx, b.auditor, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		s, err = pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{"sourceKind":"observation"}`))
		return err
	}))
	if s.Status != "complete_for_supported_scope" {
		t.Fatalf("observation proof after the projector drained: %s", s.Status)
	}
	run, err := pgcall.PurgeObservationPayloads(ctx, b.ret, 0, 100)
	must(t, err)
	if run.Purged != len(docs) || run.Skipped != 0 {
		t.Fatalf("purge after projection: %+v", run)
	}
	if n, err := p.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("projector after purge: %d %v", n, err)
	}
}
