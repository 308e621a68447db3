//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// BenchmarkCompletenessProof (SPEC R-OP-2): how long one completeness proof of scope {} takes
// (outbox.take_completeness_snapshot in a REPEATABLE READ transaction) and how long its
// re-check takes (outbox.check_completeness, which rebuilds the member set), over
// PROOF_N events (default 100000) spread over the 4 reference destinations (metering,
// finalization coordinator, settlement catch-up, core_operations), every delivery
// acknowledged. Events are appended through producer.AppendMany (the real path, 1 KiB
// payloads); the acks are written in bulk by a superuser with triggers off, because the
// proof's cost depends on the rows, not on how the acks were recorded. Reported: ms per proof,
// ms per re-check, manifest size. Fixed work whatever -benchtime says (make bench runs every
// benchmark 2000x; 2000 proofs of 100k events would take hours): PROOF_TAKES proofs (default 2)
// are timed, b.N is ignored, as in the retention benchmarks.
func BenchmarkCompletenessProof(b *testing.B) {
	n := 100000
	if s := os.Getenv("PROOF_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	prod := testdb.Conn(b, dsn, "outbox_producer")
	types := [][2]string{
		{"execution.attempt-eligibility.finalized@1", "1"},   // metering_input_processor
		{"execution.run-finalization.closed@1", "1"},         // billing_finalization_coordinator
		{"metering.settlement-input.current-changed@1", "1"}, // billing_settlement_catch_up
		{"run.created@2.0", "2.0"},                           // core_operations
	}
	for done := 0; done < n; done += 500 {
		evs := make([]producer.Event, 0, 500)
		for i := done; i < done+500 && i < n; i++ {
			t := types[i%len(types)]
			evs = append(evs, benchEvent(t[0], t[1], i))
		}
		if _, err := producer.AppendMany(ctx, prod, evs); err != nil {
			b.Fatal(err)
		}
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{`SET LOCAL session_replication_role = replica`,
		`UPDATE outbox.outbox_deliveries SET status = 'acknowledged', delivered_at = now(),
		        ack_receipt_digest = repeat('a', 64), ack_receipt_ref = 'bench', ack_receipt_kind = 'bench'`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE outbox.outbox_events, outbox.outbox_deliveries`); err != nil {
		b.Fatal(err)
	}
	var dests int
	if err := admin.QueryRow(ctx, `SELECT count(DISTINCT destination) FROM outbox.outbox_deliveries`).Scan(&dests); err != nil {
		b.Fatal(err)
	}
	aud := testdb.Conn(b, dsn, "outbox_auditor")
	takes := 2
	if v, err := strconv.Atoi(os.Getenv("PROOF_TAKES")); err == nil && v > 0 {
		takes = v
	}
	var last pgcall.CompletenessSnapshot
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < takes; i++ {
		tx, err := aud.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			b.Fatal(err)
		}
		last, err = pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	take := time.Since(start) / time.Duration(takes)
	b.StopTimer()
	cs := time.Now()
	f, err := pgcall.CheckCompleteness(ctx, aud, last.ManifestID)
	if err != nil || f.Freshness != "verified_current" || last.Status != "complete_for_supported_scope" {
		b.Fatalf("proof %+v, check %+v, %v", last, f, err)
	}
	check := time.Since(cs)
	var size int64
	if err := admin.QueryRow(ctx, `SELECT octet_length(document) FROM outbox.completeness_manifests WHERE manifest_id = $1::uuid`, last.ManifestID).Scan(&size); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(take.Milliseconds()), "ms/proof")
	b.ReportMetric(float64(check.Milliseconds()), "ms/check")
	b.ReportMetric(float64(size)/1e6, "MB/manifest")
	fmt.Printf("completeness proof over %d events, %d destinations: take %v, check %v, manifest %.1f MB\n",
		n, dests, take.Round(time.Millisecond), check.Round(time.Millisecond), float64(size)/1e6)
}
