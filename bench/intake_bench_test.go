//go:build bench

package bench

// BenchmarkAcceptObservations measures the observation intake's hot path (SPEC §11a R-OB-2,
// HP-1; issue 22 item 7): each operation is one intake.accept_observations call of 100 new
// request-attempt observations (~120-byte bodies, 4 members judged against the schema) made
// through pgcall.AcceptObservations by a registered workload role on one connection, one commit
// per call (fsync on). The quota is 10,000,000 per minute so it never bites. Reported:
// observations accepted per second and µs per call. Target: ≥ 5,000 obs/s.
//
//	go test -tags bench -run '^$' -bench BenchmarkAcceptObservations -benchtime 50x ./bench/

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const benchIntakeSchema = `{"members": {
  "requestId":  {"type": "string", "required": true, "minLength": 1, "maxLength": 64},
  "outcome":    {"type": "enum", "required": true, "values": ["succeeded", "failed"]},
  "httpStatus": {"type": "integer", "minimum": 100, "maximum": 599},
  "durationMs": {"type": "integer", "minimum": 0}},
 "discriminator": "outcome"}`

// benchObservations is one batch of n new Submission@1 documents as a JSON array.
func benchObservations(b *testing.B, n, seq int) json.RawMessage {
	docs := make([]map[string]any, n)
	for i := range docs {
		docs[i] = map[string]any{
			"observationId": testfix.NewUUID(), "observationType": "request_attempt", "observationSchemaVersion": 1,
			"sourceClaimedObservedAt": "2026-12-04T10:00:00.123Z",
			"body": map[string]any{"requestId": fmt.Sprintf("req-%d-%d", seq, i), "outcome": "succeeded",
				"httpStatus": 200, "durationMs": 10 + i},
		}
	}
	out, err := json.Marshal(docs)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func BenchmarkAcceptObservations(b *testing.B) {
	const batch = 100
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	if _, err := admin.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_bench_intake') THEN
			CREATE ROLE outbox_bench_intake NOLOGIN; END IF;
		GRANT outbox_intake TO outbox_bench_intake;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		b.Fatal(err)
	}
	reg := testdb.Conn(b, dsn, "outbox_registrar")
	if err := pgcall.RegisterWorkload(ctx, reg, pgcall.RegisterWorkloadParams{DBRole: "outbox_bench_intake",
		WorkloadPrincipalID: "wp-bench", Service: "bench-edge", Environment: "bench", MaxPerMinute: 10_000_000}); err != nil {
		b.Fatal(err)
	}
	if _, err := pgcall.RegisterObservationSchema(ctx, reg, "request_attempt", 1, json.RawMessage(benchIntakeSchema)); err != nil {
		b.Fatal(err)
	}
	// one registered observation projector, as in a deployment: every accepted observation also
	// gets its work row (intake.observation_deliveries, the statement-level fan-out trigger)
	if err := pgcall.RegisterObservationProjector(ctx, reg, "bench-projector", "bench", 1); err != nil {
		b.Fatal(err)
	}
	conn := testdb.Conn(b, dsn, "outbox_bench_intake")
	call := func(docs json.RawMessage) {
		out, err := pgcall.AcceptObservations(ctx, conn, docs)
		if err != nil {
			b.Fatal(err)
		}
		if len(out) != batch {
			b.Fatalf("%d outcomes for %d", len(out), batch)
		}
		for _, o := range out {
			if o.Outcome != "accepted_new" {
				b.Fatalf("%s %s: %s", o.Outcome, o.SQLState, o.Detail)
			}
		}
	}
	for i := 0; i < 10; i++ { // warm up plans and caches
		call(benchObservations(b, batch, -1-i))
	}
	docs := make([]json.RawMessage, b.N) // built before the clock starts
	for i := range docs {
		docs[i] = benchObservations(b, batch, i)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		call(docs[i])
	}
	spent := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/spent.Seconds(), "obs/s")
	b.ReportMetric(float64(spent.Microseconds())/float64(b.N), "µs/call")
}
