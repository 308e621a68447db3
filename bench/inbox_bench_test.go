//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// BenchmarkRecordReceipt measures one inbox.record_receipt call (SPEC D-2 "hot path for
// receipts") as outbox_consumer (SET LOCAL ROLE), with the ~1.3 KiB envelope of benchEvent and a metering
// receipt, inside one transaction that is rolled back (no commit, no fsync: the function's own
// cost plus one round trip):
//
//	slow_path           no candidate: the database canonicalizes the receipt twice and digests
//	                    the candidate with outbox.jcs_sha256;
//	hot_path            what the consumer kit sends: canonical envelope bytes, canonical receipt,
//	                    canonical candidate; the database runs outbox._jcs_text_problem on the
//	                    envelope and the receipt and never canonicalizes itself;
//	hot_path_free_check the same with outbox._jcs_text_problem replaced, in this benchmark's own
//	                    database only, by a function that returns NULL at once: the floor the hot
//	                    path reaches when the cheap text check costs nothing (its first body falls
//	                    back to the full canonicalizer).
//
// Reported: µs per call, and the self time per call of the four costliest kernel functions.
func BenchmarkRecordReceipt(b *testing.B) {
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	const consumerName, destination = "metering_input_processor_consumer", "metering_input_processor"

	type call struct{ env, rcpt, cand json.RawMessage }
	build := func(n int) []call {
		out := make([]call, n)
		for i := range out {
			env, _, err := producer.Envelope(benchEvent("execution.attempt-eligibility.finalized@1", "1", i))
			if err != nil {
				b.Fatal(err)
			}
			env, sha, err := canon.CanonicalizeDigest(env)
			if err != nil {
				b.Fatal(err)
			}
			var id struct{ EventID string }
			_ = json.Unmarshal(env, &id)
			doc, err := testdb.Receipts(b).Build(reference.MeteringInputProcessorKind, receipt.Params{Destination: destination,
				ConsumerName: consumerName, EventID: id.EventID, EventEnvelopeSHA256: sha,
				Fields: receipt.Fields{"consumerOutcome": "recorded"}})
			if err != nil {
				b.Fatal(err)
			}
			out[i] = call{env, doc.Receipt, doc.Candidate}
		}
		return out
	}
	run := func(b *testing.B, hot bool) {
		calls := build(b.N + 20)
		// A fresh session per run: its not yet flushed function statistics are this run's.
		conn := testdb.Conn(b, dsn, "")
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_consumer`); err != nil {
			b.Fatal(err)
		}
		record := func(c call) {
			p := pgcall.RecordReceiptParams{ConsumerName: consumerName, EventEnvelope: c.env, Receipt: c.rcpt}
			if hot {
				p.DigestCandidate = c.cand
			}
			if r, err := pgcall.RecordReceipt(ctx, tx, p); err != nil || r.Outcome != pgcall.ReceiptNew {
				b.Fatalf("record receipt: %+v, %v", r, err)
			}
		}
		for _, c := range calls[b.N:] { // warm-up: plans and caches
			record(c)
		}
		b.ResetTimer()
		start := time.Now()
		for _, c := range calls[:b.N] {
			record(c)
		}
		b.StopTimer()
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/call")
		// Where the time goes: self time per call of the costliest functions (warm-up included).
		rows, err := tx.Query(ctx, `SELECT funcname, self_time FROM pg_stat_xact_user_functions
			WHERE schemaname IN ('outbox', 'inbox') ORDER BY self_time DESC LIMIT 4`)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var ms float64
			if err := rows.Scan(&name, &ms); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(ms*1000/float64(len(calls)), name+"_self_µs/call")
		}
	}
	b.Run("slow_path", func(b *testing.B) { run(b, false) })
	b.Run("hot_path", func(b *testing.B) { run(b, true) })
	if _, err := admin.Exec(ctx, `CREATE OR REPLACE FUNCTION outbox._jcs_text_problem(p_text text) RETURNS text
		LANGUAGE sql STABLE AS $$ SELECT NULL::text $$`); err != nil {
		b.Fatal(err)
	}
	b.Run("hot_path_free_check", func(b *testing.B) { run(b, true) })
}
