//go:build bench

package bench

// Dispatch benchmarks (SPEC R-CL-6, issue "Dispatch primitives in SQL"): BenchmarkClaimAck
// (claim-and-ack cycle rate on one connection, batch 1 and batch 100) and BenchmarkClaimLatency
// (one claim_deliveries(batch 100) at a backlog of 10^3 vs 10^6 pending deliveries, interleaved;
// the ratio should stay near 1). Each latency claim runs in BEGIN ... ROLLBACK so the backlog
// stays constant; the 10^6 backlog is generated in the database with every trigger active.
//
// How the backlog is generated: docs/benchmarks.md#dispatch-benchmarks-benchdispatch_bench_testgo.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const benchDest = "metering_input_processor"

// benchBacklogSQL inserts $1 events + deliveries (one transaction) as outbox_owner.
const benchBacklogSQL = `
WITH q AS (
    SELECT delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest
      FROM outbox.delivery_set_versions WHERE status = 'active'
), src AS (
    SELECT gen_random_uuid() AS event_id, 'bagg-' || ($2::bigint + g) AS aggregate_id, $2::bigint + g AS n,
           clock_timestamp() AS occurred_at
      FROM generate_series(1, $1::bigint) AS g
), canon AS (
    SELECT s.*, format('{"aggregateId":"%s","aggregateRevision":1,"eventId":"%s","eventSchemaVersion":"1","eventType":"execution.attempt-eligibility.finalized@1","occurredAt":"%s","payload":{"n":%s},"tenant":{"tenantId":"tenant-1","tenantKind":"organization","workspaceId":"workspace-1"}}',
                       s.aggregate_id, s.event_id, to_char(s.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), s.n) AS canonical
      FROM src AS s
), ev AS (
    INSERT INTO outbox.outbox_events (event_id, event_type, schema_version, delivery_set_version,
           delivery_set_definition_schema_version, delivery_set_definition_digest_algorithm_version,
           delivery_set_definition_digest, aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id,
           event_payload, event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at)
    SELECT c.event_id, 'execution.attempt-eligibility.finalized@1', '1', q.delivery_set_version,
           q.definition_schema_version, q.digest_algorithm_version, q.definition_digest, c.aggregate_id, 1,
           'organization', 'tenant-1', 'workspace-1', jsonb_build_object('n', c.n), 'jcs-sha256-v1',
           encode(sha256(convert_to(c.canonical, 'UTF8')), 'hex'), c.occurred_at
      FROM canon AS c, q
    RETURNING event_id, aggregate_id, delivery_set_version
)
INSERT INTO outbox.outbox_deliveries (destination, event_id, delivery_set_version, consumer_name,
       expected_receipt_type, expected_receipt_schema_version, required_projection_name,
       required_projection_version, mandatory, aggregate_id, aggregate_revision)
SELECT m.destination, ev.event_id, ev.delivery_set_version, m.consumer_name, m.expected_receipt_type,
       m.expected_receipt_schema_version, m.projection_name, m.projection_version, m.mandatory, ev.aggregate_id, 1
  FROM ev
  JOIN outbox.delivery_set_members AS m
    ON m.delivery_set_version = ev.delivery_set_version
   AND m.event_type = 'execution.attempt-eligibility.finalized@1' AND m.event_schema_version = '1' AND m.mandatory`

// benchBacklog fills db (a superuser connection) with n pending deliveries to benchDest.
func benchBacklog(b *testing.B, admin *pgx.Conn, n int) {
	b.Helper()
	ctx := context.Background()
	const chunk = 100000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		tx, err := admin.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_owner`); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, benchBacklogSQL, k, done); err != nil {
			b.Fatalf("backlog insert: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatalf("backlog commit: %v", err)
		}
	}
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE outbox.outbox_events`); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE outbox.outbox_deliveries`); err != nil {
		b.Fatal(err)
	}
	var problems int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM outbox.verify_event_digests(200)`).Scan(&problems); err != nil {
		b.Fatalf("verify_event_digests: %v", err)
	}
	if problems != 0 {
		b.Fatalf("generated backlog: %d digest problems", problems)
	}
}

// benchReceipt builds a valid metering receipt body and ActiveConsumerAck@1 for c (SPEC R-AK-1a).
func benchReceipt(b *testing.B, c pgcall.ClaimedDelivery) (ack, receipt json.RawMessage) {
	const p = "meteringInputProcessorConsumerReceipt"
	body := map[string]any{
		p + "SchemaVersion":                   c.ExpectedReceiptSchemaVersion,
		p + "DigestAlgorithmVersion":          "jcs-sha256-v1",
		"destination":                         c.Destination,
		"consumerName":                        c.ConsumerName,
		"eventId":                             c.EventID,
		"eventEnvelopeDigestAlgorithmVersion": c.EventEnvelopeDigestAlgorithmVersion,
		"eventEnvelopeSha256":                 c.EventEnvelopeSHA256,
	}
	digest, err := canon.Digest(body)
	if err != nil {
		b.Fatal(err)
	}
	ref := "bench-" + c.EventID
	body[p+"Ref"] = ref
	body[p+"Digest"] = digest
	body["committedAt"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	a := map[string]any{
		"destination": c.Destination, "consumerName": c.ConsumerName, "eventId": c.EventID,
		"eventEnvelopeDigestAlgorithmVersion": c.EventEnvelopeDigestAlgorithmVersion,
		"eventEnvelopeSha256":                 c.EventEnvelopeSHA256,
		"appliedReceipt": map[string]any{"kind": "metering_input_processor", p + "Ref": ref,
			p + "SchemaVersion": c.ExpectedReceiptSchemaVersion, p + "DigestAlgorithmVersion": "jcs-sha256-v1", p + "Digest": digest},
	}
	ab, err := json.Marshal(a)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	return ab, rb
}

// BenchmarkClaimAck: claim-and-ack cycle rate (deliveries/s) at batch 1 and batch 100.
func BenchmarkClaimAck(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch_%d", batch), func(b *testing.B) {
			ctx := context.Background()
			dsn := testdb.URL(b)
			admin := testdb.Conn(b, dsn, "")
			testfix.ActivateReference(b, admin)
			benchBacklog(b, admin, b.N)
			disp := testdb.Conn(b, dsn, "outbox_dispatcher")
			b.ResetTimer()
			start := time.Now()
			done := 0
			for done < b.N {
				cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "bench", Destinations: []string{benchDest},
					BatchSize: min(batch, b.N-done), Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if len(cs) == 0 {
					b.Fatalf("backlog exhausted after %d of %d", done, b.N)
				}
				// Acks as the dispatcher sends them: the receipt's digest candidate (D-2 hot path);
				// a claim of one is acked by ack_delivery, a larger claim by one ack_deliveries call.
				items := make([]pgcall.AckItem, len(cs))
				for i, c := range cs {
					ack, rc := benchReceipt(b, c)
					_, cand, err := testdb.Receipts(b).DigestCandidate(rc)
					if err != nil {
						b.Fatal(err)
					}
					items[i] = pgcall.AckItem{Fence: pgcall.Fence{Destination: c.Destination, EventID: c.EventID,
						AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, Ack: ack, Receipt: rc, ReceiptDigestCandidate: string(cand)}
				}
				if len(items) == 1 {
					it := items[0]
					if _, err := pgcall.AckDelivery(ctx, disp, it.Fence, it.Ack, it.Receipt, it.ReceiptDigestCandidate); err != nil {
						b.Fatal(err)
					}
				} else {
					outs, err := pgcall.AckDeliveries(ctx, disp, items)
					if err != nil {
						b.Fatal(err)
					}
					for _, o := range outs {
						if err := o.Err(); err != nil {
							b.Fatal(err)
						}
					}
				}
				done += len(cs)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(done)/elapsed.Seconds(), "deliveries/s")
		})
	}
}

// BenchmarkClaimLatency: one claim of 100 at backlog 10^3, 10^5 and 10^6 (R-CL-6), interleaved.
func BenchmarkClaimLatency(b *testing.B) {
	ctx := context.Background()
	type side struct {
		name string
		n    int
		disp *pgx.Conn
		took time.Duration
	}
	sides := []*side{{name: "backlog_1e3", n: 1000}, {name: "backlog_1e5", n: 100000}, {name: "backlog_1e6", n: 1000000}}
	for _, s := range sides {
		dsn := testdb.URL(b)
		admin := testdb.Conn(b, dsn, "")
		testfix.ActivateReference(b, admin)
		benchBacklog(b, admin, s.n)
		s.disp = testdb.Conn(b, dsn, "outbox_dispatcher")
	}
	claim := func(s *side) time.Duration {
		tx, err := s.disp.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(ctx)
		t0 := time.Now()
		cs, err := pgcall.ClaimDeliveries(ctx, tx, pgcall.ClaimParams{Worker: "bench", Destinations: []string{benchDest}, BatchSize: 100, Lease: time.Minute})
		d := time.Since(t0)
		if err != nil || len(cs) != 100 {
			b.Fatalf("%s claim: %d rows, %v", s.name, len(cs), err)
		}
		return d
	}
	for i := 0; i < 20; i++ { // warm up plans and caches
		for _, s := range sides {
			claim(s)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			s.took += claim(s)
		}
	}
	b.StopTimer()
	small := float64(sides[0].took) / float64(b.N)
	mid := float64(sides[1].took) / float64(b.N)
	large := float64(sides[2].took) / float64(b.N)
	b.ReportMetric(small/1e3, "backlog_1e3_µs/claim")
	b.ReportMetric(mid/1e3, "backlog_1e5_µs/claim")
	b.ReportMetric(large/1e3, "backlog_1e6_µs/claim")
	b.ReportMetric(mid/small, "ratio_1e5/1e3")
	b.ReportMetric(large/small, "ratio_1e6/1e3")
}
